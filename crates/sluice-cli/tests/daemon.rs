//! `sluice daemon` as a process: it starts on a node's loopback address,
//! serves a push, commit and read from a real client, counts them for
//! `sluice stats`, stops on SIGTERM with its peak printed, and refuses a port in use, a missing directory
//! and a secret file others can read with a clear error and status 1.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use sluice_service::auth::Key;
use sluice_service::protocol::Winner;
use sluice_service::{AttemptPusher, Client};

const SECRET: &[u8] = b"the secret of node 127.0.0.2, for tests";

fn secret_file(dir: &std::path::Path, mode: u32) -> std::path::PathBuf {
    let f = dir.join(format!("secret-{mode:o}"));
    std::fs::write(&f, SECRET).expect("secret");
    std::fs::set_permissions(&f, std::fs::Permissions::from_mode(mode)).expect("chmod");
    f
}

fn daemon(args: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.arg("daemon").args(args);
    c
}

fn start(dir: &std::path::Path, port: &str) -> (Child, String) {
    let secret = secret_file(dir, 0o600);
    let mut child =
        daemon(&["--host", "127.0.0.2", "--port", port, "--memory", "16m", "--secret-file"])
            .arg(&secret)
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn");
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().expect("stdout")).read_line(&mut line).expect("line");
    let addr = line
        .trim()
        .strip_prefix("sluice daemon listening on ")
        .unwrap_or_else(|| panic!("{line:?}"))
        .to_owned();
    (child, addr)
}

fn fails_with(mut c: Command, what: &str) {
    let out = c.output().expect("run");
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(what), "{err}");
}

#[test]
fn the_daemon_serves_a_client_and_stops_on_sigterm() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (child, addr) = start(dir.path(), "0");
    let key_out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["app-key", "--app", "app-cli", "--secret-file"])
        .arg(secret_file(dir.path(), 0o400))
        .output()
        .expect("app-key");
    let key = Key::from_hex(String::from_utf8_lossy(&key_out.stdout).trim()).expect("a key");
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    rt.block_on(async {
        let mut c =
            Client::connect(addr.parse().expect("addr"), "app-cli", &key, Duration::from_secs(60))
                .await
                .expect("connect");
        c.register_shuffle(0, 0, 2).await.expect("register");
        let mut p = AttemptPusher::new(0, 0, 0, 1);
        p.add(&mut c, 1, 3, b"abcdefghi").await.expect("add");
        assert!(p.commit(&mut c).await.expect("commit"));
        let blocks = c.read(0, 0, 0, 2, vec![Winner { map: 0, attempt: 1 }]).await.expect("read");
        assert_eq!(blocks.len(), 1);
        assert_eq!(blocks[0].data, b"abcdefghi");
    });
    let secret = secret_file(dir.path(), 0o600);
    let out = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(["stats", "--daemon", &addr, "--secret-file"])
        .arg(&secret)
        .output()
        .expect("stats");
    assert!(out.status.success(), "{out:?}");
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    // The block's 9 bytes and the bookkeeping of its entry, its shuffle
    // and its commit.
    use sluice_service::daemon::{COMMIT_ENTRIES, ENTRY_BYTES, SHUFFLE_ENTRIES, STAGED_ENTRIES};
    let held = 9 + (1 + SHUFFLE_ENTRIES + COMMIT_ENTRIES) * ENTRY_BYTES;
    for (field, want) in [
        ("held_bytes", held),
        ("budget_bytes", 16 << 20),
        ("chunks", 1),
        ("commits", 1),
        ("reads", 1),
    ] {
        assert_eq!(stats[field], want, "{field} in {stats}");
    }
    // Another node's secret is refused before anything is answered.
    let wrong = dir.path().join("wrong-secret");
    std::fs::write(&wrong, b"the secret of another node, not this one").expect("secret");
    std::fs::set_permissions(&wrong, std::fs::Permissions::from_mode(0o600)).expect("chmod");
    let mut c = Command::new(env!("CARGO_BIN_EXE_sluice"));
    c.args(["stats", "--daemon", &addr, "--secret-file"]).arg(&wrong);
    fails_with(c, "refused");
    // A second daemon on the same address.
    let (host, port) = addr.rsplit_once(':').expect("host:port");
    let mut second = daemon(&["--host", host, "--port", port, "--memory", "16m", "--secret-file"]);
    second.arg(&secret).arg("--dir").arg(dir.path());
    fails_with(second, "is in use");
    let status =
        Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    assert!(status.success());
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{out:?}");
    let rest = String::from_utf8_lossy(&out.stdout);
    // The peak came before the commit: the chunk staged, its attempt's
    // record charged, no proof yet.
    let peak = held + (STAGED_ENTRIES - COMMIT_ENTRIES) * ENTRY_BYTES;
    let peak = format!("sluice daemon stopped: peak {peak} of 16777216 bytes held");
    assert!(rest.contains(&peak), "{rest}");
    assert!(rest.contains(" connections, 0 answered busy"), "{rest}");
}

#[test]
fn bad_settings_are_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let open = secret_file(dir.path(), 0o644);
    let good = secret_file(dir.path(), 0o600);
    let mut c = daemon(&["--host", "127.0.0.2", "--port", "0", "--memory", "16m", "--dir"]);
    c.arg(dir.path()).arg("--secret-file").arg(&open);
    fails_with(c, "may be read by others");
    let mut c = daemon(&["--host", "127.0.0.2", "--port", "0", "--memory", "16m", "--dir"]);
    c.arg(dir.path().join("missing")).arg("--secret-file").arg(&good);
    fails_with(c, "No such file");
    let mut c = daemon(&["--host", "127.0.0.2", "--port", "0", "--memory", "1k", "--dir"]);
    c.arg(dir.path()).arg("--secret-file").arg(&good);
    fails_with(c, "--memory must be at least");
    let mut c = daemon(&["--host", "127.0.0.2", "--port", "0", "--memory", "16m", "--dir"]);
    c.arg(dir.path()).arg("--secret-file").arg(&good).args(["--max-lease-s", "30"]);
    fails_with(c, "--max-lease-s must be at least 180");
    let mut c = daemon(&["--host", "127.0.0.2", "--port", "0", "--memory", "16m", "--dir"]);
    c.arg(dir.path()).arg("--secret-file").arg(&good).args(["--stream-stall-s", "0"]);
    fails_with(c, "--stream-stall-s must be at least 1");
    let mut c = daemon(&["--host", "127.0.0.2", "--port", "0", "--memory", "16m", "--dir"]);
    c.arg(dir.path()).arg("--secret-file").arg(&good).args(["--max-connections", "0"]);
    fails_with(c, "serves at least one connection");
    // An open-file limit (soft and hard, set by the shell) that cannot hold
    // the connections asked for beside the descriptors kept for spill files
    // and leases' connections
    // (a shell may lower its hard limit, and raise it only up to its own).
    let limits = std::fs::read_to_string("/proc/self/limits").expect("limits");
    let hard = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .and_then(|l| l.split_whitespace().nth(4))
        .expect("Max open files");
    assert!(hard == "unlimited" || hard.parse::<u64>().expect(hard) >= 1100, "hard {hard}");
    let mut c = Command::new("sh");
    c.args(["-c", "ulimit -n 1100 && exec \"$0\" \"$@\"", env!("CARGO_BIN_EXE_sluice")]);
    c.args(["daemon", "--host", "127.0.0.2", "--port", "0", "--memory", "16m", "--dir"]);
    c.arg(dir.path()).arg("--secret-file").arg(&good).args(["--max-connections", "200"]);
    fails_with(c, "needs an open-file limit of 1480, and the limit is 1100");
    let out =
        daemon(&["--host", "127.0.0.2", "--port", "0", "--memory", "lots"]).output().expect("run");
    assert_eq!(out.status.code(), Some(2), "clap's usage error");
}
