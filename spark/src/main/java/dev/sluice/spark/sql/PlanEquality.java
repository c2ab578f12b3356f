package dev.sluice.spark.sql;

import java.util.Objects;
import org.apache.spark.sql.execution.SparkPlan;

/**
 * Structural equality of Sluice's plan nodes, as Spark's case-class nodes compare: same class,
 * equal constructor arguments (the product's elements), children included.
 *
 * <p>Spark finds equal subtrees by their canonical plans: {@code ReuseExchangeAndSubquery} and
 * adaptive execution's stage cache key exchanges by them, {@code sameResult} compares them. A
 * Scala case class compares its arguments; a Java node inherits {@code Object}'s identity, so
 * without this an exchange of Spark's above one of Sluice's nodes never equals its copy (a CTE a
 * query reads twice) and runs its map stage twice, and {@link ShuffleReuse} never finds two equal
 * native nodes above one.
 */
final class PlanEquality {
  private PlanEquality() {}

  /** Whether {@code a} and {@code o} are of one class with equal constructor arguments. */
  static boolean equal(SparkPlan a, Object o) {
    if (a == o) {
      return true;
    }
    if (o == null || o.getClass() != a.getClass()) {
      return false;
    }
    SparkPlan b = (SparkPlan) o;
    for (int i = 0; i < a.productArity(); i++) {
      if (!Objects.equals(a.productElement(i), b.productElement(i))) {
        return false;
      }
    }
    return true;
  }

  /** A hash of {@code a}'s class and constructor arguments, consistent with {@link #equal}. */
  static int hash(SparkPlan a) {
    int h = a.getClass().getName().hashCode();
    for (int i = 0; i < a.productArity(); i++) {
      h = 31 * h + Objects.hashCode(a.productElement(i));
    }
    return h;
  }
}
