package dev.sluice.spark;

import dev.sluice.spark.service.ServiceConf;
import dev.sluice.spark.shuffle.Coverage;
import java.util.Map;
import org.apache.spark.SparkConf;
import org.apache.spark.shuffle.api.ShuffleDataIO;
import org.apache.spark.shuffle.api.ShuffleDriverComponents;
import org.apache.spark.shuffle.api.ShuffleExecutorComponents;
import org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO;

/**
 * Sluice's shuffle storage plugin ({@code spark.shuffle.sort.io.plugin.class=}{@value
 * ServiceConf#STORAGE_PLUGIN}): Spark's local disk for everything it stores, except that in service
 * mode ({@code spark.sluice.mode=service}) it tells Spark that map output outlives the executor
 * that wrote it ({@code ShuffleDriverComponents.supportsReliableStorage}), as a remote shuffle
 * service's plugin does.
 *
 * <p>What Spark does with that: dynamic allocation runs without its external shuffle service or
 * shuffle tracking, and gives idle executors back although their map tasks' output is still read;
 * an executor or host lost unregisters none of the map outputs it wrote, and a running map stage
 * does not resubmit the tasks that finished there. Under this plugin every map output of a service
 * shuffle is pushed ({@link ServiceConf#reliableStorage}: {@code service.minPushBytes} and {@code
 * service.minShuffleBytes} are not applied), so the daemons hold them. What still lives on
 * executors is lost with them and found lost by the next read: a map output a failed push left
 * there, and the shuffles that stay embedded or that Sluice leaves to Spark's sort shuffle; their
 * readers' fetch failure makes Spark unregister them and rerun those map tasks.
 *
 * <p>Reliability is not said in embedded mode, nor where no shuffle of the application can run on
 * Sluice ({@link Coverage#settingsReason}: every one would be the sort shuffle's, on executors).
 */
public final class SluiceShuffleDataIO implements ShuffleDataIO {
  private final SparkConf conf;
  private final LocalDiskShuffleDataIO local;

  public SluiceShuffleDataIO(SparkConf conf) {
    this.conf = conf;
    local = new LocalDiskShuffleDataIO(conf);
  }

  /** Whether the plugin says, under {@code conf}, that map output outlives its executor. */
  public static boolean reliableStorage(SparkConf conf) {
    return ServiceConf.inServiceMode(conf) && Coverage.settingsReason(conf) == null;
  }

  @Override
  public ShuffleExecutorComponents executor() {
    return local.executor();
  }

  /** The driver's side, which decides once whether to say the storage is reliable. */
  @Override
  public ShuffleDriverComponents driver() {
    ShuffleDriverComponents disk = local.driver();
    boolean reliable = reliableStorage(conf);
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
