//! Fixtures shared by the integration tests: the batches behind the golden
//! block files in `tests/golden/`.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;

use sluice_core::datagen::{teragen, tuples, words::TextGen};
use sluice_core::{Codec, Layout, RecordBatch};

/// One golden fixture: a file name, the batch it holds and its codec.
pub struct Golden {
    pub name: &'static str,
    pub codec: Codec,
    pub batch: RecordBatch,
}

pub fn golden_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("golden")
}

fn teragen_batch() -> RecordBatch {
    let mut bytes = Vec::new();
    teragen::fill(42, 0, 16, &mut bytes);
    let mut b = RecordBatch::new(Layout::TERAGEN);
    b.extend_fixed(&bytes).expect("teragen records");
    b
}

fn tuple_batch() -> RecordBatch {
    let mut bytes = Vec::new();
    tuples::fill(42, 4, 12, 0, 32, &mut bytes);
    let mut b = RecordBatch::new(Layout::TUPLE16);
    b.extend_fixed(&bytes).expect("tuples");
    b
}

fn text_batch() -> RecordBatch {
    let mut g = TextGen::new(42);
    let (mut k, mut v) = (Vec::new(), Vec::new());
    let mut b = RecordBatch::new(Layout::Variable);
    for _ in 0..6 {
        g.next_record(&mut k, &mut v);
        b.push(&k, &v).expect("text record");
    }
    b.push(b"", b"").expect("empty record");
    b
}

/// Every golden fixture, in a fixed order.
pub fn goldens() -> Vec<Golden> {
    let zstd3 = Codec::Zstd { level: 3 };
    vec![
        Golden { name: "teragen-none.blk", codec: Codec::None, batch: teragen_batch() },
        Golden { name: "teragen-lz4.blk", codec: Codec::Lz4, batch: teragen_batch() },
        Golden { name: "teragen-zstd-3.blk", codec: zstd3, batch: teragen_batch() },
        Golden { name: "tuple16-none.blk", codec: Codec::None, batch: tuple_batch() },
        Golden { name: "text-none.blk", codec: Codec::None, batch: text_batch() },
        Golden { name: "text-lz4.blk", codec: Codec::Lz4, batch: text_batch() },
        Golden { name: "text-zstd-3.blk", codec: zstd3, batch: text_batch() },
    ]
}

/// Reads a golden file, with a message that says how to create it.
pub fn read_golden(name: &str) -> Vec<u8> {
    let path = golden_dir().join(name);
    std::fs::read(&path).unwrap_or_else(|e| {
        panic!("{}: {e}; regenerate with SLUICE_BLESS=1 cargo test -p sluice-core --test golden -- --test-threads=1", path.display())
    })
}
