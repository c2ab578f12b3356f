//! Every decoder of untrusted bytes, fuzzed on the stable toolchain on
//! every test run: property tests that take a seed from the committed
//! corpus (`tests/corpus/<target>/`, real outputs of the map side) and
//! mutate it (bit flips, overwritten, inserted and removed bytes, cuts,
//! duplicated ranges), optionally with the block CRCs fixed up so the
//! mutation reaches past them. Each decoder must answer with a typed error
//! or a result that is consistent, never panic, and never read a changed
//! segment back as different records.
//!
//! Cases per target: `SLUICE_FUZZ_CASES` (default 2000), so a run stays
//! bounded. `SLUICE_BLESS=1 cargo test -p sluice-jni --test fuzz_decoders`
//! rewrites the corpus from real map attempts (review the diff).

use std::path::{Path, PathBuf};

use proptest::prelude::*;
use sluice_core::format::checksum::crc32c;
use sluice_core::format::header::HEADER_BYTES;
use sluice_core::format::Codec;
use sluice_core::reorg::aggregate::SpillStrategy;
use sluice_core::reorg::StageSpec;
use sluice_core::{BlockDecoder, BlockReader};
use sluice_engine::host_keys::check_buffer;
use sluice_engine::output::trailer::SegmentTrailer;
use sluice_engine::reduce::decode_values;
use sluice_engine::ReduceTask;
use sluice_jni::bridge::{open_engine, register_shuffle, HostMapTask};
use sluice_jni::ops::agg_spec;

mod common;
use common::{settings, walk_segment};

fn corpus_dir(target: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus").join(target)
}

/// The committed seeds of `target` (blessed first when asked).
fn seeds(target: &str) -> Vec<Vec<u8>> {
    if std::env::var_os("SLUICE_BLESS").is_some() {
        bless();
    }
    let dir = corpus_dir(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    let out: Vec<_> = files.iter().map(|f| std::fs::read(f).expect("seed")).collect();
    assert!(!out.is_empty(), "no seeds for {target}");
    out
}

fn cases() -> u32 {
    std::env::var("SLUICE_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000)
}

/// One change to a seed; positions are taken modulo the input's length.
#[derive(Debug, Clone)]
enum Mutation {
    Flip(usize, u8),
    Set(usize, u8),
    Insert(usize, Vec<u8>),
    Remove(usize, usize),
    Cut(usize),
    Duplicate(usize, usize),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        (any::<usize>(), 0u8..8).prop_map(|(p, b)| Mutation::Flip(p, b)),
        (any::<usize>(), any::<u8>()).prop_map(|(p, v)| Mutation::Set(p, v)),
        (any::<usize>(), proptest::collection::vec(any::<u8>(), 1..40))
            .prop_map(|(p, v)| Mutation::Insert(p, v)),
        (any::<usize>(), 1usize..64).prop_map(|(p, n)| Mutation::Remove(p, n)),
        any::<usize>().prop_map(Mutation::Cut),
        (any::<usize>(), 1usize..200).prop_map(|(p, n)| Mutation::Duplicate(p, n)),
    ]
}

fn apply(seed: &[u8], mutations: &[Mutation]) -> Vec<u8> {
    let mut b = seed.to_vec();
    for m in mutations {
        let len = b.len().max(1);
        match m {
            Mutation::Flip(p, bit) if !b.is_empty() => b[p % len] ^= 1 << bit,
            Mutation::Set(p, v) if !b.is_empty() => b[p % len] = *v,
            Mutation::Insert(p, bytes) => {
                let at = p % (b.len() + 1);
                b.splice(at..at, bytes.iter().copied());
            }
            Mutation::Remove(p, n) if !b.is_empty() => {
                let at = p % len;
                let end = (at + n).min(b.len());
                b.drain(at..end);
            }
            Mutation::Cut(p) => b.truncate(p % (b.len() + 1)),
            Mutation::Duplicate(p, n) if !b.is_empty() => {
                let at = p % len;
                let end = (at + n).min(b.len());
                let copy = b[at..end].to_vec();
                b.splice(end..end, copy);
            }
            _ => {}
        }
    }
    b
}

/// Rewrites every block header CRC and payload CRC it can find from the
/// start, so mutations reach the length checks and decompressors (a CRC is
/// no defence against a malicious writer).
fn forge_crcs(data: &mut [u8]) {
    let mut at = 0usize;
    while at + HEADER_BYTES <= data.len() && &data[at..at + 4] == b"SLBK" {
        let stored = u32::from_le_bytes(data[at + 24..at + 28].try_into().expect("4")) as usize;
        let end = (at + HEADER_BYTES).saturating_add(stored).min(data.len());
        let payload = crc32c(&data[at + HEADER_BYTES..end]);
        data[at + 28..at + 32].copy_from_slice(&payload.to_le_bytes());
        let header = crc32c(&data[at..at + 32]);
        data[at + 32..at + 36].copy_from_slice(&header.to_le_bytes());
        at = end;
    }
}

fn input(seeds: &[Vec<u8>]) -> impl Strategy<Value = (Vec<u8>, Vec<u8>)> {
    let seeds = seeds.to_vec();
    (0..seeds.len(), proptest::collection::vec(mutation(), 0..4), any::<bool>()).prop_map(
        move |(i, ms, forge)| {
            let mut b = apply(&seeds[i], &ms);
            if forge {
                forge_crcs(&mut b);
            }
            (seeds[i].clone(), b)
        },
    )
}

fn config() -> ProptestConfig {
    ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() }
}

/// A segment's values read the way the Java stream reads them.
fn read_values(seg: &[u8], partitions: (i32, i32)) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    walk_segment(seg, (1, 7, partitions.0, partitions.1), |frame, name| {
        let info = sluice_engine::reduce::frame_info(frame, name)?;
        let mut values = vec![0u8; info.uncompressed_len];
        let (n, records) = decode_values(frame, name, &mut values)?;
        out.extend_from_slice(&values[..n]);
        Ok(records)
    })
    .map_err(|e| e.to_string())?;
    Ok(out)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn block_decoder(( _seed, data) in input(&seeds("block"))) {
        let mut dec = BlockDecoder::new();
        if let Ok(block) = dec.decode(&data) {
            prop_assert_eq!(block.records.iter().count(), block.records.len());
            prop_assert!(block.frame_len <= data.len());
        }
    }

    #[test]
    fn stream_decoder((_seed, data) in input(&seeds("segment"))) {
        // The block stream reader over a segment (its trailer, to this
        // reader, is a bad magic at the end).
        let mut reader = BlockReader::new(&data[..]);
        while let Ok(Some(block)) = reader.next_block() {
            prop_assert_eq!(block.records.iter().count(), block.records.len());
        }
        prop_assert!(reader.offset() <= data.len() as u64);
    }

    #[test]
    fn map_buffer_check((_seed, data) in input(&seeds("map_buffer")), count in 0u32..600, host in any::<bool>()) {
        if let Ok(checked) = check_buffer(&data, count, 7, host, 64) {
            let view = checked.view();
            prop_assert_eq!(checked.spans().iter().map(|s| s.records()).sum::<u32>(), count);
            prop_assert_eq!(checked.spans().last().map_or(0, |s| s.end()), data.len());
            prop_assert_eq!(view.iter().count(), count as usize);
            for r in view.iter() {
                prop_assert!(u32::from_le_bytes(r.key[..4].try_into().expect("4")) < 7);
            }
        }
    }

    #[test]
    fn segment_values((seed, data) in input(&seeds("segment"))) {
        // No changed segment may read back as different records.
        let want = read_values(&seed, (0, 1)).expect("the seed reads");
        if let Ok(got) = read_values(&data, (0, 1)) {
            prop_assert!(got == want, "a changed segment read back as other records");
        }
    }

    #[test]
    fn segment_trailer((_seed, data) in input(&seeds("trailer"))) {
        let name = sluice_engine::reduce::BlockName::single(1, 2, 3, 0);
        if let Ok(t) = SegmentTrailer::parse(&data, &name) {
            prop_assert_eq!(&t.to_bytes()[..], &data[..36]);
        }
    }

    #[test]
    fn reduce_aggregate_feed((_seed, data) in input(&seeds("aggregate_segment"))) {
        open_engine(&settings()).expect("engine");
        let mut op = ReduceTask::open(&StageSpec::Aggregate(agg_spec(0, 0).expect("sum"), SpillStrategy::State), 0..1, &std::env::temp_dir()).expect("sum of i64");
        let fed = walk_segment(&data, (5, 0, 0, 1), |frame, name| op.feed(frame, name));
        if fed.is_ok() {
            op.finish().expect("finish after a clean feed");
        }
    }

    #[test]
    fn reduce_sort_feed((_seed, data) in input(&seeds("segment"))) {
        open_engine(&settings()).expect("engine");
        let mut op = ReduceTask::open(&StageSpec::Sort, 0..1, &std::env::temp_dir()).expect("sort");
        let fed = walk_segment(&data, (1, 7, 0, 1), |frame, name| op.feed(frame, name));
        if fed.is_ok() {
            op.finish().expect("finish after a clean feed");
        }
    }
}

/// Writes the corpus from real map attempts: a plain shuffle's segment (and
/// its first block), an aggregate shuffle's segment, a map buffer, a
/// trailer.
fn bless() {
    open_engine(&settings()).expect("engine");
    let tmp = tempfile::tempdir().expect("tmp");
    // A plain shuffle, one partition, lz4 and none.
    for (name, codec) in [("lz4", Codec::Lz4), ("none", Codec::None)] {
        let shuffle = register_shuffle(1, 1, StageSpec::None).expect("register");
        let mut task = HostMapTask::open(shuffle, 0, 0, 1, false, false).expect("open");
        let mut buf = Vec::new();
        for i in 0..300u32 {
            let v = format!("value-{i}-{}", "x".repeat((i % 17) as usize));
            buf.extend_from_slice(&4u32.to_le_bytes());
            buf.extend_from_slice(&(v.len() as u32).to_le_bytes());
            buf.extend_from_slice(&0u32.to_le_bytes());
            buf.extend_from_slice(v.as_bytes());
        }
        task.produce(&buf, 300).expect("produce");
        write_seed("map_buffer", name, &buf[..buf.len().min(2000)]);
        let path = tmp.path().join(format!("{name}.data"));
        task.commit_to_file(&path, codec, None).expect("commit");
        let seg = std::fs::read(&path).expect("data");
        let first = HEADER_BYTES + u32::from_le_bytes(seg[24..28].try_into().expect("4")) as usize;
        write_seed("block", name, &seg[..first]);
        write_seed("segment", name, &seg);
        write_seed("trailer", name, &seg[seg.len() - HEADER_BYTES..]);
    }
    // sluice-core's golden blocks (every codec and layout) as block seeds.
    let golden = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../sluice-core/tests/golden");
    for entry in std::fs::read_dir(golden).expect("golden dir") {
        let path = entry.expect("entry").path();
        let name = path.file_stem().expect("name").to_string_lossy().into_owned();
        write_seed("block", &format!("golden-{name}"), &std::fs::read(&path).expect("golden"));
    }
    // An aggregate shuffle (sum of i64), one partition.
    let spec = agg_spec(0, 0).expect("spec");
    let op = StageSpec::Aggregate(spec, SpillStrategy::State);
    let shuffle = register_shuffle(1, 1, op).expect("register");
    let mut task = HostMapTask::open(shuffle, 0, 0, 1, true, false).expect("open");
    let mut buf = Vec::new();
    for i in 0..200u32 {
        let key = format!("k{}", i % 37);
        buf.extend_from_slice(&(4 + key.len() as u32).to_le_bytes());
        buf.extend_from_slice(&8u32.to_le_bytes());
        buf.extend_from_slice(&0u32.to_le_bytes());
        buf.extend_from_slice(key.as_bytes());
        buf.extend_from_slice(&i64::from(i).to_le_bytes());
    }
    task.produce(&buf, 200).expect("produce");
    let path = tmp.path().join("agg.data");
    task.commit_to_file(&path, Codec::Lz4, None).expect("commit");
    write_seed("aggregate_segment", "lz4", &std::fs::read(&path).expect("data"));
}

fn write_seed(target: &str, name: &str, bytes: &[u8]) {
    let dir = corpus_dir(target);
    std::fs::create_dir_all(&dir).expect("corpus dir");
    std::fs::write(dir.join(format!("seed-{name}.bin")), bytes).expect("seed");
}

#[test]
fn the_corpus_is_real_output() {
    // Every committed segment seed reads back cleanly; a corpus of junk
    // would make the fuzzing above shallow.
    for seed in seeds("segment") {
        let values = read_values(&seed, (0, 1)).expect("segment seed reads");
        assert!(!values.is_empty());
    }
    let p: &Path = &corpus_dir("aggregate_segment");
    assert!(p.exists());
}
