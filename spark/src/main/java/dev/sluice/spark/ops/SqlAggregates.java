package dev.sluice.spark.ops;

import dev.sluice.spark.api.Agg;
import dev.sluice.spark.shuffle.Coverage;
import org.apache.spark.Partitioner;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.rdd.RDD;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.shuffle.ShuffleWriteProcessor;
import org.apache.spark.sql.errors.QueryExecutionErrors;
import org.apache.spark.unsafe.Platform;
import org.apache.spark.unsafe.hash.Murmur3_x86_32;
import scala.Option;
import scala.Tuple2;
import scala.reflect.ClassTag;
import scala.reflect.ClassTag$;

/**
 * The shuffle of a Spark SQL aggregate that the engine runs whole ({@code
 * dev.sluice.spark.sql.NativeAggregateRule}): the offloaded operator of {@link
 * dev.sluice.spark.Sluice}, fed with (key, value) pairs taken from rows, its partitions placed
 * exactly as Spark SQL's hash partitioning of the key column places them ({@link
 * SqlHashPartitioner}), so that operators above it that count on that partitioning (a join on the
 * key) stay correct.
 *
 * <p>Keys are {@code Long}, {@code Integer}, a string's UTF-8 bytes ({@code byte[]}) or null (the
 * null group); results come back as (key, result) pairs with string keys as UTF-8 bytes.
 */
public final class SqlAggregates {
  /** Key kinds: a long, an int, a string column (UTF-8 binary collation). */
  public static final int KEY_LONG = 0;

  public static final int KEY_INT = 1;
  public static final int KEY_STRING = 2;

  /** Value types: a long or int column ({@code Long}, {@code Integer} values). */
  public static final int VALUE_LONG = OpSpec.VALUE_LONG;

  public static final int VALUE_INT = OpSpec.VALUE_INT;

  private SqlAggregates() {}

  /**
   * Spark SQL's error for an ANSI sum that overflowed, found {@code where}: Spark's own {@code
   * SparkArithmeticException} of error class {@code ARITHMETIC_OVERFLOW}, which callers match on
   * (PySpark raises it as its {@code ArithmeticException}).
   */
  public static ArithmeticException overflow(String where) {
    return QueryExecutionErrors.arithmeticOverflowError(
        "long overflow in sum (Sluice's native aggregate: " + where + ")", "try_sum", null);
  }

  /** Why the engine cannot run offloaded operators in this application, or null if it can. */
  public static String fallbackReason(SparkConf conf) {
    return Coverage.operatorFallbackReason(conf, SparkEnv.get().shuffleManager());
  }

  /**
   * The shuffle of {@code agg} over the values of each key of {@code pairs}, into {@code
   * partitions} partitions; an {@code exact} sum fails on overflow (Spark SQL's ANSI mode) instead
   * of wrapping. Its map tasks report their writes through {@code writes} (a SQL node's metrics).
   */
  public static ShuffleDependency<Object, Object, Object> aggregate(
      RDD<Tuple2<Object, Object>> pairs,
      int partitions,
      Agg agg,
      int valueType,
      boolean exact,
      ShuffleWriteProcessor writes) {
    return dependency(
        pairs,
        new SqlHashPartitioner(partitions),
        new SluiceOpSerializer(new OpSpec(agg, valueType, exact, true)),
        writes);
  }

  /**
   * The shuffle of the lanes {@code lanes} of each {@link LaneRecord} of {@code pairs} (each
   * carries its lanes' inputs), into {@code partitions} partitions placed as the records say;
   * results come back as (the key's bytes, the lanes' state) pairs.
   */
  public static ShuffleDependency<Object, Object, Object> aggregateLanes(
      RDD<Tuple2<Object, Object>> pairs,
      int partitions,
      Lane[] lanes,
      ShuffleWriteProcessor writes) {
    return dependency(
        pairs,
        new GroupKeyPartitioner(partitions),
        new SluiceOpSerializer(new OpSpec(lanes)),
        writes);
  }

  /**
   * The shuffle of {@code pairs} as a {@code ShuffledRDD} would declare it, its writes reported
   * through {@code writes}.
   */
  @SuppressWarnings({"unchecked", "rawtypes"})
  private static ShuffleDependency<Object, Object, Object> dependency(
      RDD<Tuple2<Object, Object>> pairs,
      Partitioner partitioner,
      Serializer serializer,
      ShuffleWriteProcessor writes) {
    ClassTag<Object> any = ClassTag$.MODULE$.Any();
    return new ShuffleDependency<>(
        (RDD) pairs,
        partitioner,
        serializer,
        Option.empty(),
        Option.empty(),
        false,
        writes,
        any,
        any,
        any);
  }

  /** A partitioner into a number of partitions, equal to another of its class and count. */
  abstract static class CountedPartitioner extends Partitioner {
    private static final long serialVersionUID = 1L;
    final int partitions;

    CountedPartitioner(int partitions) {
      this.partitions = partitions;
    }

    @Override
    public int numPartitions() {
      return partitions;
    }

    @Override
    public boolean equals(Object o) {
      return o != null
          && o.getClass() == getClass()
          && ((CountedPartitioner) o).partitions == partitions;
    }

    @Override
    public int hashCode() {
      return partitions;
    }
  }

  /** The partition a {@link LaneRecord} carries (Spark SQL's, computed from the row). */
  static final class GroupKeyPartitioner extends CountedPartitioner {
    private static final long serialVersionUID = 1L;

    GroupKeyPartitioner(int partitions) {
      super(partitions);
    }

    @Override
    public int getPartition(Object key) {
      return ((LaneRecord) key).partition();
    }
  }

  /**
   * Spark SQL's {@code HashPartitioning} of one key column: {@code pmod(murmur3(key, 42), n)},
   * with Spark's Murmur3 of a long, an int, or a UTF-8-binary string's bytes.
   */
  static final class SqlHashPartitioner extends CountedPartitioner {
    private static final long serialVersionUID = 1L;
    /** Spark SQL's hash seed ({@code Murmur3Hash}). */
    static final int SEED = 42;

    SqlHashPartitioner(int partitions) {
      super(partitions);
    }

    @Override
    public int getPartition(Object key) {
      int h;
      if (key == null) {
        // Spark's Murmur3Hash leaves the seed as it is for a null.
        h = SEED;
      } else if (key instanceof Long l) {
        h = Murmur3_x86_32.hashLong(l, SEED);
      } else if (key instanceof Integer i) {
        h = Murmur3_x86_32.hashInt(i, SEED);
      } else if (key instanceof byte[] b) {
        h = Murmur3_x86_32.hashUnsafeBytes(b, Platform.BYTE_ARRAY_OFFSET, b.length, SEED);
      } else {
        throw new IllegalArgumentException(
            "a Spark SQL aggregate key Sluice cannot place: "
                + (key == null ? "null" : key.getClass().getName()));
      }
      int p = h % partitions;
      return p < 0 ? p + partitions : p;
    }
  }
}
