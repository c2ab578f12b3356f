//! Real daemons on loopback addresses (127.0.0.1, 127.0.0.2, ...: one per
//! node, as in production the host is the node), each with its own
//! directory, and clients that authenticate as an application.

#![allow(dead_code, unreachable_pub)]

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use sluice_service::auth::{app_key, Key};
use sluice_service::{Client, Daemon, DaemonConfig};

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
