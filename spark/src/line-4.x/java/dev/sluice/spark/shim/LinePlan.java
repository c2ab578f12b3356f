package dev.sluice.spark.shim;

import java.util.List;
import org.apache.spark.sql.execution.SparkPlan;
import scala.collection.immutable.IndexedSeq;

/**
 * A physical plan node of Sluice's, Scala 2.13's side: Spark's copy of a node with new children
 * takes Scala 2.13's immutable {@code IndexedSeq} here and 2.12's {@code IndexedSeq} on Spark 3.5,
 * so Sluice's nodes implement {@link #withChildren} over a Java list instead.
 */
public abstract class LinePlan extends SparkPlan {
  private static final long serialVersionUID = 1L;

  @Override
  public final SparkPlan withNewChildrenInternal(IndexedSeq<SparkPlan> newChildren) {
    return withChildren(Scala.asJava(newChildren));
  }

  /** This node with {@code children} in place of its own, in the same order. */
  protected abstract SparkPlan withChildren(List<SparkPlan> children);
}
