//! Filter: a small predicate language evaluated per record, stateless.
//!
//! Predicates compare a fixed-width field of the key or the value with a
//! constant (integers and floats little-endian, or raw bytes compared
//! lexicographically), test a byte prefix of the key, and combine with
//! and / or / not. A field that lies outside a record (a short variable
//! record) makes the comparison false, never a panic.

use crate::format::{BatchView, RawRecord, Record};
use crate::reorg::emit::Emitter;
use crate::reorg::ReorgError;

/// Which part of the record a field is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Part {
    /// The key bytes.
    Key,
    /// The value bytes.
    Value,
}

/// How a field's bytes are read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldType {
    /// i32, little-endian.
    I32,
    /// i64, little-endian.
    I64,
    /// f32, little-endian.
    F32,
    /// f64, little-endian.
    F64,
    /// `n` raw bytes, compared lexicographically.
    Bytes(usize),
}

impl FieldType {
    fn width(self) -> usize {
        match self {
            FieldType::I32 | FieldType::F32 => 4,
            FieldType::I64 | FieldType::F64 => 8,
            FieldType::Bytes(n) => n,
        }
    }
}

/// A fixed-width field at a byte offset of the key or value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field {
    /// Key or value.
    pub part: Part,
    /// Byte offset within that part.
    pub offset: usize,
    /// Type (and so width).
    pub ty: FieldType,
}

/// A comparison operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CmpOp {
    /// ==
    Eq,
    /// !=
    Ne,
    /// <
    Lt,
    /// <=
    Le,
    /// >
    Gt,
    /// >=
    Ge,
}

/// A constant to compare a field with.
#[derive(Debug, Clone, PartialEq)]
pub enum Constant {
    /// An integer (for I32 and I64 fields).
    Int(i64),
    /// A float (for F32 and F64 fields).
    Float(f64),
    /// Bytes (for Bytes fields).
    Bytes(Vec<u8>),
}

/// A predicate over a record.
#[derive(Debug, Clone, PartialEq)]
pub enum Predicate {
    /// `field op constant`.
    Cmp {
        /// The field.
        field: Field,
        /// The operator.
        op: CmpOp,
        /// The constant.
        value: Constant,
    },
    /// The key starts with these bytes.
    KeyPrefix(Vec<u8>),
    /// Both hold.
    And(Box<Predicate>, Box<Predicate>),
    /// Either holds.
    Or(Box<Predicate>, Box<Predicate>),
    /// Does not hold.
    Not(Box<Predicate>),
    /// Always true.
    True,
}

impl Predicate {
    /// `a and b`.
    pub fn and(self, other: Predicate) -> Predicate {
        Predicate::And(Box::new(self), Box::new(other))
    }

    /// `a or b`.
    pub fn or(self, other: Predicate) -> Predicate {
        Predicate::Or(Box::new(self), Box::new(other))
    }

    /// `not a`.
    pub fn negate(self) -> Predicate {
        Predicate::Not(Box::new(self))
    }

    /// Whether the record satisfies the predicate.
    pub fn eval(&self, r: &Record<'_>) -> bool {
        match self {
            Predicate::True => true,
            Predicate::KeyPrefix(p) => r.key.starts_with(p),
            Predicate::And(a, b) => a.eval(r) && b.eval(r),
            Predicate::Or(a, b) => a.eval(r) || b.eval(r),
            Predicate::Not(a) => !a.eval(r),
            Predicate::Cmp { field, op, value } => {
                let part = match field.part {
                    Part::Key => r.key,
                    Part::Value => r.value,
                };
                let Some(bytes) = part.get(field.offset..field.offset + field.ty.width()) else {
                    return false;
                };
                let ord = match (field.ty, value) {
                    (FieldType::I32, Constant::Int(c)) => {
                        i64::from(i32::from_le_bytes(bytes.try_into().unwrap_or_default())).cmp(c)
                    }
                    (FieldType::I64, Constant::Int(c)) => {
                        i64::from_le_bytes(bytes.try_into().unwrap_or_default()).cmp(c)
                    }
                    (FieldType::F32, Constant::Float(c)) => {
                        match f64::from(f32::from_le_bytes(bytes.try_into().unwrap_or_default()))
                            .partial_cmp(c)
                        {
                            Some(o) => o,
                            None => return *op == CmpOp::Ne,
                        }
                    }
                    (FieldType::F64, Constant::Float(c)) => {
                        match f64::from_le_bytes(bytes.try_into().unwrap_or_default())
                            .partial_cmp(c)
                        {
                            Some(o) => o,
                            None => return *op == CmpOp::Ne,
                        }
                    }
                    (FieldType::Bytes(_), Constant::Bytes(c)) => bytes.cmp(c.as_slice()),
                    // A type mismatch never matches.
                    _ => return false,
                };
                match op {
                    CmpOp::Eq => ord.is_eq(),
                    CmpOp::Ne => ord.is_ne(),
                    CmpOp::Lt => ord.is_lt(),
                    CmpOp::Le => ord.is_le(),
                    CmpOp::Gt => ord.is_gt(),
                    CmpOp::Ge => ord.is_ge(),
                }
            }
        }
    }
}

/// Passes the records that satisfy a predicate.
#[derive(Debug, Clone)]
pub struct Filter {
    predicate: Predicate,
    /// Records taken in.
    pub input_records: u64,
    /// Records passed.
    pub emitted_records: u64,
}

impl Filter {
    /// A filter by `predicate`.
    pub fn new(predicate: Predicate) -> Self {
        Filter { predicate, input_records: 0, emitted_records: 0 }
    }

    /// Filters one batch into `out` (same layout).
    pub fn push(&mut self, view: &BatchView<'_>, out: &mut Emitter) -> Result<(), ReorgError> {
        if view.layout() != out.layout() {
            return Err(ReorgError::Layout { want: out.layout(), got: view.layout() });
        }
        let mut raw = view.raw();
        let mut records = view.iter();
        while let (Some(rr), Some(r)) = (raw.next_raw(), records.next()) {
            if self.predicate.eval(&r) {
                out.emit_raw(RawRecord { key: rr.key, bytes: rr.bytes })?;
                self.emitted_records += 1;
            }
        }
        self.input_records += view.len() as u64;
        Ok(())
    }
}
