package dev.sluice.spark.service;

import dev.sluice.spark.api.SluiceSetting;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.shuffle.api.ShuffleDataIO;
import org.apache.spark.shuffle.api.ShuffleDriverComponents;
import org.apache.spark.shuffle.api.ShuffleExecutorComponents;
import org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO;

/**
 * Sluice's shuffle storage plugin ({@code spark.shuffle.sort.io.plugin.class=}{@value #CLASS}):
 * Spark's local disk for everything it stores, except that in service mode ({@code
 * spark.sluice.mode=service}) it tells Spark that map output outlives the executor that wrote it
 * ({@code ShuffleDriverComponents.supportsReliableStorage}), as a remote shuffle service's plugin
 * does.
 *
 * <p>What Spark does with that: dynamic allocation runs without its external shuffle service or
 * shuffle tracking, and gives idle executors back although their map tasks' output is still read;
 * an executor or host lost unregisters none of the map outputs it wrote, and a running map stage
 * does not resubmit the tasks that finished there. Under this plugin every map output of a service
 * shuffle is pushed ({@link ServiceConf#reliableStorage}: {@code service.minPushBytes} and {@code
 * service.minShuffleBytes} are not applied), so the daemons hold them. What still lives on
 * executors is lost with them and found lost by the next read: a map output a failed push left
 * there, and the shuffles Sluice leaves to Spark's sort shuffle; their readers' fetch failure makes
 * Spark unregister them and rerun those map tasks. In embedded mode the plugin is Spark's local
 * disk, reliability included ({@code false}).
 */
public final class ServiceDataIO implements ShuffleDataIO {
  /** Spark's setting that names the plugin. */
  public static final String PLUGIN_KEY = "spark.shuffle.sort.io.plugin.class";

  /** This class's name, as {@link #PLUGIN_KEY} takes it. */
  public static final String CLASS = "dev.sluice.spark.service.ServiceDataIO";

  /** Whether {@code conf} names this plugin. */
  public static boolean named(SparkConf conf) {
    return conf.get(PLUGIN_KEY, "").equals(CLASS);
  }

  private final LocalDiskShuffleDataIO local;
  private final boolean reliable;

  public ServiceDataIO(SparkConf conf) {
    local = new LocalDiskShuffleDataIO(conf);
    reliable = SluiceSetting.MODE.choice(conf).equals("service");
  }

  @Override
  public ShuffleExecutorComponents executor() {
    return local.executor();
  }

  @Override
  public ShuffleDriverComponents driver() {
    ShuffleDriverComponents disk = local.driver();
    return new ShuffleDriverComponents() {
      @Override
      public Map<String, String> initializeApplication() {
        return disk.initializeApplication();
      }

      @Override
      public void cleanupApplication() {
        disk.cleanupApplication();
      }

      @Override
      public void registerShuffle(int shuffleId) {
        disk.registerShuffle(shuffleId);
      }

      @Override
      public void removeShuffle(int shuffleId, boolean blocking) {
        disk.removeShuffle(shuffleId, blocking);
      }

      @Override
      public boolean supportsReliableStorage() {
        return reliable;
      }
    };
  }
}
