package dev.sluice.spark.api;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import org.apache.spark.SparkConf;
import org.apache.spark.network.util.JavaUtils;

/**
 * Every {@code spark.sluice.*} setting, declared once: its name, type, default, bounds, unit, when
 * it is read and what it does. Values are parsed here and nowhere else ({@link #bytes}, {@link
 * #integer}, {@link #flag}, {@link #choice}); a value out of its bounds or not of its type fails
 * with a message naming the setting, never a silent clamp. {@code docs/configuration.md} is
 * generated from this list ({@link #markdown}) and a test fails when it is stale.
 *
 * <p>Engine settings ({@link Scope#ENGINE}) size the one engine of an executor process and are read
 * when it opens; a later SparkContext in the same JVM asking for other values fails its tasks
 * naming the setting (the native side checks, {@code bridge::open_engine}). The engine's own
 * defaults for them are the native side's ({@code SluiceNative.engineDefaults}), and a test checks
 * that the two agree.
 */
public enum SluiceSetting {
  OFFLOAD_THREADS(
      "offloadThreads",
      Type.INT,
      "1",
      1,
      1024,
      "threads",
      Scope.ENGINE,
      "Offload threads of the executor's engine: its own core budget for partitioning and map-side"
          + " operators."),
  INLINE_WHEN_BUSY(
      "inlineWhenBusy",
      Type.BOOLEAN,
      "true",
      0,
      0,
      "",
      Scope.TASK,
      "While map tasks take every task slot of the executor, each partitions its own records"
          + " instead of handing them to the offload threads (which would only take time from the"
          + " task threads). Applied to the executor's engine as each task opens it."),
  BUFFER_POOL_BYTES(
      "bufferPoolBytes",
      Type.BYTES,
      "64m",
      1L << 20,
      1L << 40,
      "bytes",
      Scope.ENGINE,
      "Map buffers in flight per executor; producers wait when it is full."),
  MEMORY_BUDGET(
      "memoryBudget",
      Type.BYTES,
      "256m",
      1L << 20,
      1L << 40,
      "bytes",
      Scope.ENGINE,
      "Native memory of the executor's engine for offloaded operators' map-side state, outside"
          + " Spark's memory manager (leave it in spark.executor.memoryOverhead)."),
  OPERATOR_STATE_BYTES(
      "operatorStateBytes",
      Type.BYTES,
      "16m",
      64L << 10,
      1L << 40,
      "bytes",
      Scope.ENGINE,
      "An offloaded operator's map-side state per map task before it spills (SmartShuffle's"
          + " spilling threshold), split evenly across the shuffle's partitions as if there were"
          + " at most 100; the map tasks of an executor hold at most a quarter of"
          + " spark.sluice.memoryBudget in all."),
  PIN_OFFLOAD_THREADS(
      "pinOffloadThreads",
      Type.BOOLEAN,
      "false",
      0,
      0,
      "",
      Scope.ENGINE,
      "Pin offload thread i to core i (modulo the cores there are)."),
  SEGMENT_BYTES(
      "segmentBytes",
      Type.BYTES,
      "100000",
      4L << 10,
      64L << 20,
      "bytes",
      Scope.ENGINE,
      "A full map buffer is cut into segments of about this size for the offload threads, so"
          + " they stay balanced and a straggler holds little (SmartShuffle's 100 KB)."),
  LIQUID_OFFLOAD(
      "liquidOffload",
      Type.BOOLEAN,
      "true",
      0,
      0,
      "",
      Scope.ENGINE,
      "Liquid offloading: while the offload threads fall behind (map buffers pile up), the map"
          + " tasks run a growing share of their segments themselves."),
  OPERATOR_SPILL(
      "operatorSpill",
      Type.CHOICE,
      "evict",
      0,
      0,
      "state, input, evict",
      Scope.SHUFFLE,
      "How an offloaded aggregation's map side spills at that threshold: evict (a new key in a full"
          + " bucket of a set-associative table evicts one of its groups; 8-byte keys such as Long,"
          + " other keys spill their state), state (emit every group and start empty) or input"
          + " (keep the groups, pass new keys through)."),
  GROUPED_COMBINE(
      "groupedCombine",
      Type.BOOLEAN,
      "true",
      0,
      0,
      "",
      Scope.SHUFFLE,
      "Shuffles with Spark's aggregators (reduceByKey, groupByKey, combineByKey, distinct) are"
          + " sorted by key hash in the engine and folded in one pass instead of through"
          + " whole-partition hash maps."),
  BUFFER_BYTES(
      "bufferBytes",
      Type.BYTES,
      "1m",
      4L << 10,
      64L << 20,
      "bytes",
      Scope.TASK,
      "The direct buffer a map task fills before handing it to the engine; each task thread keeps"
          + " one between its map tasks."),
  RECORD_BYTES_MAX(
      "recordBytesMax",
      Type.BYTES,
      (Limits.RECORD_BYTES_MAX >> 20) + "m",
      1,
      Limits.RECORD_BYTES_MAX,
      "bytes",
      Scope.TASK,
      "The largest shuffle record a map task may write (serialized, with its key and lengths); a"
          + " larger record fails its task naming this setting. At most the largest Sluice"
          + " block."),
  SQL_ROWS_DIRECT(
      "sqlRowsDirect",
      Type.BOOLEAN,
      "true",
      0,
      0,
      "",
      Scope.TASK,
      "Spark SQL's rows are written to the engine, and read back from the decoded blocks, without"
          + " the serializer."),
  SQL_SORT(
      "sqlSort",
      Type.BOOLEAN,
      "true",
      0,
      0,
      "",
      Scope.SESSION,
      "Spark SQL's global sort (ORDER BY) runs in the engine: rows sorted into runs by the offload"
          + " threads, merged natively by the reduce tasks."),
  SQL_AGGREGATE(
      "sqlAggregate",
      Type.CHOICE,
      "auto",
      0,
      0,
      "auto, true, false",
      Scope.SESSION,
      "Which Spark SQL aggregates run in the engine, map side and reduce side: auto (those the"
          + " engine computes faster than Spark's generated code: a sum or average whose Spark"
          + " buffer is a decimal of more than 18 digits), true (every aggregate it computes as"
          + " Spark does: counts, sums, min, max, avg of numbers and decimals by one or more"
          + " columns) or false (none)."),
  SQL_REPARTITION_WITHOUT_SORT(
      "sqlRepartitionWithoutSort",
      Type.BOOLEAN,
      "true",
      0,
      0,
      "",
      Scope.SESSION,
      "repartition(n) of an input whose row order is the same in every attempt (a range, a"
          + " file scan or a cached table of those, under deterministic projections and filters)"
          + " deals its rows without Spark SQL's defensive sort; any other input keeps the sort."),
  MODE(
      "mode",
      Type.CHOICE,
      "embedded",
      0,
      0,
      "embedded, service",
      Scope.SHUFFLE,
      "Where shuffles' map output goes: embedded (each executor's files, fetched by Spark) or"
          + " service (pushed to the sluice daemons of spark.sluice.service.daemons and read from"
          + " them as one stream per reduce task; see docs/service.md for the shuffles it covers,"
          + " the others stay embedded)."),
  SERVICE_DAEMONS(
      "service.daemons",
      Type.TEXT,
      "",
      0,
      0,
      "ip:port, comma separated",
      Scope.SHUFFLE,
      "The sluice daemons, one per node, in the same order for the whole application: daemon i of"
          + " n keeps reduce partitions [i P / n, (i + 1) P / n) of every service shuffle."),
  SERVICE_APP(
      "service.app",
      Type.TEXT,
      "",
      0,
      0,
      "a name",
      Scope.SHUFFLE,
      "The application's name at the daemons, unique among the applications running at once: its"
          + " shuffles and lease are kept under it."),
  SERVICE_APP_SECRET(
      "service.appSecret",
      Type.TEXT,
      "",
      0,
      0,
      "64 hex digits",
      Scope.SHUFFLE,
      "The application's key, `sluice app-key --secret-file F --app NAME` on a daemon's node (an"
          + " HMAC of the name under the node secret; never the secret itself); named so that"
          + " Spark's spark.redaction.regex hides it in the UI and event logs."),
  SERVICE_MIN_PUSH_BYTES(
      "service.minPushBytes",
      Type.BYTES,
      "1m",
      0,
      1L << 40,
      "bytes",
      Scope.TASK,
      "In service mode, a map output of fewer bytes stays on the executor that wrote it, and"
          + " reduce tasks fetch it as in embedded mode: its push would cost a round trip and a"
          + " commit at every daemon for less than one push chunk. A shuffle whose outputs are all"
          + " small never reaches the daemons; an executor lost takes its small outputs with it"
          + " (Spark reruns those map tasks). 0 pushes every output, as Sluice's storage plugin"
          + " does (spark.shuffle.sort.io.plugin.class=dev.sluice.spark.SluiceShuffleDataIO)."),
  SERVICE_MIN_SHUFFLE_BYTES(
      "service.minShuffleBytes",
      Type.BYTES,
      "256m",
      0,
      1L << 50,
      "bytes",
      Scope.TASK,
      "In service mode, a map output stays on the executor that wrote it, as under"
          + " service.minPushBytes, when its bytes times its shuffle's number of map tasks (the"
          + " shuffle's size as this output estimates it) are fewer: a shuffle this small costs"
          + " more through the daemons (a second write, a push, the daemons' checks on the same"
          + " cores) than its map tasks cost to rerun, and its segments stay in the page cache."
          + " Outputs whose spills were already pushed while mapping are pushed whole. 0 sizes"
          + " no shuffle, as Sluice's storage plugin does (service.minPushBytes)."),
  SERVICE_PUSH_WHILE_MAPPING_BYTES(
      "service.pushWhileMappingBytes",
      Type.BYTES,
      "8m",
      0,
      1L << 40,
      "bytes",
      Scope.TASK,
      "In service mode, a map task spills its output every this many bytes handed over (at"
          + " most 64 times), and each spill (as any spill Spark's memory manager asks for) is"
          + " pushed to the daemons on a thread of its own while the map goes on; the commit"
          + " pushes the rest. A shuffle of an offloaded operator, which the engine combines at"
          + " the map side, pushes only the spills Spark asks for (a forced one would cut the"
          + " combine short). The forced spills show in Spark's spill metrics. 0 pushes only"
          + " the spills Spark asks for, for every shuffle."),
  SERVICE_REDUCE_AT_DAEMON(
      "service.reduceAtDaemon",
      Type.CHOICE,
      "auto",
      0,
      0,
      "auto, true, false",
      Scope.TASK,
      "In service mode, which shuffles with a native reduce operator have the daemons run it"
          + " over each partition before they stream it, so that a reduce task receives one"
          + " segment per partition instead of one per map output: auto (aggregates: an offloaded"
          + " aggregation or a Spark SQL aggregate Sluice runs, which the daemon shrinks to each"
          + " key once before it crosses the network), true (also the native sorts, whose merge"
          + " only moves from the reduce tasks to the daemons) or false (none). On a 1 Gbit/s"
          + " link an aggregate reduced at the daemons ran 1.26x faster, a sort 0.95x; on"
          + " unlimited loopback 0.97x and 0.84x (docs/benchmarks.md).");

  /** A setting's type: how its value is written and parsed. */
  public enum Type {
    INT,
    BYTES,
    BOOLEAN,
    CHOICE,
    TEXT
  }

  /** When a setting is read, so when a change takes effect. */
  public enum Scope {
    /** When the executor's engine opens (once per JVM). */
    ENGINE("executor's engine opens"),
    /** When a shuffle is registered (per SparkContext). */
    SHUFFLE("shuffle is registered"),
    /** By every map or reduce task. */
    TASK("task starts"),
    /** By the SQL planner, per session ({@code spark.conf.set} applies to the next query). */
    SESSION("query is planned (per session)");

    final String when;

    Scope(String when) {
      this.when = when;
    }
  }

  /** The prefix of every setting's key. */
  public static final String PREFIX = "spark.sluice.";

  /** The full key, {@code spark.sluice.<name>}. */
  public final String key;

  public final Type type;
  /** The default as a user would write it. */
  public final String defaultValue;

  /** Bounds of an INT or BYTES value, inclusive. */
  final long min;

  final long max;
  /** INT or BYTES: the unit; CHOICE: the choices, comma separated; TEXT: what it holds. */
  final String unit;

  public final Scope scope;
  final String doc;

  SluiceSetting(
      String name,
      Type type,
      String defaultValue,
      long min,
      long max,
      String unit,
      Scope scope,
      String doc) {
    this.key = PREFIX + name;
    this.type = type;
    this.defaultValue = defaultValue;
    this.min = min;
    this.max = max;
    this.unit = unit;
    this.scope = scope;
    this.doc = doc;
  }

  /** The value set in {@code conf}, or the default. */
  String raw(SparkConf conf) {
    return conf.get(key, defaultValue).trim();
  }

  /**
   * A BYTES setting's value.
   *
   * @throws IllegalArgumentException for a value that is not a size or is out of bounds
   */
  public long bytes(SparkConf conf) {
    return bytes(raw(conf));
  }

  long bytes(String v) {
    check(Type.BYTES);
    long b;
    try {
      b = JavaUtils.byteStringAsBytes(v);
    } catch (RuntimeException e) {
      throw new IllegalArgumentException(key + " is '" + v + "'; a size such as 64m expected", e);
    }
    return bounded(b, Limits.sizeText(b));
  }

  /**
   * An INT setting's value.
   *
   * @throws IllegalArgumentException for a value that is not an integer or is out of bounds
   */
  public int integer(SparkConf conf) {
    check(Type.INT);
    String v = raw(conf);
    long n;
    try {
      n = Long.parseLong(v);
    } catch (NumberFormatException e) {
      throw new IllegalArgumentException(key + " is '" + v + "'; an integer expected", e);
    }
    return (int) bounded(n, Long.toString(n));
  }

  /**
   * A BOOLEAN setting's value.
   *
   * @throws IllegalArgumentException for a value other than true or false
   */
  public boolean flag(SparkConf conf) {
    return flag(raw(conf));
  }

  /** A BOOLEAN setting's value in {@code v} (a session's SQL setting, say). */
  public boolean flag(String v) {
    check(Type.BOOLEAN);
    String s = v.trim().toLowerCase(Locale.ROOT);
    if (s.equals("true")) {
      return true;
    }
    if (s.equals("false")) {
      return false;
    }
    throw new IllegalArgumentException(key + " is '" + v.trim() + "'; true or false expected");
  }

  /**
   * A CHOICE setting's value, lower case, one of {@link #choices}.
   *
   * @throws IllegalArgumentException for a value that is not a choice
   */
  public String choice(SparkConf conf) {
    return choice(raw(conf));
  }

  /** A CHOICE setting's value in {@code v} (a session's SQL setting, say), lower case. */
  public String choice(String v) {
    check(Type.CHOICE);
    String s = v.trim().toLowerCase(Locale.ROOT);
    if (!choices().contains(s)) {
      throw new IllegalArgumentException(key + " is '" + v.trim() + "'; one of " + unit + " expected");
    }
    return s;
  }

  /** A TEXT setting's value, trimmed ({@code ""} when unset). */
  public String text(SparkConf conf) {
    check(Type.TEXT);
    return raw(conf);
  }

  /** A CHOICE setting's choices. */
  public List<String> choices() {
    List<String> out = new ArrayList<>();
    for (String c : unit.split(",")) {
      out.add(c.trim());
    }
    return out;
  }

  private long bounded(long v, String shown) {
    if (v < min || v > max) {
      String range =
          type == Type.BYTES
              ? Limits.sizeText(min) + " and " + Limits.sizeText(max)
              : min + " and " + max;
      throw new IllegalArgumentException(
          key + " is " + shown + "; it must be between " + range + " " + unit);
    }
    return v;
  }

  private void check(Type want) {
    if (type != want) {
      throw new IllegalStateException(key + " is a " + type + " setting, read as " + want);
    }
  }

  /** The setting a key names, or null. */
  public static SluiceSetting of(String key) {
    for (SluiceSetting s : values()) {
      if (s.key.equals(key)) {
        return s;
      }
    }
    return null;
  }

  /** {@code docs/configuration.md}: every setting, as this enum declares it. */
  public static String markdown() {
    StringBuilder b = new StringBuilder();
    b.append("# Configuration\n\n")
        .append("<!-- Generated from spark/src/main/java/dev/sluice/spark/api/")
        .append("SluiceSetting.java by\n")
        .append("     SluiceSettingTest; do not edit. To regenerate:\n")
        .append("     (cd spark && mvn -q -B test -Dtest=SluiceSettingTest")
        .append(" -Dsluice.writeDocs=true) -->\n\n")
        .append("Sluice's settings under Spark. Set them like any Spark setting (`--conf`,\n")
        .append("`SparkConf`, `spark-defaults.conf`); the SQL settings also per session\n")
        .append("(`spark.conf.set`). A value out of bounds or not of the setting's type fails\n")
        .append("with a message naming the setting. Engine settings size the one engine of\n")
        .append("an executor process: a later SparkContext in the same JVM that asks for other\n")
        .append("values fails its tasks naming the setting.\n\n")
        .append("| setting | type | default | bounds | read when | what it does |\n")
        .append("|---|---|---|---|---|---|\n");
    for (SluiceSetting s : values()) {
      b.append("| `")
          .append(s.key)
          .append("` | ")
          .append(s.type.name().toLowerCase(Locale.ROOT))
          .append(" | `")
          .append(s.defaultValue)
          .append("` | ")
          .append(s.bounds())
          .append(" | the ")
          .append(s.scope.when)
          .append(" | ")
          .append(s.doc)
          .append(" |\n");
    }
    return b.toString();
  }

  private String bounds() {
    switch (type) {
      case INT:
        return min + " to " + max + " " + unit;
      case BYTES:
        return Limits.sizeText(min) + " to " + Limits.sizeText(max);
      case CHOICE:
        return String.join(", ", choices());
      case TEXT:
        return unit;
      default:
        return "true, false";
    }
  }
}
