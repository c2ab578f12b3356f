package dev.sluice.spark.examples;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.rdd.OrderedRDDFunctions;
import org.apache.spark.rdd.RDD;
import scala.Tuple2;
import scala.math.Ordering;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * A sortByKey as Scala's {@code rdd.sortByKey()} runs it (the natural {@code Ordering.Long}),
 * which Sluice sorts in the engine; reports what each output partition holds so a caller (the
 * cluster test, through py4j) can check the order.
 */
public final class SortByKeyJob {
  private SortByKeyJob() {}

  /**
   * Sorts {@code records} pairs with random Long keys into {@code partitions} partitions; returns,
   * per output partition in order, {@code count, first key, last key, 1 if its keys never
   * decrease else 0}, flattened.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  public static long[] partitionStats(
      JavaSparkContext sc, long records, int slices, int partitions) {
    JavaPairRDD<Long, Long> in = ReduceByKeyJob.pairs(sc, records, Long.MAX_VALUE, slices)
        .mapToPair(t -> new Tuple2<>(t._1() - Long.MAX_VALUE / 2, t._2()));
    ClassTag any = ClassTag$.MODULE$.Any();
    RDD<Tuple2<Long, Long>> sorted =
        (RDD<Tuple2<Long, Long>>)
            new OrderedRDDFunctions(in.rdd(), (Ordering) Ordering.Long$.MODULE$, any, any, any)
                .sortByKey(true, partitions);
    List<long[]> stats =
        sorted
            .toJavaRDD()
            .mapPartitionsWithIndex(
                (Integer i, Iterator<Tuple2<Long, Long>> it) -> {
                  long count = 0;
                  long first = 0;
                  long last = 0;
                  long ordered = 1;
                  while (it.hasNext()) {
                    long k = it.next()._1();
                    if (count == 0) {
                      first = k;
                    } else if (k < last) {
                      ordered = 0;
                    }
                    last = k;
                    count++;
                  }
                  List<long[]> one = new ArrayList<>();
                  one.add(new long[] {i, count, first, last, ordered});
                  return one.iterator();
                },
                true)
            .collect();
    long[] out = new long[4 * stats.size()];
    for (long[] s : stats) {
      int i = (int) s[0];
      System.arraycopy(s, 1, out, 4 * i, 4);
    }
    return out;
  }
}
