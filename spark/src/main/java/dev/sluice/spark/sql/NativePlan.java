package dev.sluice.spark.sql;

import dev.sluice.spark.shim.LinePlan;
import java.util.Objects;

/**
 * A plan node of Sluice's SQL rules, equal to another as Spark's case-class nodes are: one class,
 * equal constructor arguments (the product's elements), children included.
 *
 * <p>Spark finds equal subtrees by their canonical plans: {@code ReuseExchangeAndSubquery} and
 * adaptive execution's stage cache key exchanges by them, {@code sameResult} compares them. A
 * Scala case class compares its arguments; a Java node would inherit {@code Object}'s identity, so
 * an exchange of Spark's above one of Sluice's nodes would never equal its copy (a CTE a query
 * reads twice) and would run its map stage twice, and {@link ShuffleReuse} would never find two
 * equal native nodes above one. Transient state (a node's shuffle, the ranges it read) is not an
 * argument and is not compared.
 */
abstract class NativePlan extends LinePlan {
  private static final long serialVersionUID = 1L;

  @Override
  public final boolean equals(Object o) {
    if (this == o) {
      return true;
    }
    if (o == null || o.getClass() != getClass()) {
      return false;
    }
    NativePlan other = (NativePlan) o;
    for (int i = 0; i < productArity(); i++) {
      if (!Objects.equals(productElement(i), other.productElement(i))) {
        return false;
      }
    }
    return true;
  }

  @Override
  public final int hashCode() {
    int h = getClass().getName().hashCode();
    for (int i = 0; i < productArity(); i++) {
      h = 31 * h + Objects.hashCode(productElement(i));
    }
    return h;
  }
}
