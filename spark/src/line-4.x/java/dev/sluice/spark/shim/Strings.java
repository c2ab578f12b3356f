package dev.sluice.spark.shim;

import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StringType;

/**
 * Which strings Sluice's native keys take, the 4.x side: Spark 4.0 added collations, so a string
 * type equals or orders by its bytes only under a binary collation. Spark 3.5 has no collations
 * ({@code src/line-3.5/java}'s class says yes for every string).
 */
public final class Strings {
  private Strings() {}

  /** Whether {@code t} is a string type whose values are equal exactly when their bytes are. */
  public static boolean binaryEquality(DataType t) {
    return t instanceof StringType s && s.supportsBinaryEquality();
  }

  /** Whether {@code t} is a string type whose values order as their bytes do. */
  public static boolean binaryOrdering(DataType t) {
    return t instanceof StringType s && s.supportsBinaryOrdering();
  }
}
