package dev.sluice.spark.service;

import dev.sluice.spark.api.SluiceSetting;
import dev.sluice.spark.jni.EngineOp;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkConf;

/** The service's settings of an application, or null from {@link #of} in embedded mode. */
public final class ServiceConf implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The lease the application asks the daemons for; the driver renews it well before it ends. */
  public static final long LEASE_MS = 600_000;

  /** How often the driver renews the lease. */
  public static final long RENEW_MS = 60_000;

  /** Spark's setting that names its shuffle storage plugin ({@code ShuffleDataIO}). */
  public static final String STORAGE_PLUGIN_KEY = "spark.shuffle.sort.io.plugin.class";

  /**
   * Sluice's storage plugin, {@code dev.sluice.spark.SluiceShuffleDataIO}: reliable storage said in
   * service mode (a test checks the name against the class).
   */
  public static final String STORAGE_PLUGIN = "dev.sluice.spark.SluiceShuffleDataIO";

  /** The daemons, {@code ip:port}, in ownership order. */
  public final List<String> daemons;

  public final String app;
  final String key;

  /** A map output of fewer bytes stays on its executor ({@code service.minPushBytes}). */
  public final long minPushBytes;

  /**
   * A map output whose bytes times its shuffle's map count are fewer stays on its executor
   * ({@code service.minShuffleBytes}); see {@link #keepReason}.
   */
  public final long minShuffleBytes;

  /**
   * Bytes a map task hands over between the spills it pushes while it maps ({@code
   * service.pushWhileMappingBytes}); 0: only the spills Spark asks for.
   */
  public final long pushWhileMappingBytes;

  /**
   * Which shuffles with a native reduce operator have the daemons run it before they stream each
   * partition ({@code service.reduceAtDaemon}: auto, true or false); see {@link
   * #reducesAtDaemon}.
   */
  public final String reduceAtDaemon;

  /**
   * Whether Spark was told that map output outlives its executor (Sluice's storage plugin, {@link
   * #STORAGE_PLUGIN}, is named): every output is pushed, {@link #minPushBytes} and {@link
   * #minShuffleBytes} aside, since Spark then gives executors back without rerunning their map
   * tasks.
   */
  public final boolean reliableStorage;

  private ServiceConf(
      List<String> daemons,
      String app,
      String key,
      long minPushBytes,
      long minShuffleBytes,
      long pushWhileMappingBytes,
      String reduceAtDaemon,
      boolean reliableStorage) {
    this.daemons = daemons;
    this.app = app;
    this.key = key;
    this.minPushBytes = minPushBytes;
    this.minShuffleBytes = minShuffleBytes;
    this.pushWhileMappingBytes = pushWhileMappingBytes;
    this.reduceAtDaemon = reduceAtDaemon;
    this.reliableStorage = reliableStorage;
  }

  /** Whether {@code conf} sends shuffles to the daemons ({@code spark.sluice.mode=service}). */
  public static boolean inServiceMode(SparkConf conf) {
    return SluiceSetting.MODE.choice(conf).equals("service");
  }

  /**
   * The settings in {@code conf}, or null in embedded mode.
   *
   * @throws IllegalArgumentException in service mode with a setting missing or malformed
   */
  public static ServiceConf of(SparkConf conf) {
    if (!inServiceMode(conf)) {
      return null;
    }
    List<String> daemons = new ArrayList<>();
    for (String d : SluiceSetting.SERVICE_DAEMONS.text(conf).split(",")) {
      String t = d.trim();
      if (!t.isEmpty()) {
        int colon = t.lastIndexOf(':');
        if (colon <= 0 || colon == t.length() - 1) {
          throw new IllegalArgumentException(
              SluiceSetting.SERVICE_DAEMONS.key + ": '" + t + "' is not ip:port");
        }
        daemons.add(t);
      }
    }
    String app = SluiceSetting.SERVICE_APP.text(conf);
    String key = SluiceSetting.SERVICE_APP_SECRET.text(conf);
    if (daemons.isEmpty() || app.isEmpty() || key.isEmpty()) {
      throw new IllegalArgumentException(
          SluiceSetting.MODE.key
              + "=service needs "
              + SluiceSetting.SERVICE_DAEMONS.key
              + ", "
              + SluiceSetting.SERVICE_APP.key
              + " and "
              + SluiceSetting.SERVICE_APP_SECRET.key);
    }
    return new ServiceConf(
        List.copyOf(daemons),
        app,
        key,
        SluiceSetting.SERVICE_MIN_PUSH_BYTES.bytes(conf),
        SluiceSetting.SERVICE_MIN_SHUFFLE_BYTES.bytes(conf),
        SluiceSetting.SERVICE_PUSH_WHILE_MAPPING_BYTES.bytes(conf),
        SluiceSetting.SERVICE_REDUCE_AT_DAEMON.choice(conf),
        conf.get(STORAGE_PLUGIN_KEY, "").equals(STORAGE_PLUGIN));
  }

  /**
   * Why a shuffle cannot go to the daemons under {@code conf}'s Spark settings, or null. Under
   * Spark's external shuffle service with {@code spark.files.fetchFailure.unRegisterOutputOnHost},
   * a fetch failure unregisters the map outputs of the failure's host, not of its executor id; a
   * pushed output's status names its writer's host ({@link ServiceStreams#location}) and a failed
   * read at the daemons names none of them, so the outputs the daemons lost would stay registered
   * and the reads fail until the stage is given up.
   */
  public static String sparkSettingsReason(SparkConf conf) {
    if (conf.getBoolean("spark.shuffle.service.enabled", false)
        && conf.getBoolean("spark.files.fetchFailure.unRegisterOutputOnHost", false)) {
      return "Spark's external shuffle service unregisters outputs by host on a fetch failure"
          + " (spark.files.fetchFailure.unRegisterOutputOnHost)";
    }
    return null;
  }

  /**
   * The shuffle's size as one map output of {@code bytes} estimates it, one of {@code maps}:
   * {@code bytes * maps} (at least one map: the output's own), saturating at {@code
   * Long.MAX_VALUE}.
   */
  public static long shuffleEstimate(long bytes, int maps) {
    int m = Math.max(maps, 1);
    return bytes > Long.MAX_VALUE / m ? Long.MAX_VALUE : bytes * m;
  }

  /**
   * Why a map output of {@code bytes}, one of {@code maps} of its shuffle, stays on its executor
   * instead of being pushed, or null when it is pushed (always under {@link #reliableStorage}):
   * fewer bytes than {@link #minPushBytes}
   * (its push would cost a round trip and a commit at every daemon for less than one chunk), or a
   * shuffle estimated at fewer than {@link #minShuffleBytes} ({@link #shuffleEstimate}; the map
   * tasks of a shuffle this small cost less to rerun than the daemons cost it: a second write,
   * a push and their checks on the cores the tasks use; TPC-H sf 1 with every output pushed ran
   * at 0.95x of embedded's speed, q13 at 0.78x, docs/benchmarks.md).
   */
  public String keepReason(long bytes, int maps) {
    if (reliableStorage) {
      return null;
    }
    if (bytes < minPushBytes) {
      return bytes + " bytes, under service.minPushBytes (" + minPushBytes + ")";
    }
    long shuffle = shuffleEstimate(bytes, maps);
    if (shuffle < minShuffleBytes) {
      return bytes
          + " bytes of "
          + maps
          + " map outputs, a shuffle of about "
          + shuffle
          + " bytes, under service.minShuffleBytes ("
          + minShuffleBytes
          + ")";
    }
    return null;
  }

  /**
   * Whether the daemons run {@code op} (a shuffle's native reduce operator, or null for none) over
   * each partition before they stream it: every operator under {@code true}, none under {@code
   * false}, and under {@code auto} the aggregates, whose output the daemon shrinks (each key once
   * per partition instead of once per map output) before it crosses the network; a sort's merge
   * sends as many bytes from either side, so it stays in the reduce tasks.
   */
  public boolean reducesAtDaemon(EngineOp op) {
    if (op == null || op == EngineOp.NONE) {
      return false;
    }
    return switch (reduceAtDaemon) {
      case "true" -> true;
      case "auto" -> op.aggregates();
      default -> false;
    };
  }

  public int nodes() {
    return daemons.size();
  }

  /** Identifies the application and daemons (not the key), for the per-JVM pool. */
  String identity() {
    return app + "@" + String.join(",", daemons);
  }
}
