//! Reduced reads: the daemon runs a shuffle's reduce-side operator (a sum,
//! a sort's merge) over the winners' real map-output segments, pushed in
//! pieces cut anywhere, and streams one segment per partition that a reduce
//! task's own operator takes as any segment; bad data and bad codes are
//! refused with typed errors.

mod common;

use std::collections::BTreeMap;

use common::{authed, client, config, node, push, WAIT};
use sluice_core::format::codec::Codec;
use sluice_core::format::{Layout, RecordBatch};
use sluice_core::reorg::StageSpec;
use sluice_engine::host_op::{reduce_spec, OP_SORT};
use sluice_engine::reduce::{ReduceTask, SegmentEncoder, SegmentFeed};
use sluice_service::client::Block;
use sluice_service::daemon::MIN_FRAME_MEMORY_BYTES;
use sluice_service::protocol::limits::FRAME_HEADER_BYTES;
use sluice_service::protocol::{frame, ErrorCode, Message, ReduceOp, Winner, REDUCED_MAP};
use sluice_service::{AttemptPusher, Client, ClientError, Daemon, ReadMode};
use tokio::io::AsyncWriteExt;

const SUM_I64: ReduceOp = ReduceOp { function: 0, value_type: 0 };
const SORT: ReduceOp = ReduceOp { function: OP_SORT, value_type: 0 };

/// A map's segment of partition `p`: records keyed `p ++ key`, as a map
/// task writes them (blocks, then the trailer).
fn segment(p: u32, records: &[(Vec<u8>, i64)]) -> Vec<u8> {
    let mut batch = RecordBatch::new(Layout::Variable);
    for (k, v) in records {
        let key: Vec<u8> = p.to_le_bytes().iter().chain(k).copied().collect();
        batch.push(&key, &v.to_le_bytes()).expect("record");
    }
    let mut enc = SegmentEncoder::new(Codec::Lz4, p).expect("encoder");
    let mut out: Vec<u8> =
        enc.blocks(&batch).expect("blocks").into_iter().flat_map(|b| b.0).collect();
    out.extend_from_slice(&enc.trailer().expect("a trailer"));
    out
}

/// Pushes `segments` (partition, records, bytes) as map `map` attempt
/// `attempt`, each cut in two at an odd offset, and commits.
async fn push_map(
    c: &mut Client,
    shuffle: u32,
    map: u32,
    attempt: u64,
    segments: &[(u32, u64, Vec<u8>)],
) {
    let mut p = AttemptPusher::new(shuffle, 0, map, attempt);
    for (part, n, bytes) in segments {
        let cut = 7.min(bytes.len());
        p.add(c, *part, *n, &bytes[..cut]).await.expect("add");
        p.add(c, *part, 0, &bytes[cut..]).await.expect("add");
    }
    p.commit(c).await.expect("commit");
}

/// A reduce task's view of a reduced read: each partition's segment fed to
/// the task's own operator, results as (key without partition, value).
fn reduce_locally(op: ReduceOp, blocks: &[Block], p: u32) -> (ReduceTask, Vec<u8>) {
    let dir = tempfile::tempdir().expect("dir");
    let spec: StageSpec = reduce_spec(op.function, op.value_type).expect("spec");
    let mut task = ReduceTask::open(&spec, p..p + 1, dir.path()).expect("task");
    let mut feed = SegmentFeed::new(1, REDUCED_MAP, p);
    for b in blocks.iter().filter(|b| b.partition == p) {
        assert_eq!(b.map, REDUCED_MAP, "one segment per partition, over every winner");
        feed.take(&b.data, &mut task, &mut |short| short).expect("a checked segment");
    }
    feed.end().expect("the segment ends with its trailer");
    task.finish().expect("finish");
    let (mut out, mut buf) = (Vec::new(), vec![0u8; 1 << 20]);
    loop {
        match task.next_records(&mut buf).expect("results") {
            (0, 0) => break,
            (need, 0) => buf.resize(need, 0),
            (n, _) => out.extend_from_slice(&buf[..n]),
        }
    }
    (task, out)
}

/// The next of a xorshift's numbers: bytes LZ4 cannot shrink.
fn xorshift(x: &mut u64) -> u64 {
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    *x
}

/// `klen vlen key value` records into key (after the partition) → i64.
fn sums(records: &[u8]) -> BTreeMap<Vec<u8>, i64> {
    let mut m = BTreeMap::new();
    let mut at = 0;
    while at < records.len() {
        let klen = u32::from_le_bytes(records[at..at + 4].try_into().expect("4")) as usize;
        let vlen = u32::from_le_bytes(records[at + 4..at + 8].try_into().expect("4")) as usize;
        let key = records[at + 8 + 4..at + 8 + klen].to_vec();
        let v =
            i64::from_le_bytes(records[at + 8 + klen..at + 8 + klen + vlen].try_into().expect("8"));
        assert!(m.insert(key, v).is_none(), "a key twice");
        at += 8 + klen + vlen;
    }
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reduced_read_sums_the_winners_and_sends_each_partition_once() {
    let n = node("127.0.0.1", 64 << 20).await;
    let mut c = client(n.addr(), "app-reduce").await;
    let (partitions, maps, keys) = (4u32, 3u32, 60i64);
    c.register_shuffle(1, 0, partitions).await.expect("register");
    let mut expected: BTreeMap<u32, BTreeMap<Vec<u8>, i64>> = BTreeMap::new();
    for map in 0..maps {
        for attempt in [1u64, 2] {
            let mut segs = Vec::new();
            for p in 0..partitions {
                let recs: Vec<(Vec<u8>, i64)> = (0..keys)
                    .map(|i| {
                        (
                            format!("key-{i}").into_bytes(),
                            i64::from(map) * 100 + i + attempt as i64 * 10_000,
                        )
                    })
                    .collect();
                if attempt == 1 {
                    for (k, v) in &recs {
                        *expected.entry(p).or_default().entry(k.clone()).or_default() += v;
                    }
                }
                segs.push((p, keys as u64, segment(p, &recs)));
            }
            push_map(&mut c, 1, map, attempt, &segs).await;
        }
    }
    // Attempt 1 of each map won; attempt 2 (a speculative copy) committed too.
    let winners: Vec<Winner> = (0..maps).map(|map| Winner { map, attempt: 1 }).collect();
    let blocks =
        c.read_reduced((1, 0), 0, partitions, winners.clone(), SUM_I64).await.expect("read");
    for p in 0..partitions {
        let sent: u64 = blocks.iter().filter(|b| b.partition == p).map(|b| b.records).sum();
        assert_eq!(sent, keys as u64, "partition {p}: each key once, not once per map");
        let (_, out) = reduce_locally(SUM_I64, &blocks, p);
        assert_eq!(sums(&out), expected[&p], "partition {p}: the winners' sums");
    }
    let plain = c.read(1, 0, 0, partitions, winners).await.expect("plain read");
    assert_eq!(
        plain.iter().map(|b| b.records).sum::<u64>(),
        u64::from(maps * partitions) * keys as u64
    );
    let s = c.stats().await.expect("stats");
    assert_eq!((s.reduced_reads, s.reduced_in, s.reduced_out), (1, 720, 240));
    assert_eq!(s.reads, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reduced_sort_read_is_one_run_per_partition_in_key_order() {
    let n = node("127.0.0.1", 64 << 20).await;
    let mut c = client(n.addr(), "app-sort").await;
    c.register_shuffle(1, 0, 2).await.expect("register");
    let mut all: BTreeMap<u32, Vec<(u64, i64)>> = BTreeMap::new();
    for map in 0..5u32 {
        let mut segs = Vec::new();
        for p in 0..2u32 {
            // Each map's run is sorted (the map side sorts); runs interleave.
            let mut keys: Vec<u64> =
                (0..200u64).map(|i| (i * 7919 + u64::from(map) * 104_729) % 100_003).collect();
            keys.sort_unstable();
            let recs: Vec<(Vec<u8>, i64)> =
                keys.iter().map(|k| (k.to_be_bytes().to_vec(), *k as i64 * 3)).collect();
            all.entry(p).or_default().extend(keys.iter().map(|k| (*k, *k as i64 * 3)));
            segs.push((p, 200, segment(p, &recs)));
        }
        push_map(&mut c, 1, map, 1, &segs).await;
    }
    let winners: Vec<Winner> = (0..5).map(|map| Winner { map, attempt: 1 }).collect();
    let blocks = c.read_reduced((1, 0), 0, 2, winners, SORT).await.expect("read");
    for p in 0..2u32 {
        let (task, values) = reduce_locally(SORT, &blocks, p);
        assert_eq!(task.runs(), 1, "partition {p}: the daemon merged the five runs into one");
        let mut want = all[&p].clone();
        want.sort_unstable();
        let got: Vec<i64> =
            values.chunks(8).map(|v| i64::from_le_bytes(v.try_into().expect("8"))).collect();
        assert_eq!(got, want.iter().map(|w| w.1).collect::<Vec<_>>(), "partition {p} in key order");
    }
}

fn code(r: Result<Vec<Block>, ClientError>) -> ErrorCode {
    match r {
        Err(e) => e.code().unwrap_or_else(|| panic!("not a refusal: {e}")),
        Ok(v) => panic!("accepted {} blocks", v.len()),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reduced_read_refuses_bad_data_and_unknown_operators() {
    let n = node("127.0.0.1", 64 << 20).await;
    let mut c = client(n.addr(), "app-bad").await;
    c.register_shuffle(1, 0, 3).await.expect("register");
    let recs: Vec<(Vec<u8>, i64)> = (0..50).map(|i| (vec![i as u8], i)).collect();
    // Partition 0: a payload byte flipped (its block's CRC fails).
    let mut flipped = segment(0, &recs);
    flipped[60] ^= 0x5a;
    // Partition 1: its commit names one record more than the segment holds.
    let short = segment(1, &recs);
    // Partition 2: whole.
    let good = segment(2, &recs);
    push_map(&mut c, 1, 0, 1, &[(0, 50, flipped), (1, 51, short), (2, 50, good)]).await;
    let w = vec![Winner { map: 0, attempt: 1 }];
    let r = c.read_reduced((1, 0), 0, 1, w.clone(), SUM_I64).await;
    assert_eq!(code(r), ErrorCode::Corrupt, "a block failing its CRC");
    let mut c = client(n.addr(), "app-bad").await;
    let r = c.read_reduced((1, 0), 1, 2, w.clone(), SUM_I64).await;
    assert_eq!(code(r), ErrorCode::Corrupt, "fewer records than the commit named");
    let mut c = client(n.addr(), "app-bad").await;
    let r = c.read_reduced((1, 0), 2, 3, w.clone(), ReduceOp { function: 99, value_type: 0 }).await;
    assert_eq!(code(r), ErrorCode::BadRequest, "an unknown operator");
    let r = c.read_reduced((1, 0), 2, 3, w.clone(), ReduceOp { function: -1, value_type: 0 }).await;
    assert_eq!(code(r), ErrorCode::BadRequest, "no operator");
    // The daemon still serves, and its reduce directories are gone.
    let blocks = c.read_reduced((1, 0), 2, 3, w, SUM_I64).await.expect("the whole partition");
    assert_eq!(blocks.iter().map(|b| b.records).sum::<u64>(), 50);
    // A read's directory goes as the read ends, just after its End is
    // sent: wait a bounded time for it.
    let mut left: Vec<_> = walk(n.dir.path());
    for _ in 0..100 {
        if left.is_empty() {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        left = walk(n.dir.path());
    }
    assert!(left.is_empty(), "reduce spill directories left: {left:?}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("dir").flatten() {
        if e.path().is_dir() {
            out.push(e.path());
            out.extend(walk(&e.path()));
        }
    }
    out.retain(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with('r')));
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reduced_read_past_its_share_of_a_small_budget_spills_and_stays_whole() {
    // 8 MiB: an operator gets its 1 MiB floor and at most 1 MiB more, so
    // 150,000 keys (about 8 MB of table) spill sorted runs, and its results
    // go to disk before they are sent; a value of 5 MiB crosses the wire
    // in several frames.
    let n = node("127.0.0.1", 8 << 20).await;
    let mut c = client(n.addr(), "app-small").await;
    c.register_shuffle(1, 0, 1).await.expect("register");
    let keys = 150_000i64;
    for map in 0..2u32 {
        let recs: Vec<(Vec<u8>, i64)> =
            (0..keys).map(|i| (format!("k{i:08}").into_bytes(), i + i64::from(map))).collect();
        push_map(&mut c, 1, map, 1, &[(0, keys as u64, segment(0, &recs))]).await;
    }
    let winners: Vec<Winner> = (0..2).map(|map| Winner { map, attempt: 1 }).collect();
    let blocks = c.read_reduced((1, 0), 0, 1, winners, SUM_I64).await.expect("read");
    assert_eq!(blocks.iter().map(|b| b.records).sum::<u64>(), keys as u64);
    let (_, out) = reduce_locally(SUM_I64, &blocks, 0);
    let got = sums(&out);
    assert_eq!(got.len(), keys as usize);
    assert!(got.iter().all(|(k, v)| {
        let i: i64 = std::str::from_utf8(&k[1..]).expect("utf8").parse().expect("number");
        *v == 2 * i + 1
    }));
    let s = c.stats().await.expect("stats");
    // The budget held, but for the operator's floor.
    assert!(
        s.peak_bytes <= s.budget_bytes + (1 << 20),
        "peak {} of {}",
        s.peak_bytes,
        s.budget_bytes
    );

    // One record of 5 MiB, sorted: one block, sent in several frames.
    c.register_shuffle(2, 0, 1).await.expect("register");
    // Bytes LZ4 cannot shrink (a xorshift's), so the daemon's block stays 5 MiB.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    let big: Vec<u8> = (0..5 << 20).map(|_| xorshift(&mut x) as u8).collect();
    let mut batch = RecordBatch::new(Layout::Variable);
    batch.push(&[0u8, 0, 0, 0, 1], &big).expect("record");
    let mut enc = SegmentEncoder::new(Codec::None, 0).expect("encoder");
    let mut seg: Vec<u8> =
        enc.blocks(&batch).expect("blocks").into_iter().flat_map(|b| b.0).collect();
    seg.extend_from_slice(&enc.trailer().expect("trailer"));
    push_map(&mut c, 2, 0, 1, &[(0, 1, seg)]).await;
    let blocks = c
        .read_reduced((2, 0), 0, 1, vec![Winner { map: 0, attempt: 1 }], SORT)
        .await
        .expect("read");
    assert!(blocks.len() > 2, "a 5 MiB block in one frame: {} frames", blocks.len());
    assert_eq!(blocks.iter().map(|b| b.records).sum::<u64>(), 1);
    let (_, values) = reduce_locally(SORT, &blocks, 0);
    assert_eq!(values, big);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reduced_read_gives_its_grant_back_while_its_results_stream() {
    // 256 MiB: the operator takes its 1 MiB floor and up to 32 MiB more, so
    // 800,000 keys (about 48 MB of table) spill a few runs; merging them
    // needs their read buffers (3 MiB a run), far less than the grant. The
    // results (about 19 MB compressed, half of each key bytes LZ4 cannot
    // shrink) are more than the sockets hold, so the daemon is still
    // sending them while the reader waits.
    let n = node("127.0.0.1", 256 << 20).await;
    let mut c = client(n.addr(), "app-stream").await;
    let mut watch = client(n.addr(), "app-watch").await;
    c.register_shuffle(1, 0, 1).await.expect("register");
    let keys = 800_000u64;
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let recs: Vec<(Vec<u8>, i64)> = (0..keys)
        .map(|i| {
            let mut k = format!("{i:08}").into_bytes();
            for _ in 0..2 {
                k.extend_from_slice(&xorshift(&mut x).to_le_bytes());
            }
            (k, i as i64)
        })
        .collect();
    push_map(&mut c, 1, 0, 1, &[(0, keys, segment(0, &recs))]).await;
    // A fresh lease (30 s) for the read: an unoptimised build on a busy
    // machine takes most of one to push.
    c.renew().await.expect("renew");
    let before = watch.stats().await.expect("stats").held_bytes;

    let winners = vec![Winner { map: 0, attempt: 1 }];
    c.read_start((1, 0), 0, 1, winners, ReadMode::Reduced(SUM_I64)).await.expect("read");
    // The first block comes once the operator has finished its input.
    let first = c.read_next().await.expect("a block").expect("not the end");
    let during = watch.stats().await.expect("stats").held_bytes;
    // Five runs' read buffers at most stay reserved; the floor and the
    // 32 MiB grant held the table, now on disk.
    assert!(
        during < before + (15 << 20),
        "held {during} while the results stream, {before} before the read: the operator \
         kept its grant after merging from disk"
    );
    let mut blocks = vec![first];
    while let Some(b) = c.read_next().await.expect("a block") {
        blocks.push(b);
    }
    assert!(blocks.len() > 8, "{} blocks: the results fit in one go", blocks.len());
    let (_, out) = reduce_locally(SUM_I64, &blocks, 0);
    let got = sums(&out);
    assert_eq!(got.len() as u64, keys);
    assert!(got.iter().all(|(k, v)| {
        std::str::from_utf8(&k[..8]).expect("utf8").parse::<i64>().expect("number") == *v
    }));
    // Everything the read reserved is back (the map's blocks may have gone
    // since, if the lease lapsed on a slow machine).
    let after = watch.stats().await.expect("stats").held_bytes;
    assert!(after <= before, "held {after} after the read, {before} before");
}

/// Map segments of partition 0 of `shuffle` (its only one), sorted:
/// `maps` maps of `per_map` incompressible records of `value_bytes` each,
/// pushed and committed as attempt 1.
async fn push_sorted_maps(
    c: &mut Client,
    shuffle: u32,
    maps: u32,
    per_map: u8,
    value_bytes: usize,
) {
    c.register_shuffle(shuffle, 0, 1).await.expect("register");
    let mut x = 0x1234_5678_9abc_def1u64;
    for map in 0..maps {
        let mut batch = RecordBatch::new(Layout::Variable);
        for i in 0..per_map {
            let value: Vec<u8> = (0..value_bytes).map(|_| xorshift(&mut x) as u8).collect();
            batch.push(&[0u8, 0, 0, 0, i, map as u8], &value).expect("record");
        }
        let mut enc = SegmentEncoder::new(Codec::None, 0).expect("encoder");
        let mut seg: Vec<u8> =
            enc.blocks(&batch).expect("blocks").into_iter().flat_map(|b| b.0).collect();
        seg.extend_from_slice(&enc.trailer().expect("trailer"));
        push_map(c, shuffle, map, 1, &[(0, u64::from(per_map), seg)]).await;
    }
}

/// Holds all but 64 KiB of a daemon's `MIN_FRAME_MEMORY_BYTES` of frame
/// memory with a push sent by half (a push charges twice its payload):
/// room for a read's request, not for its blocks. Spawns a reduced sort
/// read of `shuffle`'s `maps` maps' winners, checks that it has not
/// finished after 3 s (a sort of a few records takes a fraction of that),
/// sends the rest of the push and returns the read's answer.
async fn read_while_frames_are_held(
    daemon: &Daemon,
    c: &mut Client,
    shuffle: u32,
    maps: u32,
) -> Vec<Block> {
    let held = MIN_FRAME_MEMORY_BYTES - (64 << 10);
    let overhead = frame::encode(&push(99, 0)).len() - FRAME_HEADER_BYTES;
    let big = frame::encode(&push(99, held as usize / 2 - overhead));
    let mut a = authed(daemon.addr(), "app-frames").await;
    let half = big.len() / 2;
    a.write_all(&big[..half]).await.expect("write");
    let deadline = tokio::time::Instant::now() + WAIT;
    while c.stats().await.expect("stats").frames_peak_bytes < held {
        assert!(tokio::time::Instant::now() < deadline, "the half-sent push took no memory");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }

    let addr = daemon.addr();
    let read = tokio::spawn(async move {
        let mut r = client(addr, "app-frames").await;
        let winners: Vec<Winner> = (0..maps).map(|map| Winner { map, attempt: 1 }).collect();
        r.read_reduced((shuffle, 0), 0, 1, winners, SORT).await
    });
    tokio::time::sleep(std::time::Duration::from_secs(3)).await;
    assert!(!read.is_finished(), "the reduced read went on without frame memory");

    a.write_all(&big[half..]).await.expect("write");
    let answer = frame::read(&mut a, 9, WAIT, "an answer").await.expect("frame").expect("open");
    // The store may be too full to stage it: either way its frame is let go.
    assert!(matches!(answer.0, Message::PushAck { .. } | Message::SlowDown { .. }), "{answer:?}");
    read.await.expect("joined").expect("the read, once there was room")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reduced_read_takes_frame_memory_to_read_back_a_spilled_block() {
    // A store of 8 MiB, so that three maps' sorted segments of 4 MiB (four
    // records of 1 MiB each) spill. A reduced read must take a spilled
    // block's bytes from the frame memory before reading it back, so it
    // does not finish while a push holds them, and finishes, whole, once
    // the push is served.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config("127.0.0.1", vec![dir.path().to_path_buf()], 8 << 20);
    cfg.frame_memory_bytes = MIN_FRAME_MEMORY_BYTES;
    let daemon = Daemon::start(cfg).await.expect("daemon");
    let mut c = client(daemon.addr(), "app-frames").await;
    let (maps, per_map) = (3u32, 4u8);
    push_sorted_maps(&mut c, 1, maps, per_map, 1 << 20).await;
    assert!(c.stats().await.expect("stats").spilled_bytes > 0, "nothing spilled");
    let blocks = read_while_frames_are_held(&daemon, &mut c, 1, maps).await;
    let records: u64 = blocks.iter().map(|b| b.records).sum();
    assert_eq!(records, u64::from(maps) * u64::from(per_map));
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reduced_read_takes_frame_memory_for_its_results() {
    // A store of 64 MiB: three maps' sorted segments of 64 KiB records stay
    // in memory, so the read takes no frame memory to feed its operator.
    // Its results, a batch and the blocks encoded from it, are held beside
    // the operator's grant while they are sent: it must take frame memory
    // for them first, and so waits while a push holds it. The sort's
    // batches of at most 1 MiB take the fixed share; the second part's
    // records of 2 MiB each make batches larger than it, which take their
    // own.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20);
    cfg.frame_memory_bytes = MIN_FRAME_MEMORY_BYTES;
    let daemon = Daemon::start(cfg).await.expect("daemon");
    let mut c = client(daemon.addr(), "app-frames").await;
    for (shuffle, maps, per_map, value_bytes) in [(1, 3u32, 8u8, 64 << 10), (2, 2, 2, 2 << 20)] {
        push_sorted_maps(&mut c, shuffle, maps, per_map, value_bytes).await;
        assert_eq!(c.stats().await.expect("stats").spilled_bytes, 0, "a block spilled");
        let blocks = read_while_frames_are_held(&daemon, &mut c, shuffle, maps).await;
        let records: u64 = blocks.iter().map(|b| b.records).sum();
        assert_eq!(records, u64::from(maps) * u64::from(per_map));
        let bytes: usize = blocks.iter().map(|b| b.data.len()).sum();
        assert!(bytes > maps as usize * per_map as usize * value_bytes, "{bytes} bytes");
    }
    daemon.shutdown().await;
}
