"""The `sluice daemon`s a benchmark runs Sluice's service mode against: one
release daemon per node address (127.0.0.1, 127.0.0.2), each with its own
directory, all under one node secret; and what they did while a run ran
(`sluice stats`: chunks staged, attempts committed, reads served, bytes
held at the peak; CPU time from /proc). spark/bench.py and spark/tpch.py
start them for the `sluice-service` manager."""

import contextlib
import json
import os
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
# The application name the benchmarks' Spark applications present to the daemons.
APP = "sluice-bench"
# The daemons' counters that only grow (a run's work is the difference).
COUNTS = ("chunks", "commits", "reads", "reduced_reads", "reduced_in", "reduced_out")


class Daemons:
    """Running daemons: `conf` is an application's service settings
    (KEY=VALUE), `snapshot()` what they have done so far."""

    def __init__(self, binary, secret, procs, addrs, key):
        self.binary, self.secret, self.procs, self.addrs = binary, secret, procs, addrs
        self.conf = self.conf_of(APP, key)

    def conf_of(self, app, key=None):
        """The service settings of application `app` (its key derived from
        the node secret unless given): two applications running side by side
        (a build and its baseline) must not share an id."""
        if key is None:
            key = subprocess.run([str(self.binary), "app-key", "--secret-file", str(self.secret),
                                  "--app", app], check=True, capture_output=True, text=True).stdout.strip()
        return ["spark.sluice.mode=service", f"spark.sluice.service.daemons={','.join(self.addrs)}",
                f"spark.sluice.service.app={app}", f"spark.sluice.service.appSecret={key}"]

    def stats(self, addr):
        out = subprocess.run([str(self.binary), "stats", "--daemon", addr,
                              "--secret-file", str(self.secret)],
                             check=True, capture_output=True, text=True).stdout
        return json.loads(out)

    def snapshot(self):
        """Sums over the daemons: their counts, their CPU seconds, and the
        largest peak of bytes held."""
        snap = {k: 0 for k in COUNTS}
        snap["cpu_s"], snap["peak_bytes"] = 0.0, 0
        for p, addr in zip(self.procs, self.addrs):
            st = self.stats(addr)
            for k in COUNTS:
                snap[k] += st[k]
            snap["peak_bytes"] = max(snap["peak_bytes"], st["peak_bytes"])
            snap["cpu_s"] += cpu_s(p.pid)
        return snap


def since(before, after):
    """What the daemons did between two snapshots."""
    d = {k: after[k] - before[k] for k in (*COUNTS, "cpu_s")}
    d["peak_bytes"] = after["peak_bytes"]
    return d


def cpu_s(pid):
    """CPU seconds (user and system) of a live process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def peak_rss_mb(pid):
    """A live process's peak resident set (VmHWM), in MB."""
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


@contextlib.contextmanager
def service_daemons(tmp, hosts=("127.0.0.1", "127.0.0.2"), memory="4g", frame_memory=None):
    """Two release `sluice daemon`s on loopback addresses (one per node),
    with their own directories under `tmp` (and `frame_memory` their
    `--frame-memory`, or their default); yields them (`Daemons`). On exit
    each is stopped with SIGTERM and its last line (its peak, what it
    spilled) printed with its peak resident memory."""
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "sluice-cli", "--bin", "sluice"],
                   cwd=ROOT, check=True)
    binary = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "release" / "sluice"
    tmp.mkdir(parents=True, exist_ok=True)
    secret = tmp / "service-secret"
    secret.write_bytes(os.urandom(32))
    secret.chmod(0o600)
    procs, addrs = [], []
    try:
        for host in hosts:
            d = tmp / f"daemon-{host}"
            d.mkdir(exist_ok=True)
            frames = ["--frame-memory", frame_memory] if frame_memory else []
            p = subprocess.Popen([str(binary), "daemon", "--host", host, "--port", "0", "--dir", str(d),
                                  "--memory", memory, "--secret-file", str(secret), *frames],
                                 stdout=subprocess.PIPE, text=True)
            procs.append(p)
            line = p.stdout.readline()
            if not line.startswith("sluice daemon listening on "):
                sys.exit(f"sluice daemon on {host} did not start: {line!r}")
            addrs.append(line.split()[-1])
        key = subprocess.run([str(binary), "app-key", "--secret-file", str(secret), "--app", APP],
                             check=True, capture_output=True, text=True).stdout.strip()
        yield Daemons(binary, secret, procs, addrs, key)
    finally:
        for p, host in zip(procs, hosts):
            rss = peak_rss_mb(p.pid)
            p.terminate()
            out, _ = p.communicate(timeout=60)
            print(f"daemon {host}: {out.strip().splitlines()[-1] if out.strip() else 'no report'};"
                  f" peak RSS {rss:.1f} MB", file=sys.stderr)
