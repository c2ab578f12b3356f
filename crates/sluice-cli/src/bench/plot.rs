//! SVG plots in the style of the thesis figures: throughput against the
//! partition count (log scale), one line per strategy, one panel per record
//! size and thread count.

use std::collections::BTreeMap;
use std::path::Path;

use plotters::prelude::*;

/// One measured point.
#[derive(Debug, Clone)]
pub(crate) struct Point {
    pub(crate) record_bytes: usize,
    pub(crate) threads: usize,
    pub(crate) strategy: String,
    pub(crate) partitions: u32,
    pub(crate) mrecords_per_s: f64,
}

const COLORS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Writes the panels to an SVG file.
pub(crate) fn write_svg(path: &Path, points: &[Point]) -> Result<(), Box<dyn std::error::Error>> {
    let mut panels: BTreeMap<(usize, usize), Vec<&Point>> = BTreeMap::new();
    for p in points {
        panels.entry((p.record_bytes, p.threads)).or_default().push(p);
    }
    let sizes: Vec<usize> = {
        let mut s: Vec<usize> = panels.keys().map(|k| k.0).collect();
        s.dedup();
        s
    };
    let threads: Vec<usize> = {
        let mut t: Vec<usize> = panels.keys().map(|k| k.1).collect();
        t.sort_unstable();
        t.dedup();
        t
    };
    // One color per strategy across all panels.
    let mut names: Vec<&str> = points.iter().map(|p| p.strategy.as_str()).collect();
    names.sort_unstable();
    names.dedup();
    let (w, h) = (560 * threads.len().max(1) as u32, 380 * sizes.len().max(1) as u32);
    let root = SVGBackend::new(path, (w, h)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((sizes.len().max(1), threads.len().max(1)));
    for (i, size) in sizes.iter().enumerate() {
        for (j, thr) in threads.iter().enumerate() {
            let Some(pts) = panels.get(&(*size, *thr)) else { continue };
            let area = &areas[i * threads.len() + j];
            let x_max = pts.iter().map(|p| p.partitions).max().unwrap_or(2).max(2);
            let y_max = pts.iter().map(|p| p.mrecords_per_s).fold(1.0, f64::max) * 1.1;
            let mut chart = ChartBuilder::on(area)
                .caption(format!("{size} B tuples, {thr} thread(s)"), ("sans-serif", 18))
                .margin(10)
                .x_label_area_size(35)
                .y_label_area_size(50)
                .build_cartesian_2d((1u32..x_max * 2).log_scale(), 0.0..y_max)?;
            chart.configure_mesh().x_desc("partitions").y_desc("M tuples/s").draw()?;
            let mut by_strategy: BTreeMap<&str, Vec<(u32, f64)>> = BTreeMap::new();
            for p in pts {
                by_strategy.entry(&p.strategy).or_default().push((p.partitions, p.mrecords_per_s));
            }
            for (name, mut line) in by_strategy {
                line.sort_by_key(|x| x.0);
                let k = names.iter().position(|n| *n == name).unwrap_or(0);
                let color = COLORS[k % COLORS.len()];
                chart
                    .draw_series(LineSeries::new(line.clone(), color.stroke_width(2)))?
                    .label(name)
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], color));
                chart.draw_series(line.into_iter().map(|p| Circle::new(p, 3, color.filled())))?;
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .label_font(("sans-serif", 11))
                .draw()?;
        }
    }
    root.present()?;
    Ok(())
}
