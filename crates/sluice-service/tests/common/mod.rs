//! Real daemons on loopback addresses (127.0.0.1, 127.0.0.2, ...: one per
//! node, as in production the host is the node), each with its own
//! directory, and clients that authenticate as an application.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use sluice_service::auth::{app_key, proof, Handshake, Key, Nonces};
use sluice_service::protocol::limits::{FRAME_HEADER_BYTES, MAX_FRAME_PAYLOAD_BYTES};
use sluice_service::protocol::{frame, ErrorCode, Message, Section};
use sluice_service::{Client, Daemon, DaemonConfig};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

pub const SECRET: &[u8] = b"a node secret of the test cluster";

pub fn secret() -> Key {
    Key::secret(SECRET).expect("secret")
}

pub struct Node {
    pub daemon: Daemon,
    pub dir: tempfile::TempDir,
}

impl Node {
    pub fn addr(&self) -> SocketAddr {
        self.daemon.addr()
    }
}

pub fn config(host: &str, dirs: Vec<PathBuf>, memory: u64) -> DaemonConfig {
    DaemonConfig {
        listen: format!("{host}:0").parse().expect("address"),
        dirs,
        memory_bytes: memory,
        secret: secret(),
        max_lease: Duration::from_secs(60),
        max_connections: None,
        stream_stall: sluice_service::daemon::STREAM_STALL_TIMEOUT,
        frame_memory_bytes: sluice_service::daemon::DEFAULT_FRAME_MEMORY_BYTES,
        frame_wait: sluice_service::daemon::FRAME_WAIT_TIMEOUT,
    }
}

pub async fn node(host: &str, memory: u64) -> Node {
    let dir = tempfile::tempdir().expect("tempdir");
    let daemon =
        Daemon::start(config(host, vec![dir.path().to_path_buf()], memory)).await.expect("daemon");
    Node { daemon, dir }
}

pub async fn client(addr: SocketAddr, app: &str) -> Client {
    Client::connect(addr, app, &app_key(&secret(), app), Duration::from_secs(30))
        .await
        .expect("client")
}

/// Records of map `map` for partition `p`: `n` records of 10 bytes.
pub fn records(map: u32, attempt: u64, p: u32, n: u64) -> Vec<u8> {
    (0..n).flat_map(|i| format!("{map:02}{attempt:02}{p:02}{i:04}").into_bytes()).collect()
}

/// How long a raw socket waits for a daemon's frame.
pub const WAIT: Duration = Duration::from_secs(10);

/// A raw connection to `addr` and the daemon's challenge.
pub async fn open(addr: std::net::SocketAddr) -> (TcpStream, [u8; 32]) {
    let mut s = TcpStream::connect(addr).await.expect("connect");
    match frame::read(&mut s, 0, WAIT, "challenge").await.expect("frame") {
        Some((Message::Challenge { nonce }, _)) => (s, nonce),
        other => panic!("expected a challenge, got {other:?}"),
    }
}

/// The handshake a raw connection to `addr` answers: the daemon's `nonce`,
/// the client's nonce `[3; 32]`, a task's connection asking `lease_ms`.
pub fn handshake(
    nonce: [u8; 32],
    addr: std::net::SocketAddr,
    app: &str,
    lease_ms: u64,
) -> Handshake<'_> {
    Handshake {
        nonces: Nonces { daemon: nonce, client: [3; 32] },
        daemon: addr,
        app,
        lease_ms,
        lease_only: false,
    }
}

/// A raw connection authenticated as `app`.
pub async fn authed(addr: std::net::SocketAddr, app: &str) -> TcpStream {
    let (mut s, nonce) = open(addr).await;
    let auth = Message::Auth {
        app: app.into(),
        lease_ms: 60_000,
        proof: proof(&app_key(&secret(), app), &handshake(nonce, addr, app, 60_000)),
        challenge: [3; 32],
        lease_only: false,
    };
    s.write_all(&frame::encode(&auth)).await.expect("write");
    match frame::read(&mut s, 1, WAIT, "welcome").await.expect("frame") {
        Some((Message::Welcome { .. }, _)) => s,
        other => panic!("expected a welcome, got {other:?}"),
    }
}

/// The next frame is an error of `code`, and then the daemon closes.
pub async fn refused_then_closed(s: &mut TcpStream, code: ErrorCode) -> String {
    let m = match frame::read(s, 9, WAIT, "a refusal").await.expect("frame") {
        Some((Message::Error { code: c, message }, _)) if c == code => message,
        other => panic!("expected {code:?}, got {other:?}"),
    };
    let mut rest = Vec::new();
    let n = tokio::time::timeout(WAIT, s.read_to_end(&mut rest))
        .await
        .expect("closed in time")
        .unwrap_or(0);
    assert_eq!(n, 0, "bytes after the refusal");
    m
}

/// A push of map `map` to shuffle 1 carrying `len` bytes for partition 0.
pub fn push(map: u32, len: usize) -> Message {
    Message::Push {
        shuffle: 1,
        generation: 0,
        map,
        attempt: 1,
        seq: 0,
        sections: vec![Section { partition: 0, records: 1, data: vec![map as u8; len] }],
    }
}

/// A push whose payload is exactly the largest a frame carries.
pub fn largest_push(map: u32) -> Vec<u8> {
    let overhead = frame::encode(&push(map, 0)).len() - FRAME_HEADER_BYTES;
    let f = frame::encode(&push(map, MAX_FRAME_PAYLOAD_BYTES as usize - overhead));
    assert_eq!(f.len() - FRAME_HEADER_BYTES, MAX_FRAME_PAYLOAD_BYTES as usize);
    f
}
