//! CPU time of the process and of the engine's own threads, from Linux's
//! `/proc` (other systems report `None`).
//!
//! `/proc/<pid>/task/<tid>/stat` holds each thread's name (`comm`, the
//! first 15 bytes of the name the engine gives its threads) and its user
//! and system time in clock ticks of `USER_HZ`, which Linux fixes at 100
//! for these files: a 10 ms resolution, fine for runs of seconds.

use std::time::Duration;

/// Ticks per second of the times in `/proc/*/stat`.
const USER_HZ: u64 = 100;

/// Field index (0-based, after the `comm` field) of `utime`; `stime` follows.
const UTIME_AFTER_COMM: usize = 11;

/// (thread name, user + system time) from one `stat` line.
fn parse_stat(line: &str) -> Option<(&str, Duration)> {
    let open = line.find('(')?;
    let close = line.rfind(')')?;
    let name = line.get(open + 1..close)?;
    let mut rest = line.get(close + 1..)?.split_whitespace();
    let utime: u64 = rest.nth(UTIME_AFTER_COMM)?.parse().ok()?;
    let stime: u64 = rest.next()?.parse().ok()?;
    Some((name, Duration::from_millis((utime + stime) * 1000 / USER_HZ)))
}

/// CPU time of the whole process (every thread, live and exited).
pub fn process_cpu() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat(&stat).map(|(_, t)| t)
}

/// CPU time of the live threads of this process whose name starts with
/// `prefix`.
pub fn threads_cpu(prefix: &str) -> Option<Duration> {
    let mut total = Duration::ZERO;
    for entry in std::fs::read_dir("/proc/self/task").ok()? {
        let Ok(entry) = entry else { continue };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else { continue };
        if let Some((name, t)) = parse_stat(&stat) {
            if name.starts_with(prefix) {
                total += t;
            }
        }
    }
    Some(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_gives_its_name_and_cpu_time() {
        let line = "42 (sluice-offload-) R 1 2 3 0 -1 4194304 127 0 0 0 250 30 0 0 20 0 1 0";
        let (name, t) = parse_stat(line).expect("parses");
        assert_eq!(name, "sluice-offload-");
        assert_eq!(t, Duration::from_millis(2800));
        // A name with spaces and parentheses.
        let odd = "7 (a (b) c) S 1 2 3 0 -1 0 0 0 0 0 100 100 0";
        assert_eq!(
            parse_stat(odd).map(|(n, t)| (n.to_string(), t)),
            Some(("a (b) c".into(), Duration::from_secs(2)))
        );
        assert_eq!(parse_stat("garbage"), None);
    }

    #[test]
    fn this_process_has_cpu_time() {
        let mut x = 0u64;
        for i in 0..20_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        if cfg!(target_os = "linux") {
            assert!(process_cpu().is_some());
            assert!(threads_cpu("no-such-thread-name").is_some_and(|t| t.is_zero()));
        }
    }
}
