"""One run of a comparison script per shuffle manager, each in a process
and JVM of its own (a JVM's engine lives as long as the JVM, and a session's
settings stay with its JVM): the script runs itself with `--manager M
--root DIR`, prints its answers as JSON on its last line of output, and the
caller compares them."""

import json
import pathlib
import shutil
import subprocess
import sys
import tempfile


def answers(script, args, prefix, managers=("sort", "sluice")):
    """Each manager's answers from `script --manager M --root DIR *args`,
    DIR a fresh directory removed after; exits naming the manager whose run
    failed, with the end of its error output."""
    out = {}
    for manager in managers:
        root = pathlib.Path(tempfile.mkdtemp(prefix=f"{prefix}-{manager}-"))
        try:
            done = subprocess.run(
                [sys.executable, script, "--manager", manager, "--root", str(root), *args],
                capture_output=True, text=True)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        if done.returncode != 0:
            sys.stderr.write(done.stderr[-4000:])
            sys.exit(f"the {manager} run failed")
        out[manager] = json.loads(done.stdout.strip().splitlines()[-1])
    return out
