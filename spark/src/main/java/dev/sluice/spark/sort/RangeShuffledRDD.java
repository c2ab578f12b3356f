package dev.sluice.spark.sort;

import dev.sluice.spark.shim.Scala;
import java.util.ArrayList;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Set;
import org.apache.spark.Dependency;
import org.apache.spark.MapOutputTrackerMaster;
import org.apache.spark.Partition;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkEnv;
import org.apache.spark.TaskContext;
import org.apache.spark.executor.TempShuffleReadMetrics;
import org.apache.spark.rdd.RDD;
import org.apache.spark.shuffle.ShuffleReadMetricsReporter;
import scala.Product2;
import scala.collection.Iterator;
import scala.reflect.ClassTag$;

/**
 * The reduce side of a shuffle read in ranges of consecutive partitions, as adaptive execution
 * reads a coalesced shuffle: task {@code i} reads partitions {@code [bounds[i], bounds[i + 1])}
 * through the shuffle manager's reader (one reader per task, so an offloaded operator's reduce
 * state spans the whole range, and keys of different partitions never meet). The map stage is the
 * dependency's, run once however the reads are cut.
 */
public final class RangeShuffledRDD<K, C> extends RDD<Product2<K, C>> {
  private static final long serialVersionUID = 1L;

  private final ShuffleDependency<K, ?, C> dependency;
  private final int[] bounds;
  private final Reporting reporting;

  /** Where a task's read metrics go besides the task's own: a SQL node's metrics, say. */
  public interface Reporting extends java.io.Serializable {
    /** The reporter a task reads through, given the task's own read metrics. */
    ShuffleReadMetricsReporter reporter(TempShuffleReadMetrics task);

    /** The task's own read metrics alone. */
    Reporting TASK = task -> task;
  }

  /** One partition of the reads: a range of the shuffle's partitions. */
  private record Range(int index) implements Partition {}

  /**
   * Reads {@code dependency}'s shuffle in {@code bounds.length - 1} tasks; {@code bounds} starts at
   * 0, rises strictly and ends at the dependency's partition count.
   */
  public RangeShuffledRDD(ShuffleDependency<K, ?, C> dependency, int[] bounds) {
    this(dependency, bounds, Reporting.TASK);
  }

  /** As above, each task's read metrics reported through {@code reporting} too. */
  public RangeShuffledRDD(
      ShuffleDependency<K, ?, C> dependency, int[] bounds, Reporting reporting) {
    super(
        dependency.rdd().context(),
        Scala.seq(List.<Dependency<?>>of(dependency)),
        ClassTag$.MODULE$.apply(Product2.class));
    int n = dependency.partitioner().numPartitions();
    if (bounds.length < 2 || bounds[0] != 0 || bounds[bounds.length - 1] != n) {
      throw new IllegalArgumentException(
          "partition ranges must cover 0.." + n + ", got " + java.util.Arrays.toString(bounds));
    }
    for (int i = 1; i < bounds.length; i++) {
      if (bounds[i] <= bounds[i - 1]) {
        throw new IllegalArgumentException(
            "partition ranges must rise strictly: " + java.util.Arrays.toString(bounds));
      }
    }
    this.dependency = dependency;
    this.bounds = bounds.clone();
    this.reporting = reporting;
  }

  @Override
  public Partition[] getPartitions() {
    Partition[] parts = new Partition[bounds.length - 1];
    for (int i = 0; i < parts.length; i++) {
      parts[i] = new Range(i);
    }
    return parts;
  }

  /**
   * The hosts that hold much of a task's partitions, as Spark's own shuffled RDDs prefer them
   * (the map output tracker's choice per partition, {@code spark.shuffle.reduceLocality.enabled}).
   */
  @Override
  public scala.collection.immutable.Seq<String> getPreferredLocations(Partition split) {
    MapOutputTrackerMaster tracker = (MapOutputTrackerMaster) SparkEnv.get().mapOutputTracker();
    Set<String> hosts = new LinkedHashSet<>();
    for (int r = bounds[split.index()]; r < bounds[split.index() + 1]; r++) {
      hosts.addAll(Scala.asJava(tracker.getPreferredLocationsForShuffle(dependency, r)));
    }
    return Scala.seq(new ArrayList<>(hosts));
  }

  @Override
  @SuppressWarnings("unchecked")
  public Iterator<Product2<K, C>> compute(Partition split, TaskContext context) {
    int i = split.index();
    ShuffleReadMetricsReporter metrics =
        reporting.reporter(context.taskMetrics().createTempShuffleReadMetrics());
    return (Iterator<Product2<K, C>>)
        (Iterator<?>)
            SparkEnv.get()
                .shuffleManager()
                .getReader(
                    dependency.shuffleHandle(), bounds[i], bounds[i + 1], context, metrics)
                .read();
  }
}
