package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.api.Agg;
import java.io.IOException;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * Under Spark's own shuffle manager, Sluice's operators run as Spark's and give the same answer.
 */
class FallbackTest {
  @Test
  void operatorsFallBackToSparkWithTheSameResultTypes() throws IOException {
    JavaSparkContext sc = SparkContexts.start("sort", SparkContexts.scratch());
    try {
      String reason = Sluice.fallbackReason(sc.sc());
      assertTrue(reason != null && reason.contains("not Sluice"), String.valueOf(reason));
      List<Tuple2<Integer, Integer>> in = new ArrayList<>();
      Map<Integer, Long> count = new HashMap<>();
      Map<Integer, Integer> max = new HashMap<>();
      for (int i = 0; i < 5_000; i++) {
        int k = (i * 7919) % 97;
        in.add(new Tuple2<>(k, i));
        count.merge(k, 1L, Long::sum);
        max.merge(k, i, Math::max);
      }
      Map<Integer, Long> gotCount =
          Sluice.<Integer, Integer, Long>reduceByKey(
                  sc.parallelizePairs(in, 3), Agg.COUNT, Integer.class, 2)
              .collectAsMap();
      Map<Integer, Integer> gotMax =
          Sluice.<Integer, Integer, Integer>reduceByKey(
                  sc.parallelizePairs(in, 3), Agg.MAX, Integer.class, 2)
              .collectAsMap();
      assertEquals(count, new HashMap<>(gotCount));
      assertEquals(max, new HashMap<>(gotMax));
    } finally {
      sc.stop();
    }
  }
}
