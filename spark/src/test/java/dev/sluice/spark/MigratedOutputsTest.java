package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.File;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.shuffle.IndexShuffleBlockResolver;
import org.apache.spark.util.collection.OpenHashSet;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * A shuffle's outputs that Spark migrated to this executor from a decommissioned one are deleted
 * with the shuffle, beside those Sluice wrote here (Spark's {@code
 * BlockManagerDecommissionIntegrationSuite}, "SPARK-46957: Migrated shuffle files should be able to
 * cleanup from executor"). Spark's resolver records a migrated output's map id in the shuffle
 * manager's own table as its files arrive; this test records one there as the resolver does, with
 * its files, in a shuffle Sluice carried.
 */
class MigratedOutputsTest {
  /** The files of shuffle {@code shuffle} under this executor's block manager. */
  private static List<String> files(int shuffle) {
    List<String> names = new ArrayList<>();
    for (File f :
        scala.jdk.javaapi.CollectionConverters.asJava(
            SparkEnv.get().blockManager().diskBlockManager().getAllFiles())) {
      if (f.getName().startsWith("shuffle_" + shuffle + "_") && f.exists()) {
        names.add(f.getName());
      }
    }
    return names;
  }

  @Test
  @SuppressWarnings({"unchecked", "rawtypes"})
  void aMigratedOutputGoesWithItsShuffle() throws Exception {
    Path dir = SparkContexts.scratch();
    JavaSparkContext sc = SparkContexts.start(SluiceShuffleManager.class.getName(), dir);
    try {
      List<Tuple2<Integer, Integer>> in = new ArrayList<>();
      for (int i = 0; i < 1_000; i++) {
        in.add(new Tuple2<>(i % 17, i));
      }
      JavaPairRDD<Integer, Integer> grouped =
          sc.parallelizePairs(in, 3).reduceByKey(Integer::sum, 4);
      assertEquals(17, grouped.count());
      int shuffle = ((ShuffleDependency<?, ?, ?>) grouped.rdd().dependencies().head()).shuffleId();

      SluiceShuffleManager manager = (SluiceShuffleManager) SparkEnv.get().shuffleManager();
      IndexShuffleBlockResolver resolver =
          (IndexShuffleBlockResolver) manager.shuffleBlockResolver();
      long migrated = 1L << 40;
      File data = resolver.getDataFile(shuffle, migrated);
      File index = resolver.getIndexFile(shuffle, migrated, scala.Option.empty());
      Files.createDirectories(data.getParentFile().toPath());
      Files.createDirectories(index.getParentFile().toPath());
      Files.write(data.toPath(), new byte[] {1, 2, 3});
      Files.write(index.toPath(), new byte[16]);
      scala.reflect.ClassTag longs = scala.reflect.ClassTag$.MODULE$.Long();
      OpenHashSet ids =
          resolver.taskIdMapsForShuffle().computeIfAbsent(shuffle, k -> new OpenHashSet(16, longs));
      synchronized (ids) {
        ids.add(migrated);
      }
      List<String> before = files(shuffle);
      // Each of Sluice's 3 outputs: data, index (and checksum) files; the migrated one's 2.
      assertTrue(before.size() >= 3 * 2 + 2 && before.contains(data.getName()), "" + before);

      assertTrue(manager.unregisterShuffle(shuffle));
      assertFalse(data.exists(), "the migrated output's data file stays");
      assertFalse(index.exists(), "the migrated output's index file stays");
      assertEquals(List.of(), files(shuffle), "files of the shuffle left");
    } finally {
      sc.stop();
    }
  }
}
