"""``sluice-spark``: the flags that switch Sluice on, for spark-submit or
pyspark.

    sluice-spark conf [--line L] [--sql-rules]   # the flags, one line
    sluice-spark jar [--line L]                  # the jar's path
    sluice-spark lines                           # the lines it has jars for
"""

import argparse
import shlex
import sys

from . import LINES, _installed_line, jar, settings


def main(argv=None):
    parser = argparse.ArgumentParser(prog="sluice-spark", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name in ("conf", "jar"):
        p = sub.add_parser(name)
        p.add_argument("--line", help="Spark line (major.minor); default: the installed pyspark's")
        if name == "conf":
            p.add_argument("--sql-rules", action="store_true",
                           help="name Sluice's SQL rules in spark.sql.extensions (always on 3.5)")
    sub.add_parser("lines")
    args = parser.parse_args(argv)
    if args.command == "lines":
        print(" ".join(LINES))
        return 0
    line = args.line or _installed_line()
    if args.command == "jar":
        path = jar(line)
        if path is None:
            print(f"sluice-spark: no jar for Spark {line} (have {' '.join(LINES)})", file=sys.stderr)
            return 1
        print(path)
        return 0
    conf = settings(line, args.sql_rules)
    if not conf:
        print(f"sluice-spark: no jar for Spark {line} (have {' '.join(LINES)}); "
              "Spark's own shuffle runs", file=sys.stderr)
        return 1
    flags = [f"--jars {shlex.quote(conf.pop('spark.jars'))}"]
    flags += [f"--conf {shlex.quote(f'{k}={v}')}" for k, v in conf.items()]
    print(" ".join(flags))
    return 0


if __name__ == "__main__":
    sys.exit(main())
