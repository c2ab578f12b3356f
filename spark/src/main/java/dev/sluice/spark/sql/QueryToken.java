package dev.sluice.spark.sql;

import dev.sluice.spark.shim.Scala;
import java.lang.ref.WeakReference;
import java.util.ArrayDeque;
import java.util.Collections;
import java.util.Deque;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.spark.sql.catalyst.expressions.DynamicPruningSubquery;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.SubqueryExpression;
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
 * while the execution runs, so two PySpark {@code df.rdd} queries inside one {@code foreachBatch}
 * call share it, and a second query over an input that changed in between would read the first
 * one's shuffle. Spark plans each query from a copy of its optimized plan ({@code
 * QueryExecution}'s {@code optimizedPlan.clone()}, a tree of new nodes), and its physical nodes
 * keep a link to the logical node they came from, which Sluice's nodes take over. This strategy,
 * ahead of Spark's own planning strategies and planning nothing itself, sees each planning's root
 * ({@code ReturnAnswer}) and numbers the tree below it, those copies (the plans inside a query's
 * expressions are not copied with it and may belong to other queries too: a view's, a
 * DataFrame's; a number left on them would reach every later query that copies them; only
 * non-adaptive dynamic partition pruning plans such a plan itself):
 *
 * <ul>
 *   <li>adaptive execution plans again from the query's tree, with finished stages in it: a node
 *       it made anew (a join with a new hint, the stages' wrappers) takes the number of the tree's
 *       root or, where the root itself is new, of a finished stage's plan;
 *   <li>a subquery is planned after its query, on the same thread, from a copy of the plan inside
 *       the query's expression: a root equal to one of those plans, still unclaimed, that the
 *       latest queries planned on the thread held, takes that query's number (and claims it);
 *   <li>any other tree is a new query and gets a new number; so does a plan with a new root and
 *       no stage (dynamic partition pruning's aggregate over a join's side), which then shares
 *       nothing.
 * </ul>
 *
 * A node whose logical link carries no number (a plan another strategy took before this one saw
 * its root) shares nothing ({@link #of}).
 */
public final class QueryToken extends SparkStrategy {
  /** A query's number on each logical node planned for it. */
  static final TreeNodeTag<Object> TAG = new TreeNodeTag<>("sluice.query");

  /** Subquery plans a thread's latest queries held and no planning has claimed yet, at most. */
  static final int PENDING_MAX = 256;

  private static final AtomicLong NEXT = new AtomicLong();

  /** What the strategy plans: nothing. */
  private static final Seq<SparkPlan> NONE = Scala.seq(List.of());

  /** A subquery plan inside a query's expressions, and that query's number. */
  private record Pending(WeakReference<LogicalPlan> plan, Object token) {}

  /** The subquery plans of the latest queries planned on this thread, newest last. */
  private static final ThreadLocal<Deque<Pending>> PENDING =
      ThreadLocal.withInitial(ArrayDeque::new);

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

  /** Numbers the tree {@code root} is planned from, as the class says. */
  static void number(LogicalPlan root) {
    Object token = tokenOf(root);
    if (token == null) {
      token = stageToken(root);
    }
    if (token == null) {
      token = claim(root);
    }
    if (token == null) {
      token = NEXT.incrementAndGet();
      hold(root, token);
    }
    Deque<LogicalPlan> todo = new ArrayDeque<>();
    todo.push(root);
    while (!todo.isEmpty()) {
      LogicalPlan p = todo.pop();
      if (!token.equals(tokenOf(p))) {
        p.setTagValue(TAG, token);
      }
      Scala.asJava(p.children()).forEach(todo::push);
    }
  }

  /** The number of the query whose subquery plan {@code root} is a copy of, claimed, or null. */
  private static Object claim(LogicalPlan root) {
    Iterator<Pending> newestFirst = PENDING.get().descendingIterator();
    while (newestFirst.hasNext()) {
      Pending p = newestFirst.next();
      LogicalPlan plan = p.plan().get();
      if (plan == null) {
        newestFirst.remove();
      } else if (plan.equals(root)) {
        newestFirst.remove();
        return p.token();
      }
    }
    return null;
  }

  /**
   * Holds the subquery plans in {@code root}'s tree (and theirs, nested) for the plannings of the
   * query's subqueries to claim; dynamic partition pruning's are planned otherwise.
   */
  private static void hold(LogicalPlan root, Object token) {
    Deque<Pending> pending = PENDING.get();
    Set<LogicalPlan> held = Collections.newSetFromMap(new IdentityHashMap<>());
    Deque<LogicalPlan> todo = new ArrayDeque<>();
    todo.push(root);
    while (!todo.isEmpty()) {
      LogicalPlan p = todo.pop();
      Scala.asJava(p.children()).forEach(todo::push);
      Deque<Expression> exprs = new ArrayDeque<>(Scala.asJava(p.expressions()));
      while (!exprs.isEmpty()) {
        Expression e = exprs.pop();
        if (e instanceof SubqueryExpression s
            && !(e instanceof DynamicPruningSubquery)
            && held.add(s.plan())) { // once: adaptive execution plans one expression id once
          pending.addLast(new Pending(new WeakReference<>(s.plan()), token));
          if (pending.size() > PENDING_MAX) {
            pending.removeFirst();
          }
          todo.push(s.plan());
        }
        Scala.asJava(e.children()).forEach(exprs::push);
      }
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
