//! A read whose reader leaves the stream waiting past the daemon's stall
//! limit (a reduce task busy with the last segment it was given): the
//! daemon closes the connection, the client sees the connection end (not a
//! timeout, not a refusal), and the same read resumed on a new connection
//! after the blocks the client took gets the rest, so that the blocks of
//! both connections are the partition's, each once.

mod common;

use std::time::Duration;

use common::{client, config};
use sluice_service::protocol::{ErrorCode, Winner};
use sluice_service::{AttemptPusher, Block, Client, Daemon, ReadMode};

/// The daemon's stall limit in this test.
const STALL: Duration = Duration::from_secs(1);

/// Bytes pushed: well past what the loopback sockets of both ends buffer
/// (a few MiB each), so that a reader that stops reading stalls the
/// daemon's writes.
const PUSHED_BYTES: usize = 48 << 20;

/// Records the pushed data counts.
const RECORDS: u64 = 4_801;

/// Blocks the reader takes before it stops reading.
const TAKEN_FIRST: usize = 3;

async fn rest(c: &mut Client, got: &mut Vec<Block>) -> Result<(), sluice_service::ClientError> {
    while let Some(b) = c.read_next().await? {
        got.push(b);
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_cut_off_for_a_stalled_reader_resumes_after_the_blocks_it_took() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config("127.0.0.1", vec![dir.path().to_path_buf()], 256 << 20);
    cfg.stream_stall = STALL;
    let daemon = Daemon::start(cfg).await.expect("daemon");
    let mut c = client(daemon.addr(), "app-stall").await;
    c.register_shuffle(4, 0, 1).await.expect("register");
    let data: Vec<u8> =
        (0..PUSHED_BYTES).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let mut p = AttemptPusher::new(4, 0, 0, 1);
    p.add(&mut c, 0, RECORDS, &data).await.expect("add");
    p.commit(&mut c).await.expect("commit");
    let winners = vec![Winner { map: 0, attempt: 1 }];

    let mut got = Vec::new();
    c.read_start((4, 0), 0, 1, winners.clone(), ReadMode::Plain { skip: 0 }).await.expect("read");
    for _ in 0..TAKEN_FIRST {
        got.push(c.read_next().await.expect("a block").expect("not the end"));
    }
    // The reader is busy elsewhere for longer than the daemon waits.
    tokio::time::sleep(STALL * 3).await;
    let cut = rest(&mut c, &mut got).await.expect_err("the daemon closed the stalled stream");
    assert!(cut.connection_ended(), "not the connection's end: {cut}");
    let taken = got.len();
    assert!((TAKEN_FIRST..PUSHED_BYTES >> 20).contains(&taken), "{taken} blocks before the cut");

    let mut again = client(daemon.addr(), "app-stall").await;
    again
        .read_start((4, 0), 0, 1, winners.clone(), ReadMode::Plain { skip: taken as u64 })
        .await
        .expect("resume");
    rest(&mut again, &mut got).await.expect("the rest of the read");
    let bytes: Vec<u8> = got.iter().flat_map(|b| b.data.iter().copied()).collect();
    assert!(bytes == data, "{} bytes read back for {} pushed", bytes.len(), data.len());
    assert_eq!(got.iter().map(|b| b.records).sum::<u64>(), RECORDS, "each record once");

    // Resumed after every block: the end alone. Past the end: refused, as a
    // read of other partitions or winners than the one resumed would be.
    let all = got.len() as u64;
    again
        .read_start((4, 0), 0, 1, winners.clone(), ReadMode::Plain { skip: all })
        .await
        .expect("resume at the end");
    assert_eq!(again.read_next().await.expect("the end"), None);
    again.read_start((4, 0), 0, 1, winners, ReadMode::Plain { skip: all + 1 }).await.expect("sent");
    let past = again.read_next().await.expect_err("refused");
    assert_eq!(past.code(), Some(ErrorCode::BadRequest), "{past}");
    assert!(!past.connection_ended());
}
