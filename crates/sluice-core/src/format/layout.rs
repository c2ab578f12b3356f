//! Record layouts: how the records of a batch are laid out in its payload.
//!
//! A record is key bytes plus value bytes. Two layouts:
//!
//! ```text
//! Fixed { key_width: K, value_width: V }      (the fast path)
//!   | key(K) value(V) | key(K) value(V) | ...          record i at i * (K + V)
//!
//! Variable
//!   | klen:u32le vlen:u32le key(klen) value(vlen) | ... records in sequence
//! ```
//!
//! The fixed layout has no per-record overhead and gives O(1) random access;
//! its common key widths are 4, 8, 10 (TeraSort) and 16 bytes, values are 0 to
//! [`VALUE_WIDTH_MAX_BYTES`] bytes. The variable layout costs
//! [`VARIABLE_RECORD_PREFIX_BYTES`] per record and a sequential walk.

use crate::format::error::FormatError;
use crate::format::limits::{
    KEY_WIDTH_MAX_BYTES, VALUE_WIDTH_MAX_BYTES, VARIABLE_RECORD_PREFIX_BYTES,
};

/// How the records of a batch or block are laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Every record is `key_width + value_width` bytes, no prefix.
    Fixed {
        /// Key width in bytes, 1 to [`KEY_WIDTH_MAX_BYTES`].
        key_width: u16,
        /// Value width in bytes, 0 to [`VALUE_WIDTH_MAX_BYTES`].
        value_width: u32,
    },
    /// Each record is prefixed by its key and value lengths (u32, little endian).
    Variable,
}

impl Layout {
    /// A fixed-width layout, checked against the format's limits.
    pub fn fixed(key_width: usize, value_width: usize) -> Result<Self, FormatError> {
        let invalid = || FormatError::InvalidLayout {
            key_width: key_width as u64,
            value_width: value_width as u64,
        };
        if key_width == 0 || key_width > KEY_WIDTH_MAX_BYTES || value_width > VALUE_WIDTH_MAX_BYTES
        {
            return Err(invalid());
        }
        Ok(Layout::Fixed {
            key_width: u16::try_from(key_width).map_err(|_| invalid())?,
            value_width: u32::try_from(value_width).map_err(|_| invalid())?,
        })
    }

    /// TeraSort's record: a 10-byte key and a 90-byte value.
    pub const TERAGEN: Layout = Layout::Fixed { key_width: 10, value_width: 90 };

    /// The thesis's 16-byte tuple: a 4-byte key and a 12-byte payload.
    pub const TUPLE16: Layout = Layout::Fixed { key_width: 4, value_width: 12 };

    /// Bytes of one record for the fixed layout, `None` for the variable one.
    pub fn fixed_record_bytes(self) -> Option<usize> {
        match self {
            Layout::Fixed { key_width, value_width } => {
                Some(usize::from(key_width) + value_width as usize)
            }
            Layout::Variable => None,
        }
    }

    /// Bytes one record with these key and value lengths takes in a payload.
    pub fn record_bytes(self, key_len: usize, value_len: usize) -> usize {
        match self {
            Layout::Fixed { .. } => key_len + value_len,
            Layout::Variable => VARIABLE_RECORD_PREFIX_BYTES + key_len + value_len,
        }
    }

    /// True for the variable-length layout.
    pub fn is_variable(self) -> bool {
        matches!(self, Layout::Variable)
    }
}

impl std::fmt::Display for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Layout::Fixed { key_width, value_width } => {
                write!(f, "fixed({key_width}+{value_width})")
            }
            Layout::Variable => f.write_str("variable"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_checks_limits() {
        assert!(Layout::fixed(0, 4).is_err());
        assert!(Layout::fixed(KEY_WIDTH_MAX_BYTES + 1, 4).is_err());
        assert!(Layout::fixed(8, VALUE_WIDTH_MAX_BYTES + 1).is_err());
        assert_eq!(Layout::fixed(10, 90).ok(), Some(Layout::TERAGEN));
        assert_eq!(Layout::TERAGEN.fixed_record_bytes(), Some(100));
        assert_eq!(Layout::Variable.record_bytes(3, 4), 15);
    }
}
