package dev.sluice.spark.sql;

import dev.sluice.spark.SluiceShuffleManager;
import dev.sluice.spark.api.SluiceSetting;
import dev.sluice.spark.metrics.SluiceMetrics;
import dev.sluice.spark.shim.LineShim;
import dev.sluice.spark.shim.Scala;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.PlanExpression;
import org.apache.spark.sql.catalyst.plans.physical.BroadcastDistribution;
import org.apache.spark.sql.catalyst.plans.physical.Distribution;
import org.apache.spark.sql.catalyst.plans.physical.UnknownPartitioning;
import org.apache.spark.sql.catalyst.plans.physical.UnspecifiedDistribution$;
import org.apache.spark.sql.catalyst.rules.Rule;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.UnionExec;
import org.apache.spark.sql.execution.exchange.Exchange;
import org.apache.spark.sql.execution.joins.BroadcastNestedLoopJoinExec;
import org.apache.spark.sql.execution.joins.CartesianProductExec;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;
import scala.collection.immutable.Seq;

/**
 * A Sluice planner rule: inert unless the shuffle manager is Sluice, the engine can run the rule's
 * nodes here, and the rule's setting (read from the session's SQL conf, so a session can change it
 * between queries) lets it run ({@link #enabled}); then it rewrites the plan bottom-up, offering
 * each node, its children rewritten first, to {@link #replace}.
 */
abstract class SluiceRule extends Rule<SparkPlan> {
  private static final Logger LOG = LoggerFactory.getLogger(SluiceRule.class);

  /** Spark's setting (internal, from 3.2) for adaptive execution's reads of the final stage. */
  static final String FINAL_STAGE_OPTIMIZATIONS =
      "spark.sql.adaptive.applyFinalStageShuffleOptimizations";

  /**
   * Spark's settings (4.0 on; the first two Spark Connect's in 4.0) that ask for a query's shuffles
   * to be cleaned up as it ends, each off by default.
   */
  static final List<String> SHUFFLE_CLEANUP_SETTINGS =
      List.of(
          "spark.sql.shuffleDependency.fileCleanup.enabled",
          "spark.sql.shuffleDependency.skipMigration.enabled",
          "spark.sql.classic.shuffleDependency.fileCleanup.enabled",
          "spark.sql.connect.shuffleDependency.fileCleanup.enabled",
          "spark.sql.thriftserver.shuffleDependency.fileCleanup.enabled");

  /** The setting that turns the rule off. */
  abstract SluiceSetting setting();

  /** Whether the setting's value (the session's, or its default) lets the rule run at all. */
  boolean enabled(String value) {
    return setting().flag(value);
  }

  /**
   * Why the engine cannot run the rule's nodes under {@code conf}, or null if it can: by default,
   * why Sluice would not run a shuffle (the nodes' shuffles are plain row shuffles).
   */
  String fallbackReason(SparkConf conf) {
    return SluiceShuffleManager.fallbackReason(conf);
  }

  /**
   * The node's native form, or the node itself; a {@code pinned} node must keep its declared
   * partition count (see {@link #pinsChild}).
   */
  abstract SparkPlan replace(SparkPlan node, boolean pinned);

  @Override
  public final SparkPlan apply(SparkPlan plan) {
    SparkEnv env = SparkEnv.get();
    if (env == null
        || !(env.shuffleManager() instanceof SluiceShuffleManager)
        || !enabled(conf().getConfString(setting().key, setting().defaultValue))
        || fallbackReason(env.conf()) != null
        || cleanupWithoutAdaptive()) {
      return plan;
    }
    return rewrite(plan, finalStagePinned(), true, false);
  }

  /**
   * Whether the plan is made without adaptive execution for a session that asks for its queries'
   * shuffles to be cleaned up as each ends ({@link #SHUFFLE_CLEANUP_SETTINGS}): Spark then finds
   * the shuffles to clean among the plan's exchanges, which a native node is not, and would clean
   * a native node's shuffle only after the action returned ({@code ShuffleCleanup}); under
   * adaptive execution a native node's shuffle joins Spark's own, so the rules run.
   */
  private boolean cleanupWithoutAdaptive() {
    if (conf().adaptiveExecutionEnabled()) {
      return false;
    }
    for (String key : SHUFFLE_CLEANUP_SETTINGS) {
      if (Boolean.parseBoolean(conf().getConfString(key, "false").trim())) {
        return true;
      }
    }
    return false;
  }

  /**
   * Whether the nodes of the plan's final stage (from its root down to the first exchange) must
   * keep their declared partition counts: where adaptive execution leaves the final stage's
   * shuffle reads alone ({@code spark.sql.adaptive.applyFinalStageShuffleOptimizations} off), as
   * Spark plans a query it caches. A later query reads the cached rows with the partitioning the
   * cached plan declares, and a join there zips them with its other side.
   */
  private boolean finalStagePinned() {
    return !Boolean.parseBoolean(conf().getConfString(FINAL_STAGE_OPTIMIZATIONS, "true"));
  }

  /**
   * {@code plan} with its children rewritten, then itself offered to {@link #replace}; {@code
   * finalStage} while no exchange is above it, {@code exploding} while a join that meets each row
   * with every row of its other side is above it in its stage, or below a join above it that zips
   * the partitions of its side with another's ({@link #leftToSpark}). Pinned besides what {@link
   * #pinsChild} pins: every node where adaptive execution is off when the plan is made (nothing is
   * coalesced then, nor later when the plan runs), and in the final stage a node whose partition
   * count a repartition ending the query fixes ({@link FixedPartitions}).
   */
  private SparkPlan rewrite(SparkPlan plan, boolean pinned, boolean finalStage, boolean exploding) {
    boolean pin =
        pinned
            || !conf().adaptiveExecutionEnabled()
            || (finalStage && FixedPartitions.fixed(plan));
    boolean childFinal = finalStage && !(plan instanceof Exchange);
    boolean childExploding =
        !(plan instanceof Exchange)
            && (exploding || explodes(plan) || (zipsChildren(plan) && explodesInStage(plan)));
    List<SparkPlan> children = new ArrayList<>();
    boolean changed = false;
    scala.collection.Iterator<SparkPlan> it = plan.children().iterator();
    for (int i = 0; it.hasNext(); i++) {
      SparkPlan c = it.next();
      SparkPlan n = rewrite(c, pinsChild(plan, i, pin), childFinal, childExploding);
      changed |= n != c;
      children.add(n);
    }
    SparkPlan node = changed ? plan.withNewChildren(Scala.seq(children)) : plan;
    if (leftToSpark(exploding)) {
      return node;
    }
    SparkPlan replaced = replace(node, pin);
    return replaced == node ? node : adopt(replaced, node, getClass().getSimpleName());
  }

  /**
   * Whether a node {@code exploding} (below a broadcast nested loop join or a cartesian product in
   * its stage) stays Spark's: from Spark 4.0 adaptive execution cuts the shuffles there to the
   * minimum partition size rather than the advisory size, for more tasks where each row meets
   * every row of the other side, and a native node, which cuts its reads itself, would read them in
   * fewer.
   */
  private boolean leftToSpark(boolean exploding) {
    return exploding
        && conf().adaptiveExecutionEnabled()
        && LineShim.smallerTargetsBelowExplodingJoins();
  }

  /** Whether {@code plan} meets each row of one side with every row of the other. */
  static boolean explodes(SparkPlan plan) {
    return plan instanceof BroadcastNestedLoopJoinExec || plan instanceof CartesianProductExec;
  }

  /**
   * Whether {@code plan} or a node below it in its stage (above the next exchange) {@link
   * #explodes}: adaptive execution cuts all the shuffles that such a join's zipped partitions
   * come from to the smaller size, those of its other side too.
   */
  static boolean explodesInStage(SparkPlan plan) {
    if (explodes(plan)) {
      return true;
    }
    if (plan instanceof Exchange) {
      return false;
    }
    scala.collection.Iterator<SparkPlan> it = plan.children().iterator();
    while (it.hasNext()) {
      if (explodesInStage(it.next())) {
        return true;
      }
    }
    return false;
  }

  /** Whether {@code plan} zips partitions of several children one to one ({@link #pinsChild}). */
  static boolean zipsChildren(SparkPlan plan) {
    for (int i = 0; i < plan.children().size(); i++) {
      if (pinsChild(plan, i, false)) {
        return true;
      }
    }
    return false;
  }

  /**
   * {@code replaced} standing in for {@code node}, or {@code node} when it cannot.
   *
   * <p>A native node takes the place of Spark's nodes only when it gives its parent exactly what
   * they gave: the same output attributes (ids, types, nullability, in order), which every parent
   * expression is bound to. It takes over {@code node}'s link to the logical plan: adaptive
   * execution maps each finished query stage back to the logical node its physical plan came from
   * (the first node below the exchange that has a link); a native node without one would be
   * mapped to the logical plan under the nodes it replaced, and the re-planned query would run
   * those nodes again over the stage's output, whose attributes they no longer find.
   */
  static SparkPlan adopt(SparkPlan replaced, SparkPlan node, String rule) {
    if (!sameOutput(replaced.output(), node.output())) {
      LOG.warn(
          "Sluice: {} leaves {} to Spark SQL: the native form's output {} is not the node's {}",
          rule,
          node.nodeName(),
          replaced.output(),
          node.output());
      return node;
    }
    if (replaced.logicalLink().isEmpty() && node.logicalLink().isDefined()) {
      replaced.setLogicalLink(node.logicalLink().get());
    }
    SluiceMetrics.SQL_NATIVE_NODES.incrementAndGet();
    return replaced;
  }

  /** Whether two outputs are the same attributes, in the same order, of the same types. */
  static boolean sameOutput(scala.collection.Seq<Attribute> a, scala.collection.Seq<Attribute> b) {
    if (a.size() != b.size()) {
      return false;
    }
    for (int i = 0; i < a.size(); i++) {
      Attribute x = a.apply(i);
      Attribute y = b.apply(i);
      if (!x.exprId().equals(y.exprId())
          || !x.dataType().equals(y.dataType())
          || x.nullable() != y.nullable()) {
        return false;
      }
    }
    return true;
  }

  /**
   * Whether {@code plan}'s {@code i}-th child must keep the partition count it declares: below an
   * operator with several children of which this one needs a distribution (a sort-merge or
   * shuffled hash join zips its children's partitions one to one), below a union that zips its
   * children ({@link #zips}), and below any pinned node up to the next exchange (where a new
   * stage starts).
   */
  static boolean pinsChild(SparkPlan plan, int i, boolean pinned) {
    if (plan instanceof Exchange) {
      return false;
    }
    if (pinned) {
      return true;
    }
    if (plan.children().size() < 2) {
      return false;
    }
    if (plan instanceof UnionExec) {
      return zips(plan);
    }
    Distribution d = plan.requiredChildDistribution().apply(i);
    return !(d instanceof UnspecifiedDistribution$ || d instanceof BroadcastDistribution);
  }

  /**
   * Whether {@code union} reads partition {@code i} of every child as its partition {@code i}:
   * from Spark 4.1 ({@code spark.sql.unionOutputPartitioning}, on by default) a union whose
   * children declare one hash partitioning (or one partition each) keeps that partitioning and
   * zips them; any other union, and every union before 4.1, declares an unknown partitioning and
   * concatenates its children's partitions, which then coalesce each on its own.
   */
  static boolean zips(SparkPlan union) {
    return !(union.outputPartitioning() instanceof UnknownPartitioning);
  }

  /**
   * Whether a native node can evaluate {@code e} itself, on executors: {@code e} is deterministic
   * (Spark seeds {@code rand()} per partition in its own nodes) and holds no subquery. Spark runs a
   * subquery, and hands its result to the expression, only for the expressions of its own plan
   * nodes; a native form that carries a copy of the expression would find the subquery not run
   * ({@code SELECT k, sum(d - (SELECT avg(d) FROM t)) FROM t GROUP BY k}).
   */
  static boolean portable(Expression e) {
    return e.deterministic() && e.find(x -> x instanceof PlanExpression).isEmpty();
  }

  /** {@code it} with {@code f} applied to each element as it is read. */
  static <A, B> java.util.Iterator<B> mapped(
      java.util.Iterator<A> it, java.util.function.Function<A, B> f) {
    return new java.util.Iterator<B>() {
      @Override
      public boolean hasNext() {
        return it.hasNext();
      }

      @Override
      public B next() {
        return f.apply(it.next());
      }
    };
  }
}
