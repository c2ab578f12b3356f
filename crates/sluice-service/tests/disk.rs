//! Real small filesystems (tmpfs mounts; where this process may not mount,
//! the test says so and checks nothing else): a full disk refuses the push
//! that needed it with a typed error and loses nothing acknowledged, and a
//! read-only directory stops the daemon from starting.

mod common;

use std::path::Path;
use std::process::Command;

use common::{client, config};
use sluice_service::protocol::{ErrorCode, Winner};
use sluice_service::{AttemptPusher, Daemon, DaemonError};

/// A tmpfs of `size` at `dir` with `opts`, unmounted on drop.
struct Mount(std::path::PathBuf);

impl Mount {
    fn new(dir: &Path, size: &str, opts: &str) -> Option<Mount> {
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}{opts}"), "tmpfs"])
            .arg(dir)
            .output()
            .ok()?;
        if !out.status.success() {
            eprintln!(
                "cannot mount a tmpfs here ({}); the test checks nothing else",
                String::from_utf8_lossy(&out.stderr).trim()
            );
            return None;
        }
        Some(Mount(dir.to_path_buf()))
    }
}

impl Drop for Mount {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_disk_refuses_the_push_and_loses_nothing_acknowledged() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(_m) = Mount::new(dir.path(), "1m", "") else { return };
    let budget = sluice_service::daemon::MIN_MEMORY_BYTES;
    let d = Daemon::start(config("127.0.0.1", vec![dir.path().to_path_buf()], budget))
        .await
        .expect("daemon");
    let mut c = client(d.addr(), "app-full").await;
    c.register_shuffle(0, 0, 8).await.expect("register");
    let mut committed = Vec::new();
    let mut refused = None;
    for map in 0..60u32 {
        let mut p = AttemptPusher::new(0, 0, map, 1);
        let data = vec![map as u8; 300_000];
        let r = async {
            p.add(&mut c, map % 8, 1, &data).await?;
            p.commit(&mut c).await
        }
        .await;
        match r {
            Ok(_) => committed.push(map),
            Err(e) => {
                refused = Some(e);
                break;
            }
        }
    }
    let e = refused.expect("a 1 MiB disk under an 8 MiB budget filled up");
    assert_eq!(e.code(), Some(ErrorCode::Storage), "{e}");
    assert!(e.to_string().contains("No space left"), "{e}");
    // Every committed map's records are still there, from memory or disk.
    let winners: Vec<Winner> = committed.iter().map(|&map| Winner { map, attempt: 1 }).collect();
    let blocks = c.read(0, 0, 0, 8, winners).await.expect("read");
    let mut maps: Vec<u32> = blocks.iter().map(|b| b.map).collect();
    maps.sort_unstable();
    assert_eq!(maps, committed);
    for b in &blocks {
        assert!(
            b.data.iter().all(|&x| x == b.map as u8) && b.data.len() == 300_000,
            "map {}",
            b.map
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_directory_stops_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let Some(_m) = Mount::new(dir.path(), "1m", ",ro") else { return };
    let r = Daemon::start(config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20)).await;
    match r {
        Err(DaemonError::Dir { why, .. }) => assert!(why.contains("not writable"), "{why}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_settings_stop_the_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let missing = dir.path().join("missing");
    let file = dir.path().join("file");
    std::fs::write(&file, b"x").expect("file");
    for (dirs, what) in [(vec![missing], "No such file"), (vec![file], "not a directory")] {
        match Daemon::start(config("127.0.0.1", dirs, 64 << 20)).await {
            Err(DaemonError::Dir { why, .. }) => assert!(why.contains(what), "{why}"),
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        Daemon::start(config("127.0.0.1", vec![], 64 << 20)).await,
        Err(DaemonError::NoDirs)
    ));
    let small = Daemon::start(config("127.0.0.1", vec![dir.path().to_path_buf()], 1000)).await;
    assert!(matches!(small, Err(DaemonError::Memory { got: 1000, .. })), "{small:?}");
    let first = Daemon::start(config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20))
        .await
        .expect("daemon");
    let mut again = config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20);
    again.listen = first.addr();
    match Daemon::start(again).await {
        Err(e @ DaemonError::PortInUse { .. }) => assert!(e.to_string().contains("in use"), "{e}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_serves_one_daemon_and_a_killed_ones_spills_are_removed() {
    let dir = tempfile::tempdir().expect("tempdir");
    // What a killed daemon leaves: spill files under an application's
    // directory; beside them, files that are not the daemon's.
    let app = dir.path().join("0123456789abcdef");
    std::fs::create_dir(&app).expect("app dir");
    std::fs::write(app.join("s3-g7-p12-0.data"), vec![1u8; 1000]).expect("spill");
    std::fs::write(app.join("s3-g7-m1-a9-0.staged"), vec![2u8; 24]).expect("staged");
    std::fs::write(app.join("notes.txt"), b"mine").expect("other");
    // A reduced read's spill directory and its run.
    std::fs::create_dir(app.join("r41")).expect("reduce dir");
    std::fs::write(app.join("r41").join("run-0"), vec![3u8; 100]).expect("reduce spill");
    std::fs::create_dir(app.join("results")).expect("a directory that is not the daemon's");
    let other = dir.path().join("not-an-app");
    std::fs::create_dir(&other).expect("other dir");
    std::fs::write(other.join("s1-g1-p1-0.data"), b"mine too").expect("other spill-like");
    let d = Daemon::start(config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20))
        .await
        .expect("daemon");
    assert_eq!(d.stale_removed(), (3, 1124));
    assert!(!app.join("r41").exists(), "a reduced read's directory was left");
    assert!(app.join("results").exists(), "a directory that is not a reduced read's was removed");
    assert!(!app.join("s3-g7-p12-0.data").exists());
    assert!(!app.join("s3-g7-m1-a9-0.staged").exists());
    assert!(app.join("notes.txt").exists(), "a file that is not a spill was removed");
    assert!(other.join("s1-g1-p1-0.data").exists(), "a file outside an app dir was removed");
    // A second daemon on the same directory (another port) is refused.
    match Daemon::start(config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20)).await {
        Err(e @ DaemonError::DirInUse { .. }) => {
            assert!(e.to_string().contains("another daemon"), "{e}")
        }
        other => panic!("{other:?}"),
    }
    // Once the first has stopped, the directory is free again.
    d.shutdown().await;
    let again = Daemon::start(config("127.0.0.1", vec![dir.path().to_path_buf()], 64 << 20))
        .await
        .expect("a daemon after the first stopped");
    assert_eq!(again.stale_removed(), (0, 0));
}
