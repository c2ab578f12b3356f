"""Sluice's shuffle manager for Apache Spark: the jar for the installed
pyspark's line and the settings that switch it on.

Each Spark line changes internal APIs the plugin calls, so the package
carries one jar per line (``jars/sluice-spark-<line>_<scala>.jar``: Scala
2.12 for Spark 3.5, 2.13 from 4.0 on; the native library inside) and picks
the one of the running pyspark's major.minor line. From Spark 4.0 on, a
shuffle manager may come from ``spark.jars`` (the executors load the jar
before they create it); on 3.5 an executor creates its shuffle manager
before it fetches ``spark.jars``, so the settings also put the jar on the
driver's and executors' class path (the same path must hold the jar on every
node), and name the SQL rules, which pyspark 3.5 does not look up in the
jar. A line the package has no jar for gets no Sluice settings, and Spark
runs its own sort shuffle.
"""

import pathlib
import warnings

__all__ = ["SHUFFLE_MANAGER", "LINES", "line_of", "jar", "settings", "configure"]

#: The shuffle manager class Spark loads from the jar.
SHUFFLE_MANAGER = "dev.sluice.spark.SluiceShuffleManager"

#: Sluice's SQL rules (native sorts and aggregates), as a session extension.
SQL_EXTENSIONS = "dev.sluice.spark.sql.SluiceSqlExtensions"

_JARS = pathlib.Path(__file__).resolve().parent / "jars"
#: The lines whose executors need the jar on their class path: those before
#: 4.0 (SPARK-45762 let a shuffle manager come from ``spark.jars``).
_CLASS_PATH_LINES = ("3.5",)


def _jars():
    # sluice-spark-<line>_<scala>.jar
    return {p.name[len("sluice-spark-"):].rsplit("_", 1)[0]: p
            for p in sorted(_JARS.glob("sluice-spark-*_*.jar"))}


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
    that line. ``sql_rules`` names Sluice's SQL session extension (native
    sorts and aggregates) in ``spark.sql.extensions``: Spark 4 installs it
    from the jar without the setting, pyspark 3.5 only with it, so 3.5's
    settings always name it."""
    path = jar(line)
    if path is None:
        return {}
    out = {"spark.jars": str(path), "spark.shuffle.manager": SHUFFLE_MANAGER}
    if (line or _installed_line()) in _CLASS_PATH_LINES:
        out["spark.driver.extraClassPath"] = str(path)
        out["spark.executor.extraClassPath"] = str(path)
        # Spark 4 finds the rules in the jar (a service); pyspark 3.5's
        # session does not look, so they are named, as 4.x runs them.
        sql_rules = True
    if sql_rules:
        out["spark.sql.extensions"] = SQL_EXTENSIONS
    return out


def configure(builder, line=None, sql_rules=False):
    """``builder`` (a ``SparkSession.Builder``) with Sluice switched on;
    another ``spark.jars`` or class path setting on it is kept, the Sluice
    jar added to it.
    On a line without a jar it warns and returns ``builder`` unchanged."""
    line = line or _installed_line()
    conf = settings(line, sql_rules)
    if not conf:
        warnings.warn(f"sluice-spark carries no jar for Spark {line} (it has "
                      f"{', '.join(LINES) or 'none'}); Spark's own shuffle runs",
                      stacklevel=2)
        return builder
    options = getattr(builder, "_options", {})
    for key, sep in (("spark.jars", ","), ("spark.driver.extraClassPath", ":"),
                     ("spark.executor.extraClassPath", ":")):
        have = options.get(key, "")
        if have and key in conf:
            conf[key] = f"{have}{sep}{conf[key]}"
    for key, value in conf.items():
        builder = builder.config(key, value)
    return builder
