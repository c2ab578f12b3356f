package dev.sluice.spark.sql;

import dev.sluice.spark.shim.Scala;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.execution.ColumnarToRowExec;
import org.apache.spark.sql.execution.FileSourceScanExec;
import org.apache.spark.sql.execution.FilterExec;
import org.apache.spark.sql.execution.InputAdapter;
import org.apache.spark.sql.execution.ProjectExec;
import org.apache.spark.sql.execution.RangeExec;
import org.apache.spark.sql.execution.SparkPlan;
import org.apache.spark.sql.execution.WholeStageCodegenExec;
import org.apache.spark.sql.execution.adaptive.TableCacheQueryStageExec;
import org.apache.spark.sql.execution.columnar.InMemoryTableScanExec;

/**
 * Whether every attempt of a plan's tasks reads its rows in the same order: the proof {@link
 * RoundRobinExchangeExec} needs before it deals rows without Spark's sort.
 *
 * <p>Spark's {@code DETERMINATE} level is not that proof: every root RDD is {@code DETERMINATE}
 * unless it says otherwise, including Python RDDs, JDBC reads without an {@code ORDER BY} and data
 * source V2 scans whose row order may change between attempts (SPARK-23207). So the plan itself is
 * checked against an allow-list: its leaves are {@code range} ({@code RangeExec}, rows computed
 * from the partition index) or Spark's scans of files ({@code FileSourceScanExec}: each task reads
 * its list of file splits front to back, and the list is the same on every attempt over the same
 * files); the nodes above them only evaluate deterministic expressions row by row in input order
 * ({@code ProjectExec}, {@code FilterExec}) or only change how rows are carried (whole-stage code
 * generation's {@code WholeStageCodegenExec} and {@code InputAdapter}, {@code ColumnarToRowExec}).
 * A cached table ({@code InMemoryTableScanExec}, which adaptive execution wraps in a {@code
 * TableCacheQueryStageExec}) passes when the plan it caches does: a task reads
 * its partition's stored batches in the order they were built, and a block that was lost is built
 * again by that plan, in the same order. Any other node (a shuffle or query stage read, an
 * existing RDD, a Python or Scala function over partitions, a sort, a join, a V2 scan) fails the
 * proof, and the exchange keeps Spark's sort.
 */
final class StableOrder {
  private StableOrder() {}

  /** Whether {@code plan}'s rows come out in the same order in every attempt of a task. */
  static boolean proven(SparkPlan plan) {
    if (plan instanceof RangeExec || plan instanceof FileSourceScanExec) {
      return plan.children().isEmpty();
    }
    if (plan instanceof ProjectExec p) {
      for (NamedExpression e : Scala.asJava(p.projectList())) {
        if (!((Expression) e).deterministic()) {
          return false;
        }
      }
      return proven(p.child());
    }
    if (plan instanceof FilterExec f) {
      Expression condition = f.condition();
      return condition.deterministic() && proven(f.child());
    }
    if (plan instanceof TableCacheQueryStageExec t) {
      return proven(t.plan());
    }
    if (plan instanceof InMemoryTableScanExec m) {
      return proven(m.relation().cachedPlan());
    }
    if (plan instanceof WholeStageCodegenExec w) {
      return proven(w.child());
    }
    if (plan instanceof InputAdapter a) {
      return proven(a.child());
    }
    if (plan instanceof ColumnarToRowExec c) {
      return proven(c.child());
    }
    return false;
  }
}
