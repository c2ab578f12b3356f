package dev.sluice.spark.shim;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StringType;

/**
 * Which strings Sluice's native keys take, Spark 3.5's side: no collations, every string equals
 * and orders by its UTF-8 bytes ({@code src/line-4.x/java}'s class asks the collation).
 */
public final class Strings {
  private Strings() {}

  /** Whether {@code t} is a string type whose values are equal exactly when their bytes are. */
  public static boolean binaryEquality(DataType t) {
    return t instanceof StringType;
  }

  /** Whether {@code t} is a string type whose values order as their bytes do. */
  public static boolean binaryOrdering(DataType t) {
    return t instanceof StringType;
  }
}
