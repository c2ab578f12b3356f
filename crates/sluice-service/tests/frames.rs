//! The frame decoder on arbitrary input: every message round-trips, and
//! mutations of a committed corpus of real frames (one per message kind,
//! `tests/corpus/frames/`) never panic, never allocate past the limits,
//! and decode only to messages that re-encode to the same bytes.
//! `SLUICE_FUZZ_CASES` sets the mutation cases (2,000 by default);
//! `SLUICE_BLESS=1` rewrites the corpus.

use std::path::PathBuf;

use proptest::prelude::*;
use sluice_service::protocol::limits::FRAME_HEADER_BYTES;
use sluice_service::protocol::{frame, DaemonStats, ErrorCode, Message, ReduceOp, Section, Winner};

fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/corpus/frames")
}

/// One message of every kind, as a client and a daemon send them.
fn seeds() -> Vec<(&'static str, Message)> {
    vec![
        ("challenge", Message::Challenge { nonce: [7; 32] }),
        (
            "auth",
            Message::Auth {
                app: "app-20261130-0001".into(),
                lease_ms: 60_000,
                proof: [9; 32],
                challenge: [5; 32],
                lease_only: true,
            },
        ),
        ("welcome", Message::Welcome { lease_ms: 60_000, proof: [6; 32] }),
        ("register", Message::RegisterShuffle { shuffle: 3, generation: 1, partitions: 200 }),
        ("ok", Message::Ok),
        (
            "push",
            Message::Push {
                shuffle: 3,
                generation: 1,
                map: 17,
                attempt: 42,
                seq: 2,
                sections: vec![
                    Section {
                        partition: 0,
                        records: 2,
                        data: b"key-a\x00val-a key-b\x00val-b".to_vec(),
                    },
                    Section { partition: 5, records: 1, data: b"key-c\x00val-c".to_vec() },
                ],
            },
        ),
        ("push_ack", Message::PushAck { seq: 2, crc: 0xdead_beef }),
        (
            "commit",
            Message::Commit {
                shuffle: 3,
                generation: 1,
                map: 17,
                attempt: 42,
                chunks: 3,
                acks_crc: 0x1234_5678,
                records: 3,
            },
        ),
        ("committed", Message::Committed { first: true }),
        (
            "read",
            Message::Read {
                shuffle: 3,
                generation: 1,
                start: 4,
                end: 6,
                skip: 5,
                winners: vec![Winner { map: 0, attempt: 1 }, Winner { map: 1, attempt: 9 }],
            },
        ),
        (
            "read_reduced",
            Message::ReadReduced {
                shuffle: 3,
                generation: 1,
                start: 4,
                end: 6,
                op: ReduceOp { function: 5, value_type: 0x0102 },
                winners: vec![Winner { map: 0, attempt: 1 }, Winner { map: 1, attempt: 9 }],
            },
        ),
        (
            "data",
            Message::Data { partition: 5, map: 17, records: 1, data: b"key-c\x00val-c".to_vec() },
        ),
        ("end", Message::End { blocks: 1, records: 1, bytes: 11 }),
        ("unregister", Message::Unregister { shuffle: 3 }),
        ("drop_attempt", Message::DropAttempt { shuffle: 3, generation: 1, map: 2, attempt: 7 }),
        ("renew", Message::Renew),
        ("end_application", Message::EndApplication),
        (
            "error",
            Message::Error {
                code: ErrorCode::MissingCommit,
                message: "map 3 attempt 1 did not commit".into(),
            },
        ),
        ("slow_down", Message::SlowDown { retry_after_ms: 20 }),
        ("stats", Message::Stats),
        (
            "stats_reply",
            Message::StatsReply(DaemonStats {
                held_bytes: 1,
                peak_bytes: 2,
                spilled_bytes: 3,
                budget_bytes: 4,
                chunks: 5,
                commits: 6,
                reads: 7,
                reduced_reads: 8,
                reduced_in: 9,
                reduced_out: 10,
                peak_connections: 11,
                busy_refusals: 12,
                frames_peak_bytes: 13,
                frames_slow_downs: 14,
                bookkeeping_bytes: 15,
            }),
        ),
    ]
}

static CORPUS: std::sync::LazyLock<Vec<Vec<u8>>> = std::sync::LazyLock::new(read_corpus);

fn corpus() -> &'static [Vec<u8>] {
    &CORPUS
}

fn read_corpus() -> Vec<Vec<u8>> {
    let dir = corpus_dir();
    if std::env::var_os("SLUICE_BLESS").is_some() {
        std::fs::create_dir_all(&dir).expect("corpus dir");
        for (name, m) in seeds() {
            std::fs::write(dir.join(format!("{name}.frame")), frame::encode(&m))
                .expect("write seed");
        }
    }
    let mut files: Vec<PathBuf> =
        std::fs::read_dir(&dir).expect("corpus").flatten().map(|e| e.path()).collect();
    files.sort();
    files.iter().map(|f| std::fs::read(f).expect("seed")).collect()
}

#[test]
fn the_corpus_holds_every_kind_and_decodes_to_the_seeds() {
    let corpus = corpus();
    let seeds = seeds();
    assert_eq!(corpus.len(), seeds.len(), "one frame per message kind");
    for (name, m) in seeds {
        let bytes = std::fs::read(corpus_dir().join(format!("{name}.frame"))).expect("seed file");
        let (got, used) = frame::decode(&bytes, 0).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(got, m, "{name}");
        assert_eq!(used, bytes.len());
    }
}

fn cases() -> u32 {
    std::env::var("SLUICE_FUZZ_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(2000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn mutated_frames_decode_or_fail_typed(
        pick in 0usize..19,
        flips in proptest::collection::vec((any::<usize>(), any::<u8>()), 0..8),
        cut in proptest::option::of(any::<usize>()),
        fix_crc in any::<bool>(),
    ) {
        let corpus = corpus();
        let mut bytes = corpus[pick % corpus.len()].clone();
        for (at, x) in flips {
            let i = at % bytes.len();
            bytes[i] ^= x;
        }
        if let Some(c) = cut {
            bytes.truncate(c % (bytes.len() + 1));
        }
        if fix_crc && bytes.len() >= FRAME_HEADER_BYTES {
            // Forged with a valid CRC: the message checks must hold alone.
            let len = (bytes.len() - FRAME_HEADER_BYTES) as u32;
            bytes[8..12].copy_from_slice(&len.to_le_bytes());
            let mut c = sluice_core::format::checksum::Crc32c::new();
            c.update(&bytes[..12]);
            c.update(&bytes[FRAME_HEADER_BYTES..]);
            let v = c.value();
            bytes[12..16].copy_from_slice(&v.to_le_bytes());
        }
        if let Ok((m, used)) = frame::decode(&bytes, 0) {
            prop_assert_eq!(frame::encode(&m), bytes[..used].to_vec());
        }
    }

    #[test]
    fn pushes_and_reads_round_trip(
        shuffle in any::<u32>(), map in any::<u32>(), attempt in any::<u64>(),
        sections in proptest::collection::vec((any::<u32>(), any::<u64>(), proptest::collection::vec(any::<u8>(), 0..64)), 0..6),
        winners in proptest::collection::vec((any::<u32>(), any::<u64>()), 0..6),
        skip in any::<u64>(),
    ) {
        let push = Message::Push {
            shuffle, generation: 1, map, attempt, seq: 0,
            sections: sections.into_iter().map(|(partition, records, data)| Section { partition, records, data }).collect(),
        };
        let read = Message::Read { shuffle, generation: 1, start: 0, end: 9, skip, winners: winners.into_iter().map(|(map, attempt)| Winner { map, attempt }).collect() };
        for m in [push, read] {
            let bytes = frame::encode(&m);
            let (got, used) = frame::decode(&bytes, 0).expect("decode");
            prop_assert_eq!(got, m);
            prop_assert_eq!(used, bytes.len());
        }
    }

    #[test]
    fn a_data_frame_written_without_a_copy_is_the_encoded_one(
        partition in any::<u32>(), map in any::<u32>(), records in any::<u64>(),
        data in proptest::collection::vec(any::<u8>(), 0..3000),
    ) {
        let mut bytes = frame::data_frame_head(partition, map, records, &data).to_vec();
        bytes.extend_from_slice(&data);
        prop_assert_eq!(&bytes, &frame::encode(&Message::Data { partition, map, records, data }));
    }
}

/// The kinds said to have one payload size have it: the corpus's frame of
/// each is that size, and a payload a byte longer does not decode (so a
/// daemon that refuses any other size from the header refuses nothing a
/// decoder would take).
#[test]
fn requests_of_one_size_have_that_size() {
    let mut fixed = 0;
    for f in corpus() {
        let (m, _) = frame::decode(f, 0).expect("decodes");
        let Some(bytes) = Message::fixed_request_bytes(m.kind()) else { continue };
        fixed += 1;
        let payload = &f[FRAME_HEADER_BYTES..];
        assert_eq!(payload.len() as u32, bytes, "{}", Message::kind_name(m.kind()));
        let mut longer = payload.to_vec();
        longer.push(0);
        assert!(Message::decode(m.kind(), &longer, 0).is_err(), "{}", Message::kind_name(m.kind()));
    }
    assert_eq!(
        fixed, 7,
        "RegisterShuffle, Commit, Unregister, Renew, EndApplication, Stats, DropAttempt"
    );
}
