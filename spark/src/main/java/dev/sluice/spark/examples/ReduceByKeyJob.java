package dev.sluice.spark.examples;

import dev.sluice.spark.Sluice;
import dev.sluice.spark.api.Agg;
import java.util.Iterator;
import java.util.SplittableRandom;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Tuple2;

/**
 * The reduceByKey job of the Spark benchmark (and an example of the operator API): {@code
 * records} pairs of a uniform Long key below {@code keys} and a Long value, generated inside the
 * map tasks, summed per key either by Spark's {@code reduceByKey} or by {@link
 * Sluice#reduceByKey}. Callable from spark-submit ({@code --class
 * dev.sluice.spark.examples.ReduceByKeyJob sluice-spark.jar RECORDS KEYS [spark|sluice]}) or
 * through py4j ({@link #run}).
 */
public final class ReduceByKeyJob {
  private ReduceByKeyJob() {}

  /** The generated pairs, {@code records} in all over {@code slices} map tasks. */
  public static JavaPairRDD<Long, Long> pairs(
      JavaSparkContext sc, long records, long keys, int slices) {
    return Slices.ids(sc, slices)
        .flatMapToPair(
            slice -> {
              long n = Slices.share(records, slices, slice);
              SplittableRandom r = new SplittableRandom(0x5eed + slice);
              return new Iterator<Tuple2<Long, Long>>() {
                long left = n;

                @Override
                public boolean hasNext() {
                  return left > 0;
                }

                @Override
                public Tuple2<Long, Long> next() {
                  left--;
                  return new Tuple2<>(r.nextLong(keys), r.nextLong(1000));
                }
              };
            });
  }

  /**
   * The generated pairs' values summed per key into {@code partitions} partitions, with Sluice's
   * offloaded operator or Spark's reduceByKey.
   */
  public static JavaPairRDD<Long, Long> sums(
      JavaSparkContext sc, long records, long keys, int slices, int partitions, boolean offloaded) {
    JavaPairRDD<Long, Long> in = pairs(sc, records, keys, slices);
    return offloaded
        ? Sluice.reduceByKey(in, Agg.SUM, Long.class, partitions)
        : in.reduceByKey(Long::sum, partitions);
  }

  /** Runs {@link #sums}; returns the number of keys. */
  public static long run(
      JavaSparkContext sc, long records, long keys, int slices, int partitions, boolean offloaded) {
    return sums(sc, records, keys, slices, partitions, offloaded).count();
  }

  /**
   * As {@link #run}, returning {@code {keys, checksum}} where the checksum sums {@code key *
   * 1000003 + sum} over every result (wrapping): for comparing the offloaded operator with Spark's
   * reduceByKey on a cluster.
   */
  public static long[] checksum(
      JavaSparkContext sc, long records, long keys, int slices, int partitions, boolean offloaded) {
    return sums(sc, records, keys, slices, partitions, offloaded)
        .map(t -> new long[] {1, t._1() * 1_000_003L + t._2()})
        .reduce((a, b) -> new long[] {a[0] + b[0], a[1] + b[1]});
  }

  public static void main(String[] args) {
    long records = args.length > 0 ? Long.parseLong(args[0]) : 10_000_000L;
    long keys = args.length > 1 ? Long.parseLong(args[1]) : 100_000L;
    boolean offloaded = args.length <= 2 || args[2].equals("sluice");
    try (JavaSparkContext sc = new JavaSparkContext(new SparkConf().setAppName("reduceByKey"))) {
      long t0 = System.nanoTime();
      long n = run(sc, records, keys, sc.defaultParallelism(), sc.defaultParallelism(), offloaded);
      System.out.printf(
          "%d keys from %d records in %.2f s (%s)%n",
          n, records, (System.nanoTime() - t0) / 1e9, offloaded ? "Sluice.reduceByKey" : "Spark");
    }
  }
}
