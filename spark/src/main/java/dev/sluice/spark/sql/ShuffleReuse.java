package dev.sluice.spark.sql;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutionException;
import java.util.function.BiFunction;
import java.util.function.Supplier;
import org.apache.spark.MapOutputStatistics;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.AttributeReference;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.execution.SQLExecution$;
import org.apache.spark.sql.execution.SparkPlan;
import scala.Option;
import scala.collection.immutable.Seq;
import scala.runtime.AbstractPartialFunction;

/**
 * One shuffle for equal native nodes of one query, as Spark's {@code ReuseExchangeAndSubquery}
 * gives its own exchanges one.
 *
 * <p>The optimizer copies a subquery's plan wherever the subquery is used: TPC-H Q18 joins twice
 * with {@code SELECT l_orderkey ... GROUP BY l_orderkey HAVING sum(l_quantity) > 300}. Under the
 * sort shuffle the second copy's exchange becomes a {@code ReusedExchange} and lineitem is scanned
 * and aggregated once; a native node is not an exchange, so Spark's rule leaves both copies, and
 * each would run its own map stage over the whole table. Here a node asks for its shuffle by a key
 * that says what the shuffle computes (its child's canonical plan and the map side's work with
 * attributes replaced by their positions); within one query ({@link QueryToken}: its subqueries
 * and adaptive execution's re-plans included) of one SQL execution, equal keys get the same
 * shuffle, so its map stage runs once and each node reads it, and the entries of an execution are
 * dropped when Spark reports its end ({@link ExecutionEnds}). The map stage of a shared
 * aggregate's shuffle runs on its own, once ({@link Shuffle#materialize}), and so does a shared
 * global sort's ({@link SluiceSortExchangeExec}) where its reads are coalesced; a shared round
 * robin's ({@link RoundRobinExchangeExec}), or a sort's read uncut, runs as a parent stage of the
 * jobs that read it, never submitted alone. The keys of the three kinds never equal each other's.
 */
public final class ShuffleReuse {
  /** Shuffles by execution id, then by key. */
  private static final Map<String, Map<Object, CompletableFuture<Shuffle>>> BY_EXECUTION =
      new ConcurrentHashMap<>();

  private ShuffleReuse() {}

  /**
   * A native node's shuffle and its map stage, run once whoever asks first.
   *
   * <p>Spark's scheduler must never see a map stage submitted on its own ({@code submitMapStage})
   * while a job that runs it as a parent stage is active (its {@code handleMapStageSubmitted}
   * fails on a stage another job created, and stops the context). A shared shuffle could be both:
   * one copy below a broadcast whose job runs on another thread, another copy taking statistics
   * for coalescing. So every aggregate node runs its shuffle's map stage through {@link
   * #materialize} before it hands out the reads: the first caller submits it, a concurrent one
   * waits for it, and a job that reads the shuffle later finds its map outputs written.
   */
  static final class Shuffle {
    private final ShuffleDependency<Object, Object, Object> dependency;
    private Option<MapOutputStatistics> stats;

    Shuffle(ShuffleDependency<Object, Object, Object> dependency) {
      this.dependency = dependency;
    }

    /** The shuffle's dependency, which each node's reads follow. */
    ShuffleDependency<Object, Object, Object> dependency() {
      return dependency;
    }

    /**
     * Runs the map stage, once, and returns its statistics; none when the map side has no
     * partitions.
     */
    synchronized Option<MapOutputStatistics> materialize() {
      if (stats == null) {
        stats =
            dependency.rdd().partitions().length == 0
                ? Option.empty()
                : Option.apply(AdaptiveCoalesce.mapStage(dependency));
      }
      return stats;
    }
  }

  /**
   * The shuffle of {@code key} for {@code node} in the current SQL execution: one made earlier by
   * an equal key of the same query ({@link QueryToken}), or {@code make}'s ({@link #once}).
   * Outside a running SQL execution, or for a node whose query is not known, each call makes its
   * own.
   */
  static Shuffle shared(
      SparkPlan node, Object key, Supplier<ShuffleDependency<Object, Object, Object>> make) {
    SparkContext sc = node.sparkContext();
    String id = sc.getLocalProperty(SQLExecution$.MODULE$.EXECUTION_ID_KEY());
    Object query = QueryToken.of(node);
    if (id == null || query == null || !ExecutionEnds.running(id)) {
      return new Shuffle(make.get());
    }
    Map<Object, CompletableFuture<Shuffle>> shuffles = BY_EXECUTION.get(id);
    if (shuffles == null) {
      // Outside the map's update: the call may drop an old context's entries.
      ExecutionEnds.at(sc, id, () -> BY_EXECUTION.remove(id));
      shuffles = BY_EXECUTION.computeIfAbsent(id, k -> new ConcurrentHashMap<>());
    }
    return once(shuffles, List.of(query, key), make);
  }

  /**
   * The shuffle of {@code key} in {@code shuffles}, made once: a {@code ShuffleDependency} registers
   * its shuffle as it is built, so two equal nodes racing (one below a broadcast planned on another
   * thread) must not both build one. The first caller makes it and a concurrent one waits for it
   * (interruptibly: a cancelled query's thread stops waiting); a make that fails hands its failure
   * to those waiting and leaves the key to the next caller. Making a shuffle plans its node's
   * child, whose own native nodes ask here for keys that differ from this one (a child's plan is
   * smaller than its parent's), so no caller waits for a shuffle its own making needs.
   */
  static Shuffle once(
      Map<Object, CompletableFuture<Shuffle>> shuffles,
      Object key,
      Supplier<ShuffleDependency<Object, Object, Object>> make) {
    CompletableFuture<Shuffle> mine = new CompletableFuture<>();
    CompletableFuture<Shuffle> known = shuffles.putIfAbsent(key, mine);
    if (known == null) {
      try {
        Shuffle made = new Shuffle(make.get());
        mine.complete(made);
        return made;
      } catch (Throwable t) { // Scala code may throw a checked exception undeclared
        shuffles.remove(key, mine);
        mine.completeExceptionally(t);
        throw AdaptiveCoalesce.<RuntimeException>rethrow(t);
      }
    }
    try {
      return known.get();
    } catch (ExecutionException e) {
      throw AdaptiveCoalesce.<RuntimeException>rethrow(e.getCause());
    } catch (InterruptedException e) {
      throw AdaptiveCoalesce.<RuntimeException>rethrow(e);
    }
  }

  /** Executions whose shuffles are held (for tests). */
  public static int executionsHeld() {
    return BY_EXECUTION.size();
  }

  /**
   * {@code exprs} with each attribute of {@code input} replaced by its position, canonicalized:
   * equal for two copies of a plan whatever their expression ids.
   */
  static List<Expression> positional(Seq<? extends Expression> exprs, Seq<Attribute> input) {
    AbstractPartialFunction<Expression, Expression> bind =
        byPosition(input, (i, a) -> new BoundReference(i, a.dataType(), a.nullable()));
    List<Expression> out = new ArrayList<>();
    exprs.foreach(e -> out.add(e.transformUp(bind).canonicalized()));
    return out;
  }

  /**
   * A rule for {@code transformUp}: each reference to the attribute at position {@code i} of
   * {@code input} becomes {@code to(i, reference)}; every other expression stays.
   */
  static AbstractPartialFunction<Expression, Expression> byPosition(
      Seq<Attribute> input, BiFunction<Integer, AttributeReference, Expression> to) {
    return new AbstractPartialFunction<>() {
      @Override
      public boolean isDefinedAt(Expression e) {
        return e instanceof AttributeReference;
      }

      @Override
      public Expression apply(Expression e) {
        AttributeReference a = (AttributeReference) e;
        for (int i = 0; i < input.size(); i++) {
          if (input.apply(i).exprId().equals(a.exprId())) {
            return to.apply(i, a);
          }
        }
        return a;
      }
    };
  }
}
