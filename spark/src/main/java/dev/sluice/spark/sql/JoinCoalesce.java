package dev.sluice.spark.sql;

import dev.sluice.spark.shim.Scala;
import dev.sluice.spark.shim.Sessions;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.UnaryOperator;
import org.apache.spark.MapOutputStatistics;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.plans.physical.SinglePartition$;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.ApplyColumnarRulesAndInsertTransitions;
import org.apache.spark.sql.execution.CollapseCodegenStages;
import org.apache.spark.sql.execution.ShufflePartitionSpec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.UnionExec;
import org.apache.spark.sql.execution.adaptive.AQEShuffleReadExec;
import org.apache.spark.sql.execution.adaptive.AQEShuffleReadExec$;
import org.apache.spark.sql.execution.adaptive.AQEShuffleReadRule;
import org.apache.spark.sql.execution.adaptive.BroadcastQueryStageExec;
import org.apache.spark.sql.execution.adaptive.CoalesceShufflePartitions;
import org.apache.spark.sql.execution.adaptive.QueryStageExec;
import org.apache.spark.sql.execution.adaptive.ShuffleQueryStageExec;
import org.apache.spark.sql.execution.exchange.ShuffleOrigin;
import org.apache.spark.sql.execution.exchange.ValidateRequirements;
import org.apache.spark.sql.execution.joins.CartesianProductExec;
import scala.Option;
import scala.collection.immutable.Seq;

/**
 * Adaptive execution's coalescing for joins with a native aggregate on a side.
 *
 * <p>Spark's {@code CoalesceShufflePartitions} reads the shuffles below one operator (a sort-merge
 * join's two sides, and whatever joins are below them up to the exchanges) in the same coalesced
 * ranges, but only when every leaf of that subtree is a query stage. A {@link SluiceAggregateExec}
 * runs its shuffle inside the stage, so the scan below it is a leaf too and Spark leaves the whole
 * join at its declared partition count: at Spark's default of 200, 200 tasks for each join and
 * each aggregate where the sort shuffle's plan reads a few coalesced ranges (TPC-H Q18 at scale
 * factor 10: 462 tasks against 63).
 *
 * <p>This rule runs after Spark's among the query stage optimizer rules (on each new stage and on
 * the final one). It collects the same groups as Spark's rule (and, where a union keeps its
 * children's partitioning, from Spark 4.1, the union's children as one group, as a join's
 * sides), taking a pinned native aggregate (one whose partition count a join or such a union
 * relies on) as a leaf: where every leaf of a group is a query
 * stage or such an aggregate and there is at least one aggregate, it runs the aggregates' map
 * stages (as {@link AdaptiveCoalesce} does for an aggregate nothing relies on; {@link
 * ShuffleReuse} makes it the one run of the query), takes their map statistics beside the stages'
 * and cuts the ranges with Spark's own algorithm and settings; each shuffle stage then reads
 * through Spark's {@code AQEShuffleReadExec} and each aggregate in the same ranges, so the join
 * still zips partitions that hold the same keys. A group with a shuffle Spark would not coalesce
 * (a repartition to a given count, a single partition), one already read by an {@code
 * AQEShuffleReadExec}, or any other leaf (a bucketed scan, a cached table) is left as it is.
 */
final class JoinCoalesce extends Rule<SparkPlan> implements AQEShuffleReadRule {
  private final SparkSession session;

  JoinCoalesce(SparkSession session) {
    this.session = session;
  }

  /**
   * The shuffles Spark's own coalescing reads in ranges. Being one of Spark's shuffle read rules,
   * this one is left out of a final stage whose reads adaptive execution leaves alone (a cached
   * query's plan), and what it makes of a final stage is checked against the distribution the
   * query must end in (a repartition to a given count) and dropped where it breaks it.
   */
  @Override
  public Seq<ShuffleOrigin> supportedShuffleOrigins() {
    return Scala.seq(AdaptiveCoalesce.COALESCED_ORIGINS);
  }

  @Override
  public SparkPlan apply(SparkPlan plan) {
    if (!conf().coalesceShufflePartitionsEnabled()) {
      return plan;
    }
    plan = coalesceInputs(plan);
    Map<SparkPlan, Seq<ShufflePartitionSpec>> cuts = new IdentityHashMap<>();
    Map<SparkPlan, Object> keys = new IdentityHashMap<>();
    for (List<SparkPlan> group : groups(plan)) {
      cut(group, cuts, keys);
    }
    return cuts.isEmpty() ? plan : rewrite(plan, cuts, keys);
  }

  /**
   * {@code p} with the input of each pinned native aggregate read as Spark reads a stage's plan:
   * Spark's {@code CoalesceShufflePartitions} over the aggregate's child alone, kept where the
   * child still meets its requirements (Spark's own check after its rule). The aggregate shuffles
   * its input again by its own keys, so only its output's partition count is pinned. Spark's rule
   * does not coalesce that input: it takes the join above and the shuffles below the aggregate as
   * one group, and its check then finds the join's sides cut differently (the aggregate keeps its
   * count), so the aggregate's map side ran one task per partition (TPC-DS q01 at scale factor
   * 10: 200 tasks where the sort shuffle's plan runs 2).
   */
  private SparkPlan coalesceInputs(SparkPlan p) {
    if (p instanceof SluiceAggregateExec a && a.pinned()) {
      SparkPlan child = a.child();
      if (child.exists(n -> n instanceof AQEShuffleReadExec)) {
        return p;
      }
      SparkPlan read = new CoalesceShufflePartitions(session).apply(child);
      return read == child || !ValidateRequirements.validate(read)
          ? p
          : a.withNewChildren(Scala.seq(List.of(read)));
    }
    return p instanceof QueryStageExec ? p : withChildren(p, this::coalesceInputs);
  }

  /** {@code p} with {@code f} applied to each child; {@code p} itself when none changed. */
  private static SparkPlan withChildren(SparkPlan p, UnaryOperator<SparkPlan> f) {
    if (p.children().isEmpty()) {
      return p;
    }
    List<SparkPlan> children = new ArrayList<>();
    boolean changed = false;
    scala.collection.Iterator<SparkPlan> it = p.children().iterator();
    while (it.hasNext()) {
      SparkPlan c = it.next();
      SparkPlan n = f.apply(c);
      changed |= n != c;
      children.add(n);
    }
    return changed ? p.withNewChildren(Scala.seq(children)) : p;
  }

  /**
   * The members of each coalescing group of {@code p} (Spark's {@code collectCoalesceGroups}),
   * with a union's children one group where the union zips them ({@link SluiceRule#zips}): it
   * reads their partitions one to one, so the native aggregates below it, pinned to their
   * declared count, read in one set of ranges.
   */
  private static List<List<SparkPlan>> groups(SparkPlan p) {
    List<List<SparkPlan>> out = new ArrayList<>();
    Seq<SparkPlan> children = Scala.seq(p.children());
    if (children.size() == 1) {
      out.addAll(groups(children.head()));
    } else if ((p instanceof UnionExec && !SluiceRule.zips(p))
        || p instanceof CartesianProductExec) {
      children.foreach(c -> out.addAll(groups(c)));
    } else if (children.size() > 1) {
      List<SparkPlan> members = new ArrayList<>();
      if (leaves(p, members) && members.stream().anyMatch(m -> m instanceof SluiceAggregateExec)) {
        out.add(members);
      }
    }
    return out;
  }

  /**
   * Adds the shuffle stages and pinned native aggregates below {@code p} to {@code members};
   * false when a leaf is neither a query stage nor such an aggregate.
   */
  private static boolean leaves(SparkPlan p, List<SparkPlan> members) {
    if (p instanceof SluiceAggregateExec a) {
      members.add(a);
      return a.pinned();
    }
    if (p instanceof ShuffleQueryStageExec s) {
      members.add(s);
      return true;
    }
    if (p instanceof QueryStageExec) {
      // A broadcast is not read by partition. Any other stage (a cached table's) keeps its
      // partition count, and Spark's own coalescing leaves its group alone too.
      return p instanceof BroadcastQueryStageExec;
    }
    if (p instanceof AQEShuffleReadExec || p.children().isEmpty()) {
      return false;
    }
    return p.children().forall(c -> leaves(c, members));
  }

  /** The ranges of one group's members, into {@code cuts}, where Spark's algorithm gives them. */
  private void cut(
      List<SparkPlan> group,
      Map<SparkPlan, Seq<ShufflePartitionSpec>> cuts,
      Map<SparkPlan, Object> keys) {
    Set<Integer> counts = new HashSet<>();
    for (SparkPlan m : group) {
      if (m instanceof ShuffleQueryStageExec s) {
        ShuffleOrigin origin = s.shuffle().shuffleOrigin();
        if (!s.isMaterialized()
            || !AdaptiveCoalesce.coalesces(origin)
            || ((SparkPlan) s.shuffle()).outputPartitioning() == SinglePartition$.MODULE$) {
          return;
        }
        counts.add(s.shuffle().numPartitions());
      } else {
        counts.add(((SluiceAggregateExec) m).numPartitions());
      }
    }
    if (counts.size() != 1 || counts.iterator().next() <= 1) {
      return;
    }
    List<Option<MapOutputStatistics>> stats = new ArrayList<>();
    for (SparkPlan m : group) {
      if (m instanceof ShuffleQueryStageExec s) {
        stats.add(s.mapStats());
      } else {
        SluiceAggregateExec ready = prepared((SluiceAggregateExec) m);
        stats.add(ready.mapStatistics());
        keys.put(m, ready.shuffleKey());
      }
    }
    if (stats.stream().allMatch(Option::isEmpty)) {
      // No member ran a map task (inputs of no partitions): Spark's coalescing reads such shuffles
      // as one empty range, [0, 0), which a native aggregate's reads, covering all its partitions,
      // cannot take. They stay uncut, as many empty partitions.
      return;
    }
    int partitions = counts.iterator().next();
    Seq<Seq<ShufflePartitionSpec>> specs =
        AdaptiveCoalesce.coalesce(conf(), group.get(0).sparkContext(), stats);
    if (specs.isEmpty() || specs.head().size() == partitions) {
      return;
    }
    for (int i = 0; i < group.size(); i++) {
      int[] b = AdaptiveCoalesce.bounds(specs.apply(i));
      if (b[0] != 0 || b[b.length - 1] != partitions) {
        // Ranges that leave partitions out (none seen from Spark's coalescing when any member has
        // statistics): not a cut the nodes' reads can take.
        return;
      }
    }
    for (int i = 0; i < group.size(); i++) {
      cuts.put(group.get(i), specs.apply(i));
    }
  }

  /**
   * {@code a} with its child prepared for execution as adaptive execution prepares a stage's plan
   * after these rules (columnar transitions, whole-stage code generation), so its map stage can
   * run now.
   */
  private SluiceAggregateExec prepared(SluiceAggregateExec a) {
    SparkPlan child =
        new ApplyColumnarRulesAndInsertTransitions(Sessions.columnarRules(session), false)
            .apply(a.child());
    child = new CollapseCodegenStages(new AtomicInteger(0)).apply(child);
    SluiceAggregateExec ready =
        (SluiceAggregateExec) a.withNewChildren(Scala.seq(List.of(child)));
    // Its map stage runs now, for the node that stays in the plan: its writes show there.
    return ready.sharingMetrics(a);
  }

  /** {@code p} with each member of {@code cuts} reading in its ranges. */
  private static SparkPlan rewrite(
      SparkPlan p, Map<SparkPlan, Seq<ShufflePartitionSpec>> cuts, Map<SparkPlan, Object> keys) {
    Seq<ShufflePartitionSpec> specs = cuts.get(p);
    if (specs != null) {
      return p instanceof SluiceAggregateExec a
          ? a.withCut(AdaptiveCoalesce.bounds(specs), keys.get(p))
          : AQEShuffleReadExec$.MODULE$.apply(p, specs);
    }
    return withChildren(p, c -> rewrite(c, cuts, keys));
  }
}
