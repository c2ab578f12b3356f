package dev.sluice.spark.examples;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.Partitioner;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Tuple2;

/**
 * reduceByKey over enum keys, whose {@code hashCode} is the constant's identity and so differs in
 * every executor JVM: equal keys from two executors must still meet in one result record. Used by
 * the cluster tests (two executors) to check that Sluice's hash-grouped aggregation does not trust
 * such hashes. Keys are placed by their ordinal ({@link ByOrdinal}).
 */
public final class EnumKeysJob {
  private EnumKeysJob() {}

  /** The keys: a small enum. */
  public enum Color {
    RED,
    GREEN,
    BLUE,
    CYAN,
    MAGENTA
  }

  /**
   * Places a color by its ordinal: Spark's HashPartitioner would place enum keys by their identity
   * hash, differently in each executor, and split a key over partitions with any shuffle.
   */
  static final class ByOrdinal extends Partitioner {
    private final int partitions;

    ByOrdinal(int partitions) {
      this.partitions = partitions;
    }

    @Override
    public int numPartitions() {
      return partitions;
    }

    @Override
    public int getPartition(Object key) {
      return ((Color) key).ordinal() % partitions;
    }
  }

  /**
   * Counts {@code records} records (key {@code Color.values()[i % 5]} for record i) over {@code
   * slices} map tasks into {@code partitions} partitions; returns {@code {result records, count of
   * each color in order}}.
   */
  public static long[] counts(JavaSparkContext sc, long records, int slices, int partitions) {
    List<Tuple2<Color, Long>> got =
        Slices.ids(sc, slices)
            .flatMapToPair(
                slice -> {
                  long first = Slices.first(records, slices, slice);
                  long n = Slices.share(records, slices, slice);
                  List<Tuple2<Color, Long>> out = new ArrayList<>();
                  for (long i = first; i < first + n; i++) {
                    out.add(new Tuple2<>(Color.values()[(int) (i % 5)], 1L));
                  }
                  return out.iterator();
                })
            .reduceByKey(new ByOrdinal(partitions), Long::sum)
            .collect();
    long[] result = new long[1 + Color.values().length];
    result[0] = got.size();
    for (Tuple2<Color, Long> t : got) {
      result[1 + t._1().ordinal()] += t._2();
    }
    return result;
  }
}
