"""Sluice's shuffle manager for Apache Spark: the jar for the installed
pyspark's line and the settings that switch it on.

Each Spark line changes internal APIs the plugin calls, so the package
carries one jar per line (``jars/sluice-spark-<line>_2.13.jar``, the native
library inside) and picks the one of the running pyspark's major.minor
line. From Spark 4.0 on, a shuffle manager may come from ``spark.jars``
(the executors load the jar before they create it); a line the package has
no jar for gets no Sluice settings, and Spark runs its own sort shuffle.
"""

import pathlib
import warnings

__all__ = ["SHUFFLE_MANAGER", "LINES", "line_of", "jar", "settings", "configure"]

#: The shuffle manager class Spark loads from the jar.
SHUFFLE_MANAGER = "dev.sluice.spark.SluiceShuffleManager"

#: Sluice's SQL rules (native sorts and aggregates), as a session extension.
SQL_EXTENSIONS = "dev.sluice.spark.sql.SluiceSqlExtensions"

_JARS = pathlib.Path(__file__).resolve().parent / "jars"
_SCALA = "2.13"


def _jars():
    return {p.name[len("sluice-spark-"):-len(f"_{_SCALA}.jar")]: p
            for p in sorted(_JARS.glob(f"sluice-spark-*_{_SCALA}.jar"))}


#: The Spark lines (major.minor) this package carries a jar for.
LINES = tuple(sorted(_jars()))


def line_of(version):
    """A Spark version's line: ``"4.1"`` for ``"4.1.4"``."""
    parts = version.split(".")
    if len(parts) < 2 or not parts[0].isdigit() or not parts[1].isdigit():
        raise ValueError(f"not a Spark version: {version!r}")
    return f"{parts[0]}.{parts[1]}"


def _installed_line():
    import pyspark  # the installed pyspark decides the line

    return line_of(pyspark.__version__)


def jar(line=None):
    """The path of the jar for ``line`` (default: the installed pyspark's),
    or None when the package carries none for it."""
    return _jars().get(line or _installed_line())


def settings(line=None, sql_rules=False):
    """The Spark settings that switch Sluice on for ``line`` (default: the
    installed pyspark's), as a dict; empty where the package has no jar for
    that line. ``sql_rules`` adds Sluice's SQL session extension (native
    sorts and aggregates); without it SQL plans stay Spark's and only their
    shuffles run on Sluice."""
    path = jar(line)
    if path is None:
        return {}
    out = {"spark.jars": str(path), "spark.shuffle.manager": SHUFFLE_MANAGER}
    if sql_rules:
        out["spark.sql.extensions"] = SQL_EXTENSIONS
    return out


def configure(builder, line=None, sql_rules=False):
    """``builder`` (a ``SparkSession.Builder``) with Sluice switched on;
    another ``spark.jars`` setting on it is kept, the Sluice jar added to it.
    On a line without a jar it warns and returns ``builder`` unchanged."""
    line = line or _installed_line()
    conf = settings(line, sql_rules)
    if not conf:
        warnings.warn(f"sluice-spark carries no jar for Spark {line} (it has "
                      f"{', '.join(LINES) or 'none'}); Spark's own shuffle runs",
                      stacklevel=2)
        return builder
    options = getattr(builder, "_options", {})
    have = options.get("spark.jars", "")
    if have:
        conf["spark.jars"] = f"{have},{conf['spark.jars']}"
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder
