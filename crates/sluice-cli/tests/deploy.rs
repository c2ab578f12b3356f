//! The deployment files in `deploy/` (a systemd unit and a Kubernetes
//! DaemonSet) run this binary: each file is parsed, checked for what the
//! daemon needs of its host (one fixed port, the secret's mode, time for the
//! graceful stop, memory above the budget), and its command line is started
//! as a real `sluice daemon` process with the node's address, directories
//! and secret put in place, which must listen and stop cleanly on SIGTERM.

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Bytes of a size written as systemd and `--memory` write it (`8g`, `9G`).
fn size(s: &str) -> u64 {
    let t = s.trim().to_ascii_lowercase();
    let t = t.trim_end_matches('i');
    let (num, shift) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 10),
        Some('m') => (&t[..t.len() - 1], 20),
        Some('g') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    num.parse::<u64>().unwrap_or_else(|_| panic!("size {s:?}")) << shift
}

/// The value after `flag` in `args`.
fn value<'a>(args: &'a [String], flag: &str) -> &'a str {
    let i = args.iter().position(|a| a == flag).unwrap_or_else(|| panic!("no {flag} in {args:?}"));
    &args[i + 1]
}

/// Runs the daemon command line `args` (after the program) here: the host
/// given as `host_var` becomes 127.0.0.1, the port 0, every `--dir` a
/// fresh directory and `--secret-file` a fresh secret of mode 0400.
fn runs(args: &[String], host_var: &str) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let secret = tmp.path().join("secret");
    std::fs::write(&secret, [7u8; 32]).expect("secret");
    std::fs::set_permissions(&secret, std::fs::Permissions::from_mode(0o400)).expect("chmod");
    let mut local = Vec::new();
    let mut dirs = 0;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        local.push(a.clone());
        let v = match a.as_str() {
            "--host" | "--port" | "--dir" | "--secret-file" => it.next().expect("a value"),
            _ => continue,
        };
        local.push(match a.as_str() {
            "--host" => {
                assert_eq!(v, host_var, "the host is the node's address");
                "127.0.0.1".into()
            }
            "--port" => "0".into(),
            "--dir" => {
                dirs += 1;
                let d = tmp.path().join(format!("dir{dirs}"));
                std::fs::create_dir(&d).expect("dir");
                d.to_string_lossy().into_owned()
            }
            _ => secret.to_string_lossy().into_owned(),
        });
    }
    assert!(dirs > 0, "no --dir in {args:?}");
    let mut child = Command::new(env!("CARGO_BIN_EXE_sluice"))
        .args(&local)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    let mut line = String::new();
    let mut out = BufReader::new(child.stdout.take().expect("stdout"));
    out.read_line(&mut line).expect("line");
    assert!(line.starts_with("sluice daemon listening on 127.0.0.1:"), "{line:?} from {local:?}");
    Command::new("kill").args(["-TERM", &child.id().to_string()]).status().expect("kill");
    let status = child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
}

#[test]
fn the_systemd_unit_starts_the_daemon() {
    let unit = std::fs::read_to_string(repo().join("deploy/systemd/sluice-daemon.service"))
        .expect("the unit");
    let key = |k: &str| -> String {
        let found: Vec<&str> =
            unit.lines().filter_map(|l| l.strip_prefix(&format!("{k}="))).collect();
        assert_eq!(found.len(), 1, "{k} once in the unit");
        found[0].trim().to_owned()
    };
    let exec: Vec<String> = key("ExecStart").split_whitespace().map(str::to_owned).collect();
    assert_eq!(exec[0], "/usr/local/bin/sluice");
    assert_eq!(exec[1], "daemon");
    assert_eq!(key("KillSignal"), "SIGTERM");
    let stop_s: u64 = key("TimeoutStopSec").parse().expect("seconds");
    assert!(stop_s > sluice_service::daemon::SHUTDOWN_GRACE.as_secs(), "{stop_s}");
    assert!(size(&key("MemoryMax")) > size(value(&exec, "--memory")));
    for d in exec.iter().zip(exec.iter().skip(1)).filter(|(a, _)| *a == "--dir").map(|(_, d)| d) {
        assert!(key("ReadWritePaths").split_whitespace().any(|p| p == d), "{d} not writable");
    }
    runs(&exec[1..], "${SLUICE_HOST}");
}

#[test]
fn the_daemonset_starts_the_daemon() {
    let text = std::fs::read_to_string(repo().join("deploy/kubernetes/sluice-daemon.yaml"))
        .expect("the manifest");
    let y: serde_norway::Value = serde_norway::from_str(&text).expect("YAML");
    assert_eq!(y["kind"], "DaemonSet");
    assert_eq!(y["apiVersion"], "apps/v1");
    let pod = &y["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true, "executors reach the daemon at the node's address");
    let grace = pod["terminationGracePeriodSeconds"].as_u64().expect("grace");
    assert!(grace > sluice_service::daemon::SHUTDOWN_GRACE.as_secs());
    let c = &pod["containers"][0];
    let mut args: Vec<String> = c["command"]
        .as_sequence()
        .expect("command")
        .iter()
        .chain(c["args"].as_sequence().expect("args"))
        .map(|v| v.as_str().expect("a string").to_owned())
        .collect();
    assert_eq!(args[0], "/usr/local/bin/sluice");
    args.remove(0);
    let port: u64 = value(&args, "--port").parse().expect("port");
    assert_eq!(c["ports"][0]["containerPort"].as_u64(), Some(port));
    assert_eq!(c["ports"][0]["hostPort"].as_u64(), Some(port));
    assert_eq!(c["env"][0]["name"], "NODE_IP");
    assert_eq!(c["env"][0]["valueFrom"]["fieldRef"]["fieldPath"], "status.hostIP");
    let limit = size(c["resources"]["limits"]["memory"].as_str().expect("memory limit"));
    assert!(limit > size(value(&args, "--memory")));
    // Secret and directories mounted where the arguments name them.
    let mounts = c["volumeMounts"].as_sequence().expect("mounts");
    let mounted = |path: &str| {
        mounts.iter().any(|m| path.starts_with(m["mountPath"].as_str().expect("mountPath")))
    };
    assert!(mounted(value(&args, "--secret-file")));
    assert!(mounted(value(&args, "--dir")));
    let secret = pod["volumes"]
        .as_sequence()
        .expect("volumes")
        .iter()
        .find(|v| v.get("secret").is_some())
        .expect("a secret volume");
    assert_eq!(secret["secret"]["defaultMode"].as_u64(), Some(0o400), "the daemon needs 0400");
    runs(&args, "$(NODE_IP)");
}
