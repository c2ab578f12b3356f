"""A Spark standalone cluster of real processes on loopback addresses: a
master on 127.0.0.1 and one worker per address (each address stands for a
node), started from the installed pyspark's own scripts and killed, process
group and all, on exit; the executor processes of an application on
this machine; and a worker killed with its executors, as a lost node is.
The tests (spark/tests) and `spark/bench.py --cluster` use it."""

import contextlib
import os
import socket
import subprocess
import time

# How long the workers may take to register with the master.
REGISTER_TIMEOUT_S = 120


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def standalone_cluster(tmp, hosts=("127.0.0.1", "127.0.0.2"), cores=1, memory="1g",
                       worker_conf=None):
    """A real standalone master on 127.0.0.1 and one worker per address in
    `hosts`, each with `cores` cores and `memory` for executors; Spark
    settings in `worker_conf` go to the workers' JVMs (Spark's external
    shuffle service runs inside a worker when it says so). Local mode and
    local-cluster mode put every executor on one host, so Spark never
    launches a speculative copy beside its original there. Yields the
    master's URL; each worker's log is tmp/workerN.log."""
    import pyspark

    home = os.path.dirname(pyspark.__file__)
    spark_class = os.path.join(home, "bin", "spark-class")
    port = free_port()
    master = f"spark://127.0.0.1:{port}"
    procs = []
    opts = " ".join(f"-D{k}={v}" for k, v in (worker_conf or {}).items())

    def start(name, host, *args):
        env = dict(os.environ, SPARK_HOME=home, SPARK_LOCAL_IP=host,
                   SPARK_WORKER_DIR=str(tmp / f"{name}-work"),
                   SPARK_LOCAL_DIRS=str(tmp / f"{name}-local"), SPARK_WORKER_OPTS=opts)
        log = open(tmp / f"{name}.log", "w")
        procs.append(subprocess.Popen([spark_class, *args], env=env, stdout=log,
                                      stderr=subprocess.STDOUT, start_new_session=True))

    try:
        start("master", "127.0.0.1", "org.apache.spark.deploy.master.Master",
              "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(free_port()))
        for i, host in enumerate(hosts):
            start(f"worker{i}", host, "org.apache.spark.deploy.worker.Worker", "--host", host,
                  "--cores", str(cores), "--memory", memory, "--webui-port", str(free_port()),
                  master)
        deadline = time.monotonic() + REGISTER_TIMEOUT_S
        while time.monotonic() < deadline:
            logs = [(tmp / f"worker{i}.log").read_text() for i in range(len(hosts))]
            if all("Successfully registered with master" in log for log in logs):
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(
                f"the standalone workers did not register in {REGISTER_TIMEOUT_S} s")
        yield master
    finally:
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, 9)
            p.wait(timeout=30)


def executor_pids(app_id):
    """The process ids of application `app_id`'s executors on this machine."""
    pids = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    cmd = f.read()
            except OSError:
                continue
            if b"CoarseGrainedExecutorBackend" in cmd and app_id.encode() in cmd:
                pids.append(int(d))
    return pids


def kill_worker(host):
    """SIGKILL to the worker on `host` and the executors it launched (its
    process group: each worker starts a session of its own), as when the node
    goes away; the master then reports the worker lost to the applications."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/cmdline", "rb") as f:
                    args = f.read().split(b"\0")
            except OSError:
                continue
            if b"org.apache.spark.deploy.worker.Worker" in args and host.encode() in args:
                os.killpg(os.getpgid(int(d)), 9)
                return
    raise AssertionError(f"no standalone worker runs on {host}")
