package dev.sluice.spark.service;

import dev.sluice.spark.api.SluiceSetting;
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

  /** The daemons, {@code ip:port}, in ownership order. */
  public final List<String> daemons;

  public final String app;
  final String key;

  /** A map output of fewer bytes stays on its executor ({@code service.minPushBytes}). */
  public final long minPushBytes;

  /**
   * Bytes a map task hands over between the spills it pushes while it maps ({@code
   * service.pushWhileMappingBytes}); 0: only the spills Spark asks for.
   */
  public final long pushWhileMappingBytes;

  /**
   * Whether a shuffle with a native reduce operator has the daemons run it before they stream
   * each partition ({@code service.reduceAtDaemon}).
   */
  public final boolean reduceAtDaemon;

  private ServiceConf(
      List<String> daemons,
      String app,
      String key,
      long minPushBytes,
      long pushWhileMappingBytes,
      boolean reduceAtDaemon) {
    this.daemons = daemons;
    this.app = app;
    this.key = key;
    this.minPushBytes = minPushBytes;
    this.pushWhileMappingBytes = pushWhileMappingBytes;
    this.reduceAtDaemon = reduceAtDaemon;
  }

  /**
   * The settings in {@code conf}, or null in embedded mode.
   *
   * @throws IllegalArgumentException in service mode with a setting missing or malformed
   */
  public static ServiceConf of(SparkConf conf) {
    if (!SluiceSetting.MODE.choice(conf).equals("service")) {
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
        SluiceSetting.SERVICE_PUSH_WHILE_MAPPING_BYTES.bytes(conf),
        SluiceSetting.SERVICE_REDUCE_AT_DAEMON.flag(conf));
  }

  public int nodes() {
    return daemons.size();
  }

  /** Identifies the application and daemons (not the key), for the per-JVM pool. */
  String identity() {
    return app + "@" + String.join(",", daemons);
  }
}
