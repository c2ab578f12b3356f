//! A daemon's connection limit, on a real daemon on loopback: one
//! connection over it is answered `Busy` (a typed refusal, not a closed
//! socket that looks like a dead daemon), a client that waits gets in once
//! a connection closes, the counts reach `sluice stats`, a driver's lease
//! connection is served in a slot of its own (and only renews), and a
//! limit the open-file limit cannot hold stops the daemon from starting.

mod common;

use std::time::Duration;

use common::{config, secret, WAIT};
use sluice_service::auth::app_key;
use sluice_service::protocol::{frame, ErrorCode, Message};
use sluice_service::{
    Client, ClientError, Daemon, DaemonError, AUTH_PENDING_PER_HOST, LEASE_CONNECTIONS,
};
use tokio::net::TcpStream;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_over_the_limit_is_answered_busy_and_gets_in_when_one_closes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20);
    cfg.max_connections = Some(2);
    let daemon = Daemon::start(cfg).await.expect("daemon");
    assert_eq!(daemon.max_connections(), 2);
    let addr = daemon.addr();
    let (app, lease) = ("app-busy", Duration::from_secs(30));
    let key = app_key(&secret(), app);
    let first = Client::connect(addr, app, &key, lease).await.expect("first");
    let mut second = Client::connect(addr, app, &key, lease).await.expect("second");
    second.register_shuffle(0, 0, 1).await.expect("register");

    // Tried once: the third is refused with the typed answer.
    let once = Client::connect_within(addr, app, &key, lease, Duration::ZERO).await;
    match once {
        Err(e) => assert_eq!(e.code(), Some(ErrorCode::Busy), "{e}"),
        Ok(_) => panic!("a third connection was served over a limit of two"),
    }

    // Waiting: it gets in once the first closes, and is served.
    let waiting = tokio::spawn({
        let key = key.clone();
        async move { Client::connect(addr, app, &key, lease).await }
    });
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(!waiting.is_finished(), "the waiting client got in over the limit");
    drop(first);
    let mut third = tokio::time::timeout(Duration::from_secs(20), waiting)
        .await
        .expect("the waiting client got in within 20 s")
        .expect("join")
        .expect("connect after the wait");
    third.register_shuffle(0, 0, 1).await.expect("served after the wait");

    let s = daemon.stats();
    assert_eq!(s.peak_connections, 2, "{s:?}");
    assert!(s.busy_refusals >= 2, "the refused try and at least one of the waiting one's: {s:?}");
    drop((second, third));
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lease_connection_has_a_slot_of_its_own_and_only_renews() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20);
    cfg.max_connections = Some(1);
    let daemon = Daemon::start(cfg).await.expect("daemon");
    let addr = daemon.addr();
    let (app, lease, once) = ("app-lease", Duration::from_secs(30), Duration::ZERO);
    let key = app_key(&secret(), app);
    let busy = |r: Result<Client, ClientError>, what: &str| match r {
        Err(e) => assert_eq!(e.code(), Some(ErrorCode::Busy), "{what}: {e}"),
        Ok(_) => panic!("{what} was served over the limit"),
    };

    // The daemon's one task slot taken, a driver's lease connection still
    // gets in, renews, and is refused anything else.
    let task = Client::connect(addr, app, &key, lease).await.expect("a task's connection");
    let mut renewer =
        Client::connect_lease(addr, app, &key, lease, once).await.expect("the lease's connection");
    renewer.renew().await.expect("renew");
    match renewer.register_shuffle(0, 0, 1).await {
        Err(e) => assert_eq!(e.code(), Some(ErrorCode::BadRequest), "{e}"),
        Ok(()) => panic!("a lease connection registered a shuffle"),
    }
    // ...and it keeps no task out: the slot is the task's to give back.
    busy(Client::connect_within(addr, app, &key, lease, once).await, "a second task");
    drop(task);
    let mut next = Client::connect(addr, app, &key, lease).await.expect("a task after the first");
    next.register_shuffle(0, 0, 1).await.expect("served");

    // Every lease slot taken (the renewer holds one), one more lease
    // connection is busy while the task holds its slot, and takes that
    // slot once it is free.
    let mut held = Vec::with_capacity(LEASE_CONNECTIONS);
    for _ in 1..LEASE_CONNECTIONS {
        held.push(Client::connect_lease(addr, app, &key, lease, once).await.expect("a lease slot"));
    }
    busy(Client::connect_lease(addr, app, &key, lease, once).await, "a lease over both kinds");
    drop(next);
    let mut over =
        Client::connect_lease(addr, app, &key, lease, Duration::from_secs(20)).await.expect("over");
    over.renew().await.expect("renew in a task's slot");
    busy(Client::connect_within(addr, app, &key, lease, once).await, "a task with none free");

    let s = daemon.stats();
    assert_eq!(s.peak_connections, LEASE_CONNECTIONS as u64 + 1, "{s:?}");
    drop((renewer, held, over));
    daemon.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_limit_no_open_file_limit_holds_is_a_start_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20);
    cfg.max_connections = Some(1 << 40);
    match Daemon::start(cfg).await {
        Err(e @ DaemonError::Connections { .. }) => {
            assert!(e.to_string().contains("open-file limit"), "{e}");
        }
        other => panic!("started with 2^40 connections allowed: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_connection_is_seen_closed_once_its_daemon_is_gone() {
    let dir = tempfile::tempdir().expect("tempdir");
    let daemon = Daemon::start(config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20))
        .await
        .expect("daemon");
    let (app, lease) = ("app-pooled", Duration::from_secs(30));
    let key = app_key(&secret(), app);
    let mut pooled = Client::connect(daemon.addr(), app, &key, lease).await.expect("connect");
    pooled.register_shuffle(0, 0, 2).await.expect("register");
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(pooled.still_open(), "an idle connection to a live daemon");

    // The daemon stops: it closes its idle connections, and the peek sees
    // the end of stream without a request sent on the connection.
    let stopping = tokio::spawn(daemon.shutdown());
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while pooled.still_open() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!pooled.still_open(), "an idle connection to a stopped daemon still looked open");
    stopping.await.expect("shutdown");
}

/// A raw connection from `from` (a loopback address standing for a host)
/// to `addr`, and the daemon's first frame.
async fn first_frame_from(from: &str, addr: std::net::SocketAddr) -> (TcpStream, Message) {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket.bind(format!("{from}:0").parse().expect("addr")).expect("bind");
    let mut s = socket.connect(addr).await.expect("connect");
    let m = frame::read(&mut s, 0, WAIT, "first frame").await.expect("frame").expect("a frame").0;
    (s, m)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_holding_silent_connections_takes_no_other_hosts_slots() {
    // A host opens connections and never authenticates: it holds at most
    // AUTH_PENDING_PER_HOST of them, its next is answered Busy in place of
    // the challenge, and another host's connections are challenged as ever
    // (a single silent host cannot fill the daemon's connection limit).
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20);
    let daemon = Daemon::start(cfg).await.expect("daemon");
    let addr = daemon.addr();
    let mut silent = Vec::new();
    for _ in 0..AUTH_PENDING_PER_HOST {
        let (s, m) = first_frame_from("127.0.0.3", addr).await;
        assert!(matches!(m, Message::Challenge { .. }), "{m:?}");
        silent.push(s);
    }
    match first_frame_from("127.0.0.3", addr).await.1 {
        Message::Error { code: ErrorCode::Busy, message } => {
            assert!(message.contains("not authenticated"), "{message}")
        }
        other => panic!("a silent host's connection past the limit: {other:?}"),
    }
    let (_, m) = first_frame_from("127.0.0.4", addr).await;
    assert!(matches!(m, Message::Challenge { .. }), "another host: {m:?}");
    let key = app_key(&secret(), "app-host");
    Client::connect(addr, "app-host", &key, Duration::from_secs(30)).await.expect("a task's");
    // Once its connections close, the host is challenged again.
    drop(silent);
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        if matches!(first_frame_from("127.0.0.3", addr).await.1, Message::Challenge { .. }) {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "the host's count never came down");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    daemon.shutdown().await;
}
