package dev.sluice.spark.shim;

import java.util.ArrayDeque;
import java.util.Collections;
import java.util.Deque;
import java.util.IdentityHashMap;
import java.util.Set;
import org.apache.spark.SparkContext;
import org.apache.spark.SparkEnv;
import org.apache.spark.sql.execution.DoNotCleanup$;
import org.apache.spark.sql.execution.QueryExecution;
import org.apache.spark.sql.execution.RemoveShuffleFiles$;
import org.apache.spark.sql.execution.SQLExecution$;
import org.apache.spark.sql.execution.ShuffleCleanupMode;
import org.apache.spark.sql.execution.SkipMigration$;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec;
import org.apache.spark.sql.execution.adaptive.QueryStageExec;
import org.apache.spark.storage.BlockManager;

/**
 * A native node's shuffle under its query's shuffle cleanup mode, the 4.x side.
 *
 * <p>From Spark 4.0 a query may ask that its shuffles' files be removed when it ends ({@code
 * RemoveShuffleFiles}: Spark Connect's {@code spark.sql.shuffleDependency.fileCleanup.enabled},
 * 4.1's {@code spark.sql.classic.shuffleDependency.fileCleanup.enabled}) or that they not be
 * migrated off a decommissioned executor ({@code SkipMigration}). Spark applies the mode as the
 * execution ends, before the action returns, to the shuffles it knows: those adaptive execution
 * recorded in its context as it ran their stages, or, without adaptive execution, the plan's
 * {@code ShuffleExchangeLike} nodes. A native node's shuffle is neither, so the node hands
 * it here as it makes it. The node is looked for in the query's executed plan (through adaptive
 * plans' current plans, query stages and subqueries; not into cached tables, whose shuffles
 * outlive the query, as Spark's do):
 *
 * <ul>
 *   <li>under an adaptive plan, its shuffle id joins that plan's context, so Spark applies the
 *       mode with its own shuffles, at the same moment;
 *   <li>in a plan without adaptive execution, the mode is returned as work for the caller to run
 *       when the execution ends (after the action returned, unlike Spark's own exchanges);
 *   <li>not in the query's plan (a cached table's plan), nothing: the context cleaner removes the
 *       shuffle when nothing refers to it.
 * </ul>
 */
public final class ShuffleCleanup {
  private ShuffleCleanup() {}

  /**
   * Hands {@code shuffleId}, which {@code node} made while running as SQL execution {@code
   * executionId}, to its query's cleanup mode; returns what to run when the execution ends, or
   * null.
   */
  public static Runnable register(
      SparkContext sc, SparkPlan node, long executionId, int shuffleId) {
    QueryExecution query = SQLExecution$.MODULE$.getQueryExecution(executionId);
    if (query == null) {
      return null;
    }
    ShuffleCleanupMode mode = query.shuffleCleanupMode();
    if (mode == DoNotCleanup$.MODULE$) {
      return null;
    }
    Place place = find(query.executedPlan(), node);
    if (place == null) {
      return null;
    }
    if (place.adaptive != null) {
      place.adaptive.context().shuffleIds().put(shuffleId, true);
      return null;
    }
    if (mode == RemoveShuffleFiles$.MODULE$) {
      return () -> sc.shuffleDriverComponents().removeShuffle(shuffleId, false);
    }
    if (mode == SkipMigration$.MODULE$) {
      BlockManager blocks = SparkEnv.get().blockManager();
      return () -> blocks.migratableResolver().addShuffleToSkip(shuffleId);
    }
    return null;
  }

  /** Where a node was found: under {@code adaptive}, or in no adaptive plan when null. */
  private record Place(AdaptiveSparkPlanExec adaptive) {}

  /** A plan still to look through, and the nearest adaptive plan above it. */
  private record Pending(SparkPlan plan, AdaptiveSparkPlanExec adaptive) {}

  /** {@code node}'s place in {@code root}, by identity, or null where it is not there. */
  private static Place find(SparkPlan root, SparkPlan node) {
    Set<SparkPlan> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    Deque<Pending> todo = new ArrayDeque<>();
    todo.push(new Pending(root, null));
    while (!todo.isEmpty()) {
      Pending p = todo.pop();
      SparkPlan plan = p.plan;
      if (plan == null || !seen.add(plan)) {
        continue;
      }
      if (plan == node) {
        return new Place(p.adaptive);
      }
      AdaptiveSparkPlanExec adaptive = p.adaptive;
      if (plan instanceof AdaptiveSparkPlanExec a) {
        adaptive = a;
        todo.push(new Pending(a.executedPlan(), a));
      } else if (plan instanceof QueryStageExec stage) {
        todo.push(new Pending(stage.plan(), adaptive));
      }
      for (SparkPlan child : Scala.asJava(plan.children())) {
        todo.push(new Pending(child, adaptive));
      }
      for (SparkPlan sub : Scala.asJava(plan.subqueries())) {
        todo.push(new Pending(sub, adaptive));
      }
    }
    return null;
  }
}
