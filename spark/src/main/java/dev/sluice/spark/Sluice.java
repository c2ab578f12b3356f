package dev.sluice.spark;

import dev.sluice.spark.api.Agg;
import dev.sluice.spark.ops.OpSpec;
import dev.sluice.spark.ops.SluiceOpSerializer;
import dev.sluice.spark.shuffle.Coverage;
import java.util.concurrent.atomic.AtomicBoolean;
import org.apache.spark.HashPartitioner;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.rdd.ShuffledRDD;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * Offloaded operators (SmartShuffle's operator registered with the shuffle): the aggregation runs
 * inside the Sluice engine, partially on the map side (on the engine's offload threads, per
 * destination) and exactly on the reduce side (spilling sorted runs when its memory is spent),
 * with no Java serialization of records on either side.
 *
 * <pre>{@code
 * JavaPairRDD<String, Long> totals = Sluice.reduceByKey(pairs, Agg.SUM);
 * JavaPairRDD<Long, Double> lows = Sluice.reduceByKey(readings, Agg.MIN, Double.class, 64);
 * JavaRDD<String> keys = Sluice.distinct(words);
 * }</pre>
 *
 * <p>Keys are {@code Long}, {@code Integer} or {@code String}; values {@code Long}, {@code
 * Integer} or {@code Double}. Results: {@link Agg#COUNT} is a {@code Long}; {@link Agg#SUM} is a
 * {@code Long} for integral values (wrapping on overflow) and a {@code Double} for doubles; {@link
 * Agg#MIN} and {@link Agg#MAX} keep the values' type. Keys are partitioned with Spark's {@link
 * HashPartitioner}. Where the engine cannot run them (another shuffle manager, I/O encryption,
 * push-based shuffle, a shuffle storage plugin other than Sluice's), the same operators run as
 * Spark's own {@code reduceByKey}, and the reason is logged once.
 */
public final class Sluice {
  private static final Logger LOG = LoggerFactory.getLogger(Sluice.class);
  private static final AtomicBoolean FALLBACK_LOGGED = new AtomicBoolean();

  private Sluice() {}

  /** {@code agg} over each key's {@code Long} values, into Spark's default partition count. */
  public static <K> JavaPairRDD<K, Long> reduceByKey(JavaPairRDD<K, Long> rdd, Agg agg) {
    return reduceByKey(rdd, agg, Long.class, defaultPartitions(rdd));
  }

  /**
   * {@code agg} over each key's values of type {@code values} (Long, Integer or Double), into
   * {@code partitions} partitions. The result type is described in the class comment.
   */
  public static <K, V, R> JavaPairRDD<K, R> reduceByKey(
      JavaPairRDD<K, V> rdd, Agg agg, Class<V> values, int partitions) {
    int valueType = OpSpec.valueTypeOf(values);
    if (valueType < 0) {
      throw new IllegalArgumentException(
          "Sluice.reduceByKey takes Long, Integer or Double values, not " + values.getName());
    }
    if (partitions < 1 || partitions > Coverage.PARTITIONS_MAX) {
      throw new IllegalArgumentException(
          partitions + " partitions; Sluice takes 1 to " + Coverage.PARTITIONS_MAX);
    }
    SparkContext sc = rdd.context();
    String reason = Coverage.operatorFallbackReason(sc.getConf(), SparkEnv.get().shuffleManager());
    if (reason != null) {
      if (FALLBACK_LOGGED.compareAndSet(false, true)) {
        LOG.info("Sluice: offloaded operators run as Spark's reduceByKey: {}", reason);
      }
      return sparkReduceByKey(rdd, agg, valueType, partitions);
    }
    ClassTag<Object> any = ClassTag$.MODULE$.Any();
    @SuppressWarnings({"unchecked", "rawtypes"})
    ShuffledRDD<K, V, R> shuffled =
        new ShuffledRDD(rdd.rdd(), new HashPartitioner(partitions), any, any, any);
    shuffled.setSerializer(new SluiceOpSerializer(new OpSpec(agg, valueType)));
    @SuppressWarnings("unchecked")
    ClassTag<K> kt = (ClassTag<K>) (ClassTag<?>) any;
    @SuppressWarnings("unchecked")
    ClassTag<R> rt = (ClassTag<R>) (ClassTag<?>) any;
    return JavaPairRDD.fromRDD(shuffled, kt, rt);
  }

  /** The distinct elements (Long, Integer or String), deduplicated in the engine. */
  public static <K> JavaRDD<K> distinct(JavaRDD<K> rdd) {
    return distinct(rdd, rdd.getNumPartitions());
  }

  /** The distinct elements, into {@code partitions} partitions. */
  public static <K> JavaRDD<K> distinct(JavaRDD<K> rdd, int partitions) {
    JavaPairRDD<K, Long> keyed = rdd.mapToPair(k -> new scala.Tuple2<>(k, 0L));
    JavaPairRDD<K, Long> counted = reduceByKey(keyed, Agg.COUNT, Long.class, partitions);
    return counted.keys();
  }

  /**
   * Why the offloaded operators would run as Spark's own here (null when the engine runs them):
   * for jobs and tests to check.
   */
  public static String fallbackReason(SparkContext sc) {
    return Coverage.operatorFallbackReason(sc.getConf(), SparkEnv.get().shuffleManager());
  }

  private static int defaultPartitions(JavaPairRDD<?, ?> rdd) {
    SparkConf conf = rdd.context().getConf();
    if (conf.contains("spark.default.parallelism")) {
      return rdd.context().defaultParallelism();
    }
    return rdd.getNumPartitions();
  }

  /** The same operator as Spark's reduceByKey, with the same result types. */
  @SuppressWarnings("unchecked")
  private static <K, V, R> JavaPairRDD<K, R> sparkReduceByKey(
      JavaPairRDD<K, V> rdd, Agg agg, int valueType, int partitions) {
    if (agg == Agg.COUNT) {
      return (JavaPairRDD<K, R>) (JavaPairRDD<K, ?>) rdd.mapValues(v -> 1L).reduceByKey(Long::sum, partitions);
    }
    if (valueType == OpSpec.VALUE_DOUBLE) {
      Function2<Double, Double, Double> f =
          agg == Agg.SUM ? Double::sum : agg == Agg.MIN ? Math::min : Math::max;
      return (JavaPairRDD<K, R>)
          (JavaPairRDD<K, ?>) ((JavaPairRDD<K, Double>) rdd).reduceByKey(f, partitions);
    }
    if (valueType == OpSpec.VALUE_INT && agg != Agg.SUM) {
      Function2<Integer, Integer, Integer> f = agg == Agg.MIN ? Math::min : Math::max;
      return (JavaPairRDD<K, R>)
          (JavaPairRDD<K, ?>) ((JavaPairRDD<K, Integer>) rdd).reduceByKey(f, partitions);
    }
    Function2<Long, Long, Long> f = agg == Agg.SUM ? Long::sum : agg == Agg.MIN ? Math::min : Math::max;
    return (JavaPairRDD<K, R>)
        (JavaPairRDD<K, ?>) rdd.mapValues(v -> ((Number) v).longValue()).reduceByKey(f, partitions);
  }
}
