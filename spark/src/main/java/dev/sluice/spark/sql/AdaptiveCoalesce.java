package dev.sluice.spark.sql;

import dev.sluice.spark.shim.LineShim;
import dev.sluice.spark.shim.Scala;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.MapOutputStatistics;
import org.apache.spark.MapOutputTrackerMaster;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.SparkException;
import org.apache.spark.sql.execution.CoalescedPartitionSpec;
import org.apache.spark.sql.execution.ShufflePartitionSpec;
import org.apache.spark.sql.execution.exchange.ENSURE_REQUIREMENTS$;
import org.apache.spark.sql.execution.exchange.REPARTITION_BY_COL$;
import org.apache.spark.sql.execution.exchange.ShuffleOrigin;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.util.Utils;
import scala.Option;
import scala.collection.immutable.Seq;

/**
 * Adaptive execution's coalescing of small shuffle partitions, for the shuffles that Sluice's
 * native SQL nodes run inside a stage ({@link SluiceAggregateExec}, {@link
 * SluiceSortExchangeExec}), which adaptive execution does not see as query stages.
 *
 * <p>Spark's own exchange is a query stage: its map stage runs, adaptive execution reads the
 * size of each reduce partition from the map output statistics and reads runs of consecutive
 * small partitions in one task ({@code CoalesceShufflePartitions}). A native node runs its map
 * stage itself, takes the same statistics and cuts its reads with Spark's own algorithm ({@code
 * ShufflePartitionsUtil.coalescePartitions}) and settings (advisory partition size, minimum
 * partition count and size, parallelism first), so a query reads as many partitions under
 * Sluice as under the sort shuffle: 2,000 shuffle partitions of a few kilobytes each become one
 * task, not 2,000.
 *
 * <p>Only where the node's partition count is not relied on: a node below an operator with
 * several children that need a distribution (a sort-merge or shuffled hash join, which zips its
 * children's partitions) keeps its declared count ({@link SluiceRule}'s pinned nodes), and so does
 * a node in the final stage of a plan whose final stage adaptive execution leaves alone (a cached
 * query's plan, whose partitioning a later query's join relies on). A coalesced hash or range
 * partitioning still places each key in one partition, in order for ranges; once a node has read
 * in coalesced ranges, it reports them as its partitioning, as Spark's coalesced read does.
 */
final class AdaptiveCoalesce {
  private AdaptiveCoalesce() {}

  /**
   * The bounds of the reads of a shuffle of {@code partitions} partitions whose map stage gave
   * {@code stats}: {@code [0, ..., partitions]}, task {@code i} reading {@code [b[i], b[i + 1])};
   * one partition each when coalescing is off, or adaptive execution (whose coalescing this is).
   */
  static int[] bounds(SQLConf conf, SparkContext sc, MapOutputStatistics stats, int partitions) {
    if (!conf.adaptiveExecutionEnabled()
        || !conf.coalesceShufflePartitionsEnabled()
        || partitions <= 1) {
      return identity(partitions);
    }
    Seq<Seq<ShufflePartitionSpec>> specs = coalesce(conf, sc, List.of(Option.apply(stats)));
    return specs.isEmpty() ? identity(partitions) : bounds(specs.head());
  }

  /**
   * Spark's coalescing of shuffles read together (one list of specs per shuffle, all alike), by
   * their map statistics ({@code None} for a shuffle of no map tasks) and the session's settings;
   * empty when Spark's algorithm declines.
   */
  static Seq<Seq<ShufflePartitionSpec>> coalesce(
      SQLConf conf, SparkContext sc, List<Option<MapOutputStatistics>> stats) {
    // As CoalesceShufflePartitions (Spark 3.2 on): a minimum count set is taken as it is, else the
    // default parallelism where parallelism comes first, else 1; the minimum size always holds
    // (under a fifth of the advisory size in Spark's tests, as there). Spark also splits the
    // minimum count among groups of shuffles coalesced apart; each call here is one group.
    Option<Object> minNumber = conf.getConf(SQLConf.COALESCE_PARTITIONS_MIN_PARTITION_NUM());
    boolean parallelismFirst =
        (Boolean) conf.getConf(SQLConf.COALESCE_PARTITIONS_PARALLELISM_FIRST());
    int minPartitions =
        minNumber.isDefined()
            ? (Integer) minNumber.get()
            : parallelismFirst ? sc.defaultParallelism() : 1;
    long advisory = (Long) conf.getConf(SQLConf.ADVISORY_PARTITION_SIZE_IN_BYTES());
    long minSize = (Long) conf.getConf(SQLConf.COALESCE_PARTITIONS_MIN_PARTITION_SIZE());
    if (Utils.isTesting()) {
      // Spark's own tests set small advisory sizes; its rule keeps the minimum under a fifth.
      minSize = Math.min(minSize, advisory / 5);
    }
    List<Option<Seq<ShufflePartitionSpec>>> none = new ArrayList<>();
    stats.forEach(x -> none.add(Option.empty()));
    return LineShim.coalescePartitions(
        Scala.seq(stats), Scala.seq(none), advisory, minPartitions, minSize);
  }

  /** The read bounds of coalesced specs ({@code [0, ..., partitions]}). */
  static int[] bounds(Seq<ShufflePartitionSpec> cut) {
    int[] bounds = new int[cut.size() + 1];
    for (int i = 0; i < cut.size(); i++) {
      CoalescedPartitionSpec s = (CoalescedPartitionSpec) cut.apply(i);
      bounds[i] = s.startReducerIndex();
      bounds[i + 1] = s.endReducerIndex();
    }
    return bounds;
  }

  /** The shuffles Spark's own coalescing reads in ranges, by origin (rebalances aside). */
  static final List<ShuffleOrigin> COALESCED_ORIGINS =
      List.of(ENSURE_REQUIREMENTS$.MODULE$, REPARTITION_BY_COL$.MODULE$);

  /**
   * Whether adaptive execution would read a shuffle of {@code origin} in ranges: not a count the
   * user gave ({@code repartition(n)}, {@code repartitionByRange(n, ...)}).
   */
  static boolean coalesces(ShuffleOrigin origin) {
    return COALESCED_ORIGINS.contains(origin);
  }

  /** Spark's coalesced partition specs for {@code bounds}, the sizes from nowhere. */
  static ShufflePartitionSpec[] specs(int[] bounds) {
    ShufflePartitionSpec[] specs = new ShufflePartitionSpec[bounds.length - 1];
    for (int i = 0; i < specs.length; i++) {
      specs[i] = new CoalescedPartitionSpec(bounds[i], bounds[i + 1], Option.empty());
    }
    return specs;
  }

  static int[] identity(int partitions) {
    int[] bounds = new int[partitions + 1];
    for (int i = 0; i <= partitions; i++) {
      bounds[i] = i;
    }
    return bounds;
  }

  /**
   * Runs the map stage of {@code dependency} and waits for its statistics; a shuffle whose map
   * outputs are all there already (one that {@link ShuffleReuse} shares) is not submitted again.
   */
  static MapOutputStatistics mapStage(ShuffleDependency<?, ?, ?> dependency) {
    if (SparkEnv.get().mapOutputTracker() instanceof MapOutputTrackerMaster tracker
        && tracker.containsShuffle(dependency.shuffleId())
        && tracker.getNumAvailableOutputs(dependency.shuffleId())
            == dependency.rdd().partitions().length) {
      return tracker.getStatistics(dependency);
    }
    try {
      return dependency.rdd().context().submitMapStage(dependency).get();
    } catch (SparkException e) {
      // FutureAction.get wraps the job's failure in "Exception thrown in awaitResult"; adaptive
      // execution's own map stages hand the failure on as it is (a task's
      // SparkArithmeticException, with its error class, say), and so does this one.
      throw AdaptiveCoalesce.<RuntimeException>rethrow(e.getCause() != null ? e.getCause() : e);
    } catch (Exception e) {
      throw AdaptiveCoalesce.<RuntimeException>rethrow(e);
    }
  }

  /**
   * Rethrows a checked exception unchanged (a failed map stage's exception, which Spark's callers
   * and PySpark match on; a shared shuffle's failure, to those waiting for it), where the method
   * cannot declare it.
   */
  @SuppressWarnings("unchecked")
  static <E extends Throwable> E rethrow(Throwable t) throws E {
    throw (E) t;
  }
}
