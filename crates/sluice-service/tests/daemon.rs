//! The daemon with real clients over loopback TCP: pushes, commits and
//! reads across two nodes, speculative attempts, commit proofs,
//! generations, applications kept apart, budget and spill, slow-down,
//! leases and shutdown.

mod common;

use std::collections::HashMap;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use common::{client, node, records};
use sluice_service::daemon::{COMMIT_ENTRIES, ENTRY_BYTES, SHUFFLE_ENTRIES};
use sluice_service::protocol::{acks_checksum, ErrorCode, Message, Section, Winner};
use sluice_service::{AttemptPusher, ClientError};

fn code(r: Result<impl std::fmt::Debug, ClientError>) -> ErrorCode {
    match r {
        Err(e) => e.code().unwrap_or_else(|| panic!("not a refusal: {e}")),
        Ok(v) => panic!("accepted: {v:?}"),
    }
}

fn push(
    shuffle: u32,
    generation: u32,
    map: u32,
    attempt: u64,
    seq: u32,
    sections: Vec<(u32, u64)>,
) -> Message {
    Message::Push {
        shuffle,
        generation,
        map,
        attempt,
        seq,
        sections: sections
            .into_iter()
            .map(|(p, n)| Section { partition: p, records: n, data: records(map, attempt, p, n) })
            .collect(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_serve_each_reduce_partition_as_one_stream() {
    let nodes = [node("127.0.0.1", 64 << 20).await, node("127.0.0.2", 64 << 20).await];
    let (partitions, maps) = (8u32, 5u32);
    // Node n owns the contiguous reduce partitions [n P / N, (n + 1) P / N).
    let owner = |p: u32| (p * 2 / partitions) as usize;
    let mut clients = Vec::new();
    for n in &nodes {
        let mut c = client(n.addr(), "app-a").await;
        c.register_shuffle(3, 0, partitions).await.expect("register");
        clients.push(c);
    }
    let mut expected: HashMap<u32, Vec<u8>> = HashMap::new();
    for map in 0..maps {
        let mut pushers = [AttemptPusher::new(3, 0, map, 7), AttemptPusher::new(3, 0, map, 7)];
        for round in 0..3u64 {
            for p in 0..partitions {
                let n = (u64::from(map + p) % 4) + round;
                let data = records(map, 7, p, n);
                expected.entry(p).or_default().extend_from_slice(&data);
                pushers[owner(p)].add(&mut clients[owner(p)], p, n, &data).await.expect("add");
            }
        }
        for (i, pusher) in pushers.into_iter().enumerate() {
            assert!(
                pusher.commit(&mut clients[i]).await.expect("commit"),
                "first commit of map {map}"
            );
        }
    }
    let winners: Vec<Winner> = (0..maps).map(|map| Winner { map, attempt: 7 }).collect();
    for p in 0..partitions {
        // One request per reduce task, to the node that owns it.
        let blocks = clients[owner(p)].read(3, 0, p, p + 1, winners.clone()).await.expect("read");
        let mut got = Vec::new();
        for b in &blocks {
            assert_eq!(b.partition, p);
            got.extend_from_slice(&b.data);
        }
        // Within a partition the blocks come in commit order, and commits
        // ran in map order, so the bytes are the pushes' concatenation.
        assert_eq!(got, expected[&p], "partition {p}");
    }
    // The node that does not own a partition has nothing for it.
    let other = clients[1].read(3, 0, 0, 4, winners.clone()).await.expect("read");
    assert!(other.is_empty());
    for mut c in clients {
        c.unregister_shuffle(3).await.expect("unregister");
        assert_eq!(c.stats().await.expect("stats").held_bytes, 0, "nothing held after unregister");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_takes_only_the_winning_attempt_of_each_map() {
    let n = node("127.0.0.1", 64 << 20).await;
    let mut c = client(n.addr(), "app-spec").await;
    c.register_shuffle(1, 0, 2).await.expect("register");
    // Map 0 runs twice (a speculative copy); both commit.
    for attempt in [1u64, 2] {
        let mut p = AttemptPusher::new(1, 0, 0, attempt);
        p.add(&mut c, 0, 3, &records(0, attempt, 0, 3)).await.expect("add");
        let first = p.commit(&mut c).await.expect("commit");
        assert_eq!(first, attempt == 1);
    }
    let blocks = c.read(1, 0, 0, 2, vec![Winner { map: 0, attempt: 2 }]).await.expect("read");
    assert_eq!(blocks.len(), 1);
    assert_eq!(blocks[0].data, records(0, 2, 0, 3));
    assert_eq!(blocks.iter().map(|b| b.records).sum::<u64>(), 3, "no duplicate records");
    // A winner that never committed here is a typed error, not an empty answer.
    let r = c.read(1, 0, 0, 2, vec![Winner { map: 0, attempt: 3 }]).await;
    assert_eq!(code(r), ErrorCode::MissingCommit);
    let r = c.read(1, 0, 0, 2, vec![Winner { map: 1, attempt: 1 }]).await;
    assert_eq!(code(r), ErrorCode::MissingCommit);
    // Committing the same attempt again with the same proof is answered, not
    // doubled; with another proof it is refused.
    let p = AttemptPusher::new(1, 0, 5, 1);
    assert!(p.commit(&mut c).await.expect("an empty commit"));
    assert!(!c.commit(1, 0, 5, 1, 0, acks_checksum([]), 0).await.expect("the same commit again"));
    assert_eq!(
        code(c.commit(1, 0, 5, 1, 0, acks_checksum([]), 9).await),
        ErrorCode::CommitMismatch
    );
}

/// Pushes 300 records to each of partitions 0 and 1 of shuffle 2 as
/// `attempt` of `map` and commits; true when it was the first to commit.
async fn commit_two_partitions(c: &mut sluice_service::Client, map: u32, attempt: u64) -> bool {
    let mut p = AttemptPusher::new(2, 0, map, attempt);
    for part in 0..2 {
        p.add(c, part, 300, &records(map, attempt, part, 300)).await.expect("add");
    }
    p.commit(c).await.expect("commit")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_read_that_names_a_winner_lets_the_losing_attempts_go() {
    let n = node("127.0.0.1", 64 << 20).await;
    let mut c = client(n.addr(), "app-losers").await;
    c.register_shuffle(2, 0, 2).await.expect("register");
    let held = |s: sluice_service::protocol::DaemonStats| s.held_bytes;
    let before = held(c.stats().await.expect("stats"));
    // Map 0 runs twice and both attempts commit, as a speculative copy
    // that finished before it was killed; map 1 once.
    assert!(commit_two_partitions(&mut c, 0, 1).await);
    let one = held(c.stats().await.expect("stats")) - before;
    assert!(
        !commit_two_partitions(&mut c, 0, 2).await,
        "the second attempt of map 0 is not the first"
    );
    assert!(commit_two_partitions(&mut c, 1, 1).await);
    assert_eq!(held(c.stats().await.expect("stats")) - before, 3 * one, "three attempts held");
    // The read names attempt 2 of map 0: attempt 1 goes, attempt 2's
    // records come whole.
    let winners = vec![Winner { map: 0, attempt: 2 }, Winner { map: 1, attempt: 1 }];
    let blocks = c.read(2, 0, 0, 2, winners.clone()).await.expect("read");
    let of_map0: Vec<u8> =
        blocks.iter().filter(|b| b.map == 0).flat_map(|b| b.data.iter().copied()).collect();
    let mut expected = records(0, 2, 0, 300);
    expected.extend(records(0, 2, 1, 300));
    assert_eq!(of_map0, expected);
    assert_eq!(blocks.iter().map(|b| b.records).sum::<u64>(), 4 * 300, "no duplicate records");
    // The loser's proof stays (a read naming it is refused below).
    let proof = COMMIT_ENTRIES * ENTRY_BYTES;
    assert_eq!(held(c.stats().await.expect("stats")) - before, 2 * one + proof, "loser let go");
    // A read naming the let-go attempt is refused, not answered short.
    let r = c.read(2, 0, 0, 2, vec![Winner { map: 0, attempt: 1 }]).await;
    assert_eq!(code(r), ErrorCode::MissingCommit);
    // An attempt of the decided map that commits later (Spark reran the
    // map after losing the winner's host) is refused, its chunks let go:
    // its map task keeps the output on its executor, where reads find it,
    // rather than naming at the service an attempt no read here may take.
    let mut p = AttemptPusher::new(2, 0, 0, 3);
    for part in 0..2 {
        p.add(&mut c, part, 300, &records(0, 3, part, 300)).await.expect("add");
    }
    assert_eq!(code(p.commit(&mut c).await), ErrorCode::Superseded);
    assert_eq!(held(c.stats().await.expect("stats")) - before, 2 * one + proof, "late loser too");
    let empty = c.commit(2, 0, 0, 4, 0, acks_checksum([]), 0).await;
    assert_eq!(code(empty), ErrorCode::Superseded, "an empty late loser");
    let again = c.commit(2, 0, 0, 4, 0, acks_checksum([]), 0).await;
    assert_eq!(code(again), ErrorCode::Superseded, "the same again");
    // The winner reads the same as before.
    let again = c.read(2, 0, 0, 2, winners).await.expect("read again");
    assert_eq!(again.len(), blocks.len());
    assert!(again.iter().zip(&blocks).all(|(a, b)| a.data == b.data && a.map == b.map));
    c.unregister_shuffle(2).await.expect("unregister");
    let registered = SHUFFLE_ENTRIES * ENTRY_BYTES;
    assert_eq!(
        held(c.stats().await.expect("stats")),
        before - registered,
        "nothing after unregister"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_must_prove_every_acknowledged_chunk() {
    let n = node("127.0.0.1", 64 << 20).await;
    let mut c = client(n.addr(), "app-proof").await;
    c.register_shuffle(1, 0, 4).await.expect("register");
    let a0 = c.push(&push(1, 0, 0, 1, 0, vec![(0, 2), (1, 3)])).await.expect("push 0");
    // Chunk 1 is lost on the way; chunk 2 arrives.
    let a2 = c.push(&push(1, 0, 0, 1, 2, vec![(2, 4)])).await.expect("push 2");
    let acks = acks_checksum([(0, a0), (1, 0), (2, a2)]);
    assert_eq!(code(c.commit(1, 0, 0, 1, 3, acks, 9).await), ErrorCode::CommitMismatch);
    // A wrong acknowledgement checksum or record count fails as well.
    let a0 = c.push(&push(1, 0, 1, 1, 0, vec![(0, 2)])).await.expect("push");
    assert_eq!(
        code(c.commit(1, 0, 1, 1, 1, acks_checksum([(0, a0 ^ 1)]), 2).await),
        ErrorCode::CommitMismatch
    );
    let a0 = c.push(&push(1, 0, 2, 1, 0, vec![(0, 2)])).await.expect("push");
    assert_eq!(
        code(c.commit(1, 0, 2, 1, 1, acks_checksum([(0, a0)]), 3).await),
        ErrorCode::CommitMismatch
    );
    // Nothing of a failed commit is readable, and nothing stays held.
    for map in 0..3 {
        let r = c.read(1, 0, 0, 4, vec![Winner { map, attempt: 1 }]).await;
        assert_eq!(code(r), ErrorCode::MissingCommit);
    }
    let registered = SHUFFLE_ENTRIES * ENTRY_BYTES;
    assert_eq!(c.stats().await.expect("stats").held_bytes, registered, "the shuffle's alone");
    // The same chunk pushed again with other bytes is refused.
    c.push(&push(1, 0, 3, 1, 0, vec![(0, 2)])).await.expect("push");
    assert_eq!(code(c.push(&push(1, 0, 3, 1, 0, vec![(0, 5)])).await), ErrorCode::BadRequest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_generation_refuses_the_old_and_drops_its_data() {
    let n = node("127.0.0.1", 64 << 20).await;
    let mut c = client(n.addr(), "app-gen").await;
    c.register_shuffle(4, 1, 2).await.expect("register");
    let mut p = AttemptPusher::new(4, 1, 0, 1);
    p.add(&mut c, 0, 5, &records(0, 1, 0, 5)).await.expect("add");
    p.commit(&mut c).await.expect("commit");
    assert!(c.stats().await.expect("stats").held_bytes > 0);
    c.register_shuffle(4, 2, 2).await.expect("generation 2");
    let registered = SHUFFLE_ENTRIES * ENTRY_BYTES;
    let held = c.stats().await.expect("stats").held_bytes;
    assert_eq!(held, registered, "generation 1's data is dropped, generation 2 registered");
    assert_eq!(code(c.push(&push(4, 1, 0, 2, 0, vec![(0, 1)])).await), ErrorCode::StaleGeneration);
    assert_eq!(
        code(c.commit(4, 1, 0, 2, 0, acks_checksum([]), 0).await),
        ErrorCode::StaleGeneration
    );
    assert_eq!(code(c.register_shuffle(4, 1, 2).await), ErrorCode::StaleGeneration);
    assert_eq!(code(c.read(4, 1, 0, 2, vec![]).await), ErrorCode::StaleGeneration);
    assert_eq!(code(c.register_shuffle(4, 2, 3).await), ErrorCode::BadRequest);
    // The new generation works from scratch.
    let mut p = AttemptPusher::new(4, 2, 0, 9);
    p.add(&mut c, 1, 2, &records(0, 9, 1, 2)).await.expect("add");
    p.commit(&mut c).await.expect("commit");
    let b = c.read(4, 2, 0, 2, vec![Winner { map: 0, attempt: 9 }]).await.expect("read");
    assert_eq!(b.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn applications_see_only_their_own_shuffles() {
    let n = node("127.0.0.1", 64 << 20).await;
    let mut a = client(n.addr(), "app-one").await;
    let mut b = client(n.addr(), "app-two").await;
    a.register_shuffle(0, 0, 1).await.expect("register");
    let mut p = AttemptPusher::new(0, 0, 0, 1);
    p.add(&mut a, 0, 4, &records(0, 1, 0, 4)).await.expect("add");
    p.commit(&mut a).await.expect("commit");
    // Application two names application one's shuffle.
    assert_eq!(
        code(b.read(0, 0, 0, 1, vec![Winner { map: 0, attempt: 1 }]).await),
        ErrorCode::UnknownShuffle
    );
    assert_eq!(code(b.push(&push(0, 0, 1, 1, 0, vec![(0, 1)])).await), ErrorCode::UnknownShuffle);
    b.unregister_shuffle(0).await.expect("unregistering its own (absent) shuffle");
    b.end_application().await.expect("end");
    // Application one's data survives both.
    let r = a.read(0, 0, 0, 1, vec![Winner { map: 0, attempt: 1 }]).await.expect("read");
    assert_eq!(r.iter().map(|b| b.records).sum::<u64>(), 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_budget_partitions_go_to_disk_and_read_back_checked() {
    let budget = sluice_service::daemon::MIN_MEMORY_BYTES;
    let n = node("127.0.0.1", budget).await;
    let mut c = client(n.addr(), "app-spill").await;
    c.register_shuffle(2, 0, 4).await.expect("register");
    let chunk = vec![0x5au8; 800_000];
    let mut expected: HashMap<u32, Vec<u8>> = HashMap::new();
    for map in 0..12u32 {
        let mut p = AttemptPusher::new(2, 0, map, 1);
        for part in 0..4u32 {
            let mut data = chunk.clone();
            data[0] = map as u8;
            data[1] = part as u8;
            expected.entry(part).or_default().extend_from_slice(&data);
            p.add(&mut c, part, 1, &data).await.expect("add");
        }
        p.commit(&mut c).await.expect("commit");
    }
    let st = c.stats().await.expect("stats");
    let (held, peak, spilled) = (st.held_bytes, st.peak_bytes, st.spilled_bytes);
    assert_eq!((st.commits, st.reads), (12, 0), "{st:?}");
    assert!(st.chunks >= 12, "a chunk at least per map: {st:?}");
    assert!(peak <= budget, "peak {peak} over the budget {budget}");
    assert!(spilled > 0 && held <= budget, "held {held}, spilled {spilled}");
    let winners: Vec<Winner> = (0..12).map(|map| Winner { map, attempt: 1 }).collect();
    for part in 0..4 {
        let got: Vec<u8> = c
            .read(2, 0, part, part + 1, winners.clone())
            .await
            .expect("read")
            .into_iter()
            .flat_map(|b| b.data)
            .collect();
        assert_eq!(got, expected[&part], "partition {part}");
    }
    assert_eq!(c.stats().await.expect("stats").reads, 4, "one read per request");
    // The application's files and directories are the daemon user's alone,
    // whatever the umask (the test's is the usual 022).
    let files = walk(n.dir.path());
    assert!(!files.is_empty(), "no spill file");
    for f in &files {
        let mut at = Some(f.as_path());
        while let Some(p) = at.filter(|p| *p != n.dir.path()) {
            let mode = std::fs::metadata(p).expect("metadata").permissions().mode();
            assert_eq!(mode & 0o077, 0, "{} is mode {mode:o}", p.display());
            at = p.parent();
        }
    }
    // A byte flipped on disk is found and named.
    let file = walk(n.dir.path())
        .into_iter()
        .find(|f| f.to_string_lossy().ends_with(".data"))
        .expect("a spill file");
    let mut bytes = std::fs::read(&file).expect("read");
    bytes[10] ^= 0xff;
    std::fs::write(&file, &bytes).expect("write");
    let mut hit = false;
    for part in 0..4 {
        if let Err(e) = c.read(2, 0, part, part + 1, winners.clone()).await {
            assert_eq!(e.code(), Some(ErrorCode::Corrupt), "{e}");
            assert!(e.to_string().contains("offset 0"), "{e}");
            hit = true;
            // The connection is still usable after a refusal.
            c.stats().await.expect("stats after a refusal");
        }
    }
    assert!(hit, "the corrupt block was not found");
    c.unregister_shuffle(2).await.expect("unregister");
    assert!(
        walk(n.dir.path()).iter().all(|f| !f.to_string_lossy().ends_with(".data")),
        "files deleted"
    );
}

/// The files under `dir`, but the daemon's lock file.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).expect("dir").flatten() {
        if e.path().is_dir() {
            out.extend(walk(&e.path()));
        } else if e.file_name() != ".sluice-daemon.lock" {
            out.push(e.path());
        }
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn staged_chunks_past_the_budget_spill_and_no_pusher_waits() {
    let budget = sluice_service::daemon::MIN_MEMORY_BYTES;
    let n = node("127.0.0.1", budget).await;
    let addr = n.addr();
    let mut a = client(addr, "app-staged").await;
    a.register_shuffle(0, 0, 2).await.expect("register");
    let chunk = move |map: u32, seq: u32| Message::Push {
        shuffle: 0,
        generation: 0,
        map,
        attempt: 1,
        seq,
        sections: vec![Section {
            partition: map % 2,
            records: 1,
            data: vec![map as u8 + 1; (budget / 3) as usize],
        }],
    };
    // Two map attempts push three budget-thirds each before either commits:
    // twice the budget staged at once. Neither may wait on the other.
    let other = tokio::spawn(async move {
        let mut b = client(addr, "app-staged").await;
        let acks =
            [b.push(&chunk(1, 0)).await?, b.push(&chunk(1, 1)).await?, b.push(&chunk(1, 2)).await?];
        b.commit(0, 0, 1, 1, 3, acks_checksum([(0, acks[0]), (1, acks[1]), (2, acks[2])]), 3).await
    });
    let acks = [
        a.push(&chunk(0, 0)).await.expect("push"),
        a.push(&chunk(0, 1)).await.expect("push"),
        a.push(&chunk(0, 2)).await.expect("push"),
    ];
    a.commit(0, 0, 0, 1, 3, acks_checksum([(0, acks[0]), (1, acks[1]), (2, acks[2])]), 3)
        .await
        .expect("commit");
    tokio::time::timeout(Duration::from_secs(30), other)
        .await
        .expect("in time")
        .expect("join")
        .expect("commit");
    let st = a.stats().await.expect("stats");
    let (peak, spilled) = (st.peak_bytes, st.spilled_bytes);
    assert!(peak <= budget && spilled > 0, "peak {peak}, spilled {spilled}");
    let winners = vec![Winner { map: 0, attempt: 1 }, Winner { map: 1, attempt: 1 }];
    for p in 0..2u32 {
        let blocks = a.read(0, 0, p, p + 1, winners.clone()).await.expect("read");
        assert_eq!(blocks.len(), 3, "partition {p}");
        assert!(blocks.iter().all(|b| b.map == p
            && b.data.len() == (budget / 3) as usize
            && b.data.iter().all(|&x| x == p as u8 + 1)));
    }
    a.unregister_shuffle(0).await.expect("unregister");
    assert!(
        walk(n.dir.path()).is_empty() || walk(n.dir.path()).iter().all(|f| f.is_dir()),
        "spill files deleted: {:?}",
        walk(n.dir.path())
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lapsed_lease_deletes_the_applications_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = common::config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20);
    cfg.max_lease = Duration::from_millis(400);
    let d = sluice_service::Daemon::start(cfg).await.expect("daemon");
    let mut c = client(d.addr(), "app-lease").await;
    assert_eq!(c.lease(), Duration::from_millis(400), "the lease is capped by the daemon");
    c.register_shuffle(0, 0, 1).await.expect("register");
    let mut p = AttemptPusher::new(0, 0, 0, 1);
    p.add(&mut c, 0, 1, b"x").await.expect("add");
    p.commit(&mut c).await.expect("commit");
    c.renew().await.expect("renew");
    tokio::time::sleep(Duration::from_millis(1000)).await;
    assert_eq!(d.stats().held_bytes, 0, "the lapsed application's bytes are freed");
    assert_eq!(code(c.renew().await), ErrorCode::Unauthenticated);
    let mut again = client(d.addr(), "app-lease").await;
    assert_eq!(code(again.read(0, 0, 0, 1, vec![]).await), ErrorCode::UnknownShuffle);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_refuses_new_work_and_closes_connections() {
    let n = node("127.0.0.1", 64 << 20).await;
    let addr = n.addr();
    let mut c = client(addr, "app-stop").await;
    c.register_shuffle(0, 0, 1).await.expect("register");
    let started = std::time::Instant::now();
    n.daemon.shutdown().await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "an idle connection held shutdown {:?}",
        started.elapsed()
    );
    let r = c.push(&push(0, 0, 0, 1, 0, vec![(0, 1)])).await;
    assert!(
        matches!(r, Err(ClientError::Closed { .. }) | Err(ClientError::Protocol { .. })),
        "{r:?}"
    );
    let again = sluice_service::Client::connect(
        addr,
        "app-stop",
        &sluice_service::auth::app_key(&common::secret(), "app-stop"),
        Duration::from_secs(5),
    )
    .await;
    assert!(matches!(again, Err(ClientError::Connect { .. })), "{again:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_large_add_is_pushed_in_chunks_and_read_back_whole() {
    let n = node("127.0.0.1", 64 << 20).await;
    let mut c = client(n.addr(), "app-large").await;
    c.register_shuffle(0, 0, 1).await.expect("register");
    let data: Vec<u8> = (0..3_500_000u32).map(|i| (i % 251) as u8).collect();
    let mut p = AttemptPusher::new(0, 0, 0, 1);
    p.add(&mut c, 0, 77, &data).await.expect("add");
    p.commit(&mut c).await.expect("commit");
    let blocks = c.read(0, 0, 0, 1, vec![Winner { map: 0, attempt: 1 }]).await.expect("read");
    assert!(blocks.len() >= 4, "{} blocks", blocks.len());
    assert_eq!(blocks.iter().map(|b| b.records).sum::<u64>(), 77);
    let got: Vec<u8> = blocks.into_iter().flat_map(|b| b.data).collect();
    assert!(got == data, "the pieces concatenate to the data");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_in_flight_keep_the_connection_busy_until_the_commit() {
    let n = node("127.0.0.1", 64 << 20).await;
    let mut c = client(n.addr(), "app-window").await;
    c.register_shuffle(0, 0, 2).await.expect("register");
    // About ten chunks: more than the pusher's window, so it waits on the
    // oldest answers while it sends.
    let data: Vec<u8> = (0..10_000_000u32).map(|i| (i % 253) as u8).collect();
    let mut p = AttemptPusher::new(0, 0, 0, 1);
    p.add(&mut c, 1, 5, &data).await.expect("add");
    assert!(!c.is_idle(), "chunks in flight, yet the connection looks idle");
    assert!(c.stats().await.is_err(), "a request sent among unanswered pushes");
    assert!(p.commit(&mut c).await.expect("commit"));
    assert!(c.is_idle(), "every answer read by the commit");
    assert_eq!(c.stats().await.expect("stats").chunks, 10);
    let blocks = c.read(0, 0, 0, 2, vec![Winner { map: 0, attempt: 1 }]).await.expect("read");
    assert_eq!(blocks.iter().map(|b| b.records).sum::<u64>(), 5);
    let got: Vec<u8> = blocks.into_iter().flat_map(|b| b.data).collect();
    assert!(got == data, "the chunks concatenate to the data");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowed_down_chunk_is_sent_again_after_its_wait_and_committed() {
    let budget = sluice_service::daemon::MIN_MEMORY_BYTES;
    let n = node("127.0.0.1", budget).await;
    let mut c = client(n.addr(), "app-slowed").await;
    c.register_shuffle(0, 0, 2).await.expect("register");
    // The budget filled with 200 small owners: attempts that staged 40 KiB
    // each and never commit. A chunk of about 1 MiB needs more of them
    // spilled than one push may spill (16) before it is answered SlowDown.
    let small = 40 << 10;
    let owners = (budget / small - 4) as u32;
    for map in 0..owners {
        let m = Message::Push {
            shuffle: 0,
            generation: 0,
            map,
            attempt: 1,
            seq: 0,
            sections: vec![Section { partition: 0, records: 1, data: vec![7; small as usize] }],
        };
        c.push(&m).await.expect("stage a small owner");
    }
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i % 241) as u8).collect();
    let mut p = AttemptPusher::new(0, 0, owners, 1);
    p.add(&mut c, 1, 9, &data).await.expect("add");
    p.settle_all(&mut c).await.expect("every chunk acknowledged");
    assert!(p.slow_downs() >= 1, "no chunk was slowed down");
    assert!(p.commit(&mut c).await.expect("commit"), "first commit of its map");
    let st = c.stats().await.expect("stats");
    assert!(st.peak_bytes <= budget && st.spilled_bytes > 0, "{st:?}");
    let blocks = c.read(0, 0, 1, 2, vec![Winner { map: owners, attempt: 1 }]).await.expect("read");
    assert_eq!(blocks.iter().map(|b| b.records).sum::<u64>(), 9);
    let got: Vec<u8> = blocks.into_iter().flat_map(|b| b.data).collect();
    assert!(got == data, "the chunks, one sent twice, concatenate to the data in order");
}
