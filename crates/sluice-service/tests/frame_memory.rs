//! A daemon's frames in flight stay within `--frame-memory`: while one
//! connection's push holds all of it (a 4 MiB frame half sent), another
//! connection's push is read through without being kept and answered
//! `SlowDown`, a push of it with a forged CRC is still refused `Malformed`,
//! and a request other than a push waits for room, for the daemon's frame
//! wait, and is then answered `Busy` on its open connection. Once the first
//! push is served, the others go through, and the daemon's stats count the
//! peak and the slow-downs.

mod common;

use std::time::Duration;

use common::{authed, client, config, largest_push, push, refused_then_closed, WAIT};
use sluice_service::daemon::MIN_FRAME_MEMORY_BYTES;
use sluice_service::protocol::limits::{FRAME_HEADER_BYTES, MAX_FRAME_PAYLOAD_BYTES};
use sluice_service::protocol::{frame, ErrorCode, Message};
use sluice_service::Daemon;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const APP: &str = "app-frames";

async fn answer(s: &mut TcpStream) -> Message {
    frame::read(s, 9, WAIT, "an answer").await.expect("frame").expect("not closed").0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_push_finding_the_frame_memory_held_is_slowed_down_and_others_wait() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20);
    cfg.frame_memory_bytes = MIN_FRAME_MEMORY_BYTES;
    cfg.frame_wait = Duration::from_secs(1);
    let daemon = Daemon::start(cfg).await.expect("daemon");
    let mut c = client(daemon.addr(), APP).await;
    c.register_shuffle(1, 0, 2).await.expect("register");

    // Connection a: a push of the largest frame, its header and half its
    // payload sent. Reading it holds twice its payload: all the memory.
    let big = largest_push(0);
    let mut a = authed(daemon.addr(), APP).await;
    let half = FRAME_HEADER_BYTES + MAX_FRAME_PAYLOAD_BYTES as usize / 2;
    a.write_all(&big[..half]).await.expect("write");
    let deadline = tokio::time::Instant::now() + WAIT;
    while c.stats().await.expect("stats").frames_peak_bytes < MIN_FRAME_MEMORY_BYTES {
        assert!(tokio::time::Instant::now() < deadline, "the half-sent push took no memory");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    // Connection b: a small push is read through and slowed down.
    let small = frame::encode(&push(1, 1000));
    let mut b = authed(daemon.addr(), APP).await;
    b.write_all(&small).await.expect("write");
    assert!(matches!(answer(&mut b).await, Message::SlowDown { .. }), "b's push");

    // The same push with its CRC forged, read through just the same, is
    // refused as malformed: skipping a payload still checks it.
    let mut forged = small.clone();
    forged[12] ^= 0x5a;
    let mut f = authed(daemon.addr(), APP).await;
    f.write_all(&forged).await.expect("write");
    let why = refused_then_closed(&mut f, ErrorCode::Malformed).await;
    assert!(why.contains("CRC32C"), "{why}");

    // A registration (not a push) waits for room instead of being refused,
    // for the daemon's frame wait; then it is read through and answered
    // Busy, its connection still open.
    let addr = daemon.addr();
    let waiting = tokio::spawn(async move {
        let mut r = client(addr, APP).await;
        let first = r.register_shuffle(2, 0, 1).await;
        (r, first)
    });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "the registration did not wait for the frame memory");
    let (mut r, first) = waiting.await.expect("joined");
    let err = first.expect_err("a registration past the frame wait");
    assert_eq!(err.code(), Some(ErrorCode::Busy), "{err}");

    // a's push completes and is served; the memory is given back.
    a.write_all(&big[half..]).await.expect("write");
    assert!(
        matches!(answer(&mut a).await, Message::PushAck { seq: 0, crc } if crc == frame::crc_of(&big)),
        "a's push"
    );
    r.register_shuffle(2, 0, 1).await.expect("the registration, once there was room");
    b.write_all(&small).await.expect("write");
    assert!(
        matches!(answer(&mut b).await, Message::PushAck { seq: 0, crc } if crc == frame::crc_of(&small)),
        "b's push sent again"
    );

    let s = c.stats().await.expect("stats");
    assert_eq!(s.frames_peak_bytes, MIN_FRAME_MEMORY_BYTES, "{s:?}");
    assert_eq!(s.frames_slow_downs, 2, "b's push and the forged one: {s:?}");
    assert_eq!(s.chunks, 2, "a's and b's chunks staged once each: {s:?}");
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frame_memory_under_one_push_is_refused_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20);
    cfg.frame_memory_bytes = MIN_FRAME_MEMORY_BYTES - 1;
    let err = Daemon::start(cfg).await.expect_err("too little frame memory");
    assert!(err.to_string().contains("--frame-memory"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_of_one_size_claiming_more_takes_no_frame_memory() {
    // A renewal's header saying 4 MiB would, read as any request, hold
    // twice that of the frame memory for as long as the client keeps the
    // payload back (all of it here): it is refused from the header instead.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20);
    cfg.frame_memory_bytes = MIN_FRAME_MEMORY_BYTES;
    let daemon = Daemon::start(cfg).await.expect("daemon");
    let mut a = authed(daemon.addr(), APP).await;
    let mut head = frame::encode(&Message::Renew);
    head[8..12].copy_from_slice(&MAX_FRAME_PAYLOAD_BYTES.to_le_bytes());
    a.write_all(&head).await.expect("write");
    let why = refused_then_closed(&mut a, ErrorCode::Malformed).await;
    assert!(why.contains(&format!("Renew of {MAX_FRAME_PAYLOAD_BYTES} payload bytes")), "{why}");
    // Another application's requests are served at once, and nothing was
    // ever taken but for them (a registration's 12 bytes, twice).
    let mut c = client(daemon.addr(), "app-other").await;
    c.register_shuffle(1, 0, 1).await.expect("register");
    let peak = c.stats().await.expect("stats").frames_peak_bytes;
    assert!(peak <= 24, "{peak} bytes of frame memory taken");
}
