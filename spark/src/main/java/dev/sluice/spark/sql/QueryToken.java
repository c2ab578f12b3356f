package dev.sluice.spark.sql;

import dev.sluice.spark.shim.Scala;
import java.lang.ref.WeakReference;
import java.util.ArrayDeque;
import java.util.Collections;
import java.util.Deque;
import java.util.IdentityHashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;
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
 * DataFrame's; only non-adaptive dynamic partition pruning plans such a plan itself, and the
 * number it leaves there no other planning takes: only a re-plan takes a number from its tree,
 * and a re-plan's tree is its query's copy).
 *
 * <p>What number a tree takes depends on who asked for the planning ({@link Site}: the nearest
 * of Spark's planning callers on the thread's stack):
 *
 * <ul>
 *   <li>a query ({@code QueryExecution}; also a planning with none of these classes on the
 *       stack): a new number, always; the query holds its subquery plans for its subqueries to
 *       claim, and what earlier queries on the thread held and left unclaimed is dropped;
 *   <li>a subquery ({@code InsertAdaptiveSparkPlan.compileSubquery}, {@code PlanSubqueries}),
 *       planned after its query, on the same thread, from a copy of the plan inside the query's
 *       expression: the number of the query whose held plan its root equals (claimed, so each
 *       held plan numbers one planning), else a new number;
 *   <li>adaptive execution's re-plan of a query's tree, with finished stages in it: the number of
 *       the tree's root or, where the root is new, of a finished stage's plan, else a new one;
 *   <li>dynamic partition pruning's plannings of a join side or of an aggregate over it: a new
 *       number, which then shares nothing; a held plan its root equals (the join side, held by
 *       its query, which only adaptive execution plans as a subquery) is dropped.
 * </ul>
 *
 * A held plan's number is taken only by a subquery's planning, never by a query's: a query whose
 * plan equals a subquery plan an earlier query held (a view's, a DataFrame's) gets a number of its
 * own. What a subquery claims is what the thread's latest query held, which is its own query's
 * unless the two were prepared apart (a query's {@code sparkPlan} taken by hand, another query
 * planned, then the first one run): its subquery can then claim an equal plan the other query
 * held and left unclaimed. A node whose logical link carries no number (a plan another strategy
 * took before this one saw its root) shares nothing ({@link #of}).
 */
public final class QueryToken extends SparkStrategy {
  /** A query's number on each logical node planned for it. */
  static final TreeNodeTag<Object> TAG = new TreeNodeTag<>("sluice.query");

  /** Subquery plans a thread's latest query held and no planning has claimed yet, at most. */
  static final int PENDING_MAX = 256;

  private static final AtomicLong NEXT = new AtomicLong();

  /** What the strategy plans: nothing. */
  private static final Seq<SparkPlan> NONE = Scala.seq(List.of());

  /** A subquery plan inside a query's expressions, and that query's number. */
  private record Pending(WeakReference<LogicalPlan> plan, Object token) {}

  /**
   * The subquery plans (nested ones too) that the latest query planned on this thread holds for
   * its subqueries' plannings, newest last.
   */
  private static final ThreadLocal<Deque<Pending>> PENDING =
      ThreadLocal.withInitial(ArrayDeque::new);

  /** Who asked for a planning. */
  enum Site {
    QUERY,
    SUBQUERY,
    REPLAN,
    PRUNING
  }

  /**
   * Spark's classes that plan a tree from its root, by their name: the innermost of them on the
   * stack names the planning's {@link Site} (the same names on every Spark line Sluice builds
   * for).
   */
  static final Map<String, Site> SITES =
      Map.of(
          "org.apache.spark.sql.execution.QueryExecution", Site.QUERY,
          "org.apache.spark.sql.execution.adaptive.InsertAdaptiveSparkPlan", Site.SUBQUERY,
          "org.apache.spark.sql.execution.PlanSubqueries", Site.SUBQUERY,
          "org.apache.spark.sql.execution.adaptive.AdaptiveSparkPlanExec", Site.REPLAN,
          "org.apache.spark.sql.execution.dynamicpruning.PlanDynamicPruningFilters", Site.PRUNING,
          "org.apache.spark.sql.execution.adaptive.PlanAdaptiveDynamicPruningFilters",
              Site.PRUNING);

  @Override
  public Seq<SparkPlan> apply(LogicalPlan plan) {
    if (plan instanceof ReturnAnswer r) {
      number(r.child(), site());
    }
    return NONE;
  }

  /**
   * Who asked for the planning running on this thread: the innermost frame of a class in {@link
   * #SITES} (a Scala partial function's class, {@code Outer$$anonfun$...}, counts as its outer
   * class; a Scala lambda is a method of its outer class already; the companion {@code
   * QueryExecution$}, whose {@code createSparkPlan} and {@code prepareExecutedPlan} all callers
   * but adaptive re-plans go through, is not {@code QueryExecution}); a query where none is on
   * the stack.
   */
  static Site site() {
    return StackWalker.getInstance()
        .walk(
            frames ->
                frames
                    .map(f -> SITES.get(outerClass(f.getClassName())))
                    .filter(Objects::nonNull)
                    .findFirst())
        .orElse(Site.QUERY);
  }

  private static String outerClass(String name) {
    int closure = name.indexOf("$$");
    return closure < 0 ? name : name.substring(0, closure);
  }

  /** The number of the query {@code node} was planned for, or null. */
  static Object of(SparkPlan node) {
    Option<LogicalPlan> link = node.logicalLink();
    return link.isDefined() ? tokenOf(link.get()) : null;
  }

  /** Numbers the tree {@code root} is planned from, for a planning {@code site} asked for. */
  static void number(LogicalPlan root, Site site) {
    Object token =
        switch (site) {
          case QUERY -> {
            PENDING.get().clear();
            yield null;
          }
          case SUBQUERY -> claim(root);
          case REPLAN -> {
            Object own = tokenOf(root);
            yield own != null ? own : stageToken(root);
          }
          case PRUNING -> {
            claim(root); // without adaptive execution the held join side itself: not left over
            yield null;
          }
        };
    if (token == null) {
      token = NEXT.incrementAndGet();
      if (site == Site.QUERY || site == Site.SUBQUERY) {
        hold(root, token);
      }
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
   * query's subqueries to claim (adaptive execution plans dynamic partition pruning's join side
   * as it plans a subquery; without it, dynamic pruning's own planning of that plan drops it).
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
        // Once: adaptive execution plans one expression id once.
        if (e instanceof SubqueryExpression s && held.add(s.plan())) {
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
