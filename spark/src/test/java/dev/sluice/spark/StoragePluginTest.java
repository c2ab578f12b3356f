package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.service.ServiceConf;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.shuffle.api.ShuffleDataIO;
import org.apache.spark.shuffle.api.ShuffleDriverComponents;
import org.apache.spark.shuffle.api.ShuffleExecutorComponents;
import org.apache.spark.shuffle.api.ShuffleMapOutputWriter;
import org.apache.spark.shuffle.api.SingleSpillShuffleMapOutputWriter;
import org.apache.spark.shuffle.sort.io.LocalDiskShuffleDataIO;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * An application that names a shuffle storage plugin ({@code spark.shuffle.sort.io.plugin.class},
 * Spark's {@code ShuffleDataIO}) has every map output written through it, by Spark's sort shuffle,
 * with the plugin's executor side initialized (Spark's {@code ShuffleDriverComponentsSuite}, "test
 * serialization of shuffle initialization conf to executors", found Sluice writing around it).
 */
class StoragePluginTest {
  /** The local disk plugin, counting its executor side's initializations and map writers. */
  public static final class CountingDataIO implements ShuffleDataIO {
    static final AtomicInteger INITIALIZED = new AtomicInteger();
    static final AtomicInteger WRITERS = new AtomicInteger();
    private final LocalDiskShuffleDataIO local;

    public CountingDataIO(SparkConf conf) {
      local = new LocalDiskShuffleDataIO(conf);
    }

    @Override
    public ShuffleDriverComponents driver() {
      return local.driver();
    }

    @Override
    public ShuffleExecutorComponents executor() {
      ShuffleExecutorComponents inner = local.executor();
      return new ShuffleExecutorComponents() {
        @Override
        public void initializeExecutor(String app, String executor, Map<String, String> extra) {
          INITIALIZED.incrementAndGet();
          inner.initializeExecutor(app, executor, extra);
        }

        @Override
        public ShuffleMapOutputWriter createMapOutputWriter(
            int shuffle, long mapTask, int partitions) throws IOException {
          WRITERS.incrementAndGet();
          return inner.createMapOutputWriter(shuffle, mapTask, partitions);
        }

        @Override
        public Optional<SingleSpillShuffleMapOutputWriter> createSingleFileMapOutputWriter(
            int shuffle, long mapId) throws IOException {
          WRITERS.incrementAndGet();
          return inner.createSingleFileMapOutputWriter(shuffle, mapId);
        }
      };
    }
  }

  @Test
  void mapOutputsGoThroughTheNamedPlugin() throws IOException {
    SparkConf plugin =
        new SparkConf().set("spark.shuffle.sort.io.plugin.class", CountingDataIO.class.getName());
    JavaSparkContext sc =
        SparkContexts.start(SluiceShuffleManager.class.getName(), SparkContexts.scratch(), plugin);
    try {
      List<Tuple2<Integer, Integer>> in = new ArrayList<>();
      Map<Integer, Integer> sums = new HashMap<>();
      for (int i = 0; i < 3_000; i++) {
        in.add(new Tuple2<>(i % 31, i));
        sums.merge(i % 31, i, Integer::sum);
      }
      int writersBefore = CountingDataIO.WRITERS.get();
      Map<Integer, Integer> got =
          sc.parallelizePairs(in, 3).reduceByKey(Integer::sum, 4).collectAsMap();
      assertEquals(sums, new HashMap<>(got));
      assertEquals(
          3, CountingDataIO.WRITERS.get() - writersBefore, "map outputs through the plugin");
      assertEquals(1, CountingDataIO.INITIALIZED.get(), "the plugin's executor side initialized");
      String reason = SluiceShuffleManager.fallbackReason(sc.getConf());
      assertTrue(
          reason != null && reason.contains("spark.shuffle.sort.io.plugin.class"),
          String.valueOf(reason));
    } finally {
      sc.stop();
    }
  }

  @Test
  void sluicesPluginSaysItsStorageIsReliableWhereTheDaemonsTakeEveryShuffle() {
    assertEquals(SluiceShuffleDataIO.class.getName(), ServiceConf.STORAGE_PLUGIN);
    SparkConf service =
        new SparkConf(false)
            .set(ServiceConf.STORAGE_PLUGIN_KEY, ServiceConf.STORAGE_PLUGIN)
            .set("spark.shuffle.manager", "dev.sluice.spark.SluiceShuffleManager")
            .set("spark.serializer", SluiceShuffleDataIO.KRYO)
            .set("spark.sluice.mode", "service");
    assertNull(SluiceShuffleDataIO.unreliableReason(service));
    assertTrue(new SluiceShuffleDataIO(service).driver().supportsReliableStorage());
    Map<String, String[]> unreliable =
        Map.of(
            "embedded mode", new String[] {"spark.sluice.mode", "embedded"},
            "not Sluice's", new String[] {"spark.shuffle.manager", "sort"},
            "I/O encryption", new String[] {"spark.io.encryption.enabled", "true"},
            "unRegisterOutputOnHost",
                new String[] {"spark.files.fetchFailure.unRegisterOutputOnHost", "true"},
            "spark.serializer=",
                new String[] {"spark.serializer", "org.apache.spark.serializer.JavaSerializer"},
            "groupedCombine=false", new String[] {"spark.sluice.groupedCombine", "false"});
    for (Map.Entry<String, String[]> e : unreliable.entrySet()) {
      SparkConf c = service.clone().set(e.getValue()[0], e.getValue()[1]);
      if (e.getKey().equals("unRegisterOutputOnHost")) {
        c.set("spark.shuffle.service.enabled", "true");
      }
      String why = SluiceShuffleDataIO.unreliableReason(c);
      assertTrue(why != null && why.contains(e.getKey()), e.getKey() + ": " + why);
      assertFalse(new SluiceShuffleDataIO(c).driver().supportsReliableStorage(), e.getKey());
    }
  }
}
