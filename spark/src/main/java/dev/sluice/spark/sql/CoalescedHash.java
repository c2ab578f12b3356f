package dev.sluice.spark.sql;

import dev.sluice.spark.shim.Scala;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.catalyst.plans.physical.CoalescedBoundary;
import org.apache.spark.sql.catalyst.plans.physical.CoalescedHashPartitioning;
import org.apache.spark.sql.catalyst.plans.physical.HashPartitioning;
import org.apache.spark.sql.catalyst.plans.physical.Partitioning;

/**
 * A hash partitioning read in coalesced ranges, as Spark's coalesced shuffle read reports it:
 * {@code CoalescedHashPartitioning}, which Spark has from 3.5.1 and 4.0 (SPARK-45592). Spark 3.5.0
 * has no such class, and its own coalesced read claims a hash partitioning of fewer partitions,
 * which the rows' placement does not hold; there a coalesced native read is only so many
 * partitions ({@link #AVAILABLE} false), and a parent that needs the keys' placement shuffles
 * again. This class alone names Spark's two classes, so that on 3.5.0 it is loaded but they are
 * not.
 */
final class CoalescedHash {
  private CoalescedHash() {}

  /** Whether this Spark has {@code CoalescedHashPartitioning}. */
  static final boolean AVAILABLE = present();

  private static boolean present() {
    try {
      Class.forName(
          "org.apache.spark.sql.catalyst.plans.physical.CoalescedHashPartitioning",
          false,
          HashPartitioning.class.getClassLoader());
      return true;
    } catch (ClassNotFoundException | LinkageError e) {
      return false;
    }
  }

  /** {@code h} read in the ranges between consecutive {@code bounds}; only if {@link #AVAILABLE}. */
  static Partitioning of(HashPartitioning h, List<Integer> bounds) {
    List<CoalescedBoundary> ranges = new ArrayList<>();
    for (int i = 0; i + 1 < bounds.size(); i++) {
      ranges.add(new CoalescedBoundary(bounds.get(i), bounds.get(i + 1)));
    }
    return new CoalescedHashPartitioning(h, Scala.seq(ranges));
  }
}
