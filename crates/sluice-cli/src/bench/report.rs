//! Printing benchmark rows as an aligned table and writing them as JSON.

use std::path::Path;

/// A table printed row by row as results arrive.
#[derive(Debug)]
pub(crate) struct Table {
    widths: Vec<usize>,
}

impl Table {
    /// Prints the header and returns the table.
    pub(crate) fn start(columns: &[(&str, usize)]) -> Self {
        let widths: Vec<usize> = columns.iter().map(|(name, w)| (*w).max(name.len())).collect();
        let header: Vec<String> =
            columns.iter().zip(&widths).map(|((name, _), w)| format!("{name:>w$}")).collect();
        println!("{}", header.join("  "));
        println!("{}", widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>().join("  "));
        Table { widths }
    }

    /// Prints one row of already formatted cells.
    pub(crate) fn row(&self, cells: &[String]) {
        let line: Vec<String> =
            cells.iter().zip(&self.widths).map(|(c, w)| format!("{c:>w$}")).collect();
        println!("{}", line.join("  "));
    }
}

/// Writes `value` as pretty JSON to `path`, atomically (temp file + rename).
pub(crate) fn write_json(path: &Path, value: &serde_json::Value) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, serde_json::to_vec_pretty(value)?)?;
    std::fs::rename(&tmp, path)
}
