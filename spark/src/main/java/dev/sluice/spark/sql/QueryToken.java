package dev.sluice.spark.sql;

import dev.sluice.spark.shim.Scala;
import java.util.ArrayDeque;
import java.util.Collections;
import java.util.Deque;
import java.util.IdentityHashMap;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.ReturnAnswer;
import org.apache.spark.sql.catalyst.trees.TreeNodeTag;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.SparkStrategy;
import org.apache.spark.sql.execution.adaptive.LogicalQueryStage;
import scala.Option;
import scala.collection.immutable.Seq;

/**
 * Which query a native node was planned for: a number on the logical nodes a query plans from,
 * which {@link ShuffleReuse} adds to a node's key, so that only equal nodes of one query share a
 * shuffle.
 *
 * <p>An SQL execution id does not name one query: Spark hands it to every job its thread starts
 * while the execution runs, so two {@code df.rdd} queries inside one {@code foreachBatch} call
 * share it, and a second query over an input that changed in between would read the first one's
 * shuffle. Spark plans each query from a copy of its optimized plan ({@code QueryExecution}'s
 * {@code optimizedPlan.clone()}, a tree of new nodes), and its physical nodes keep a link to the
 * logical node they came from, which Sluice's nodes take over. This strategy, first among Spark's
 * planning strategies and planning nothing itself, sees each planning's root ({@code
 * ReturnAnswer}) and numbers the tree below it:
 *
 * <ul>
 *   <li>a query's own copy carries no number yet and gets a new one;
 *   <li>a subquery's plan is planned later from a copy of the plan inside the query's expression,
 *       so the query's number is put on those plans too (overwriting an earlier query's: a
 *       DataFrame's plan may sit in many queries), and their copies carry it;
 *   <li>adaptive execution plans again from the query's tree, with finished stages in it: a node
 *       it made anew (a join with a new hint, the stages' wrappers) takes the number of the tree's
 *       root or, where the root itself is new, of a finished stage's plan;
 *   <li>a plan with a new root and no stage (dynamic partition pruning's aggregate over a join's
 *       side) gets a new number, which at worst shares nothing.
 * </ul>
 *
 * A node whose logical link carries no number shares nothing ({@link #of}).
 */
public final class QueryToken extends SparkStrategy {
  /** A query's number on each logical node planned for it. */
  static final TreeNodeTag<Object> TAG = new TreeNodeTag<>("sluice.query");

  private static final AtomicLong NEXT = new AtomicLong();

  /** What the strategy plans: nothing. */
  private static final Seq<SparkPlan> NONE = Scala.seq(List.of());

  @Override
  public Seq<SparkPlan> apply(LogicalPlan plan) {
    if (plan instanceof ReturnAnswer r) {
      number(r.child());
    }
    return NONE;
  }

  /** The number of the query {@code node} was planned for, or null. */
  static Object of(SparkPlan node) {
    Option<LogicalPlan> link = node.logicalLink();
    if (link.isEmpty()) {
      return null;
    }
    Option<Object> token = link.get().getTagValue(TAG);
    return token.isDefined() ? token.get() : null;
  }

  /** Numbers {@code root}'s tree and the plans of its subqueries, as the class says. */
  static void number(LogicalPlan root) {
    Object token = tokenOf(root);
    if (token == null) {
      token = stageToken(root);
    }
    if (token == null) {
      token = NEXT.incrementAndGet();
    }
    Set<LogicalPlan> seen = Collections.newSetFromMap(new IdentityHashMap<>());
    Deque<LogicalPlan> todo = new ArrayDeque<>();
    todo.push(root);
    while (!todo.isEmpty()) {
      LogicalPlan p = todo.pop();
      if (!seen.add(p)) {
        continue; // a plan two expressions hold
      }
      if (!token.equals(tokenOf(p))) {
        p.setTagValue(TAG, token);
      }
      Scala.asJava(p.children()).forEach(todo::push);
      Scala.asJava(p.subqueries()).forEach(todo::push);
    }
  }

  /** The number on the plan of the first finished stage in {@code root}'s tree, or null. */
  private static Object stageToken(LogicalPlan root) {
    Deque<LogicalPlan> todo = new ArrayDeque<>();
    todo.push(root);
    while (!todo.isEmpty()) {
      LogicalPlan p = todo.pop();
      if (p instanceof LogicalQueryStage s) {
        Object token = tokenOf(s.logicalPlan());
        if (token != null) {
          return token;
        }
      }
      Scala.asJava(p.children()).forEach(todo::push);
    }
    return null;
  }

  private static Object tokenOf(LogicalPlan p) {
    Option<Object> token = p.getTagValue(TAG);
    return token.isDefined() ? token.get() : null;
  }
}
