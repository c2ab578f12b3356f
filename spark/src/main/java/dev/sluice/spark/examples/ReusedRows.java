package dev.sluice.spark.examples;

import java.util.List;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;

/**
 * For the tests: whether a shuffle reader's reused row survives the question "is there another
 * row?". Spark SQL's readers hand out one row object, valid until the next {@code next()}; an
 * operator may ask {@code hasNext()} before it is done with the row. A reader that decodes the
 * next block into the bytes the row points at would change the row under it.
 */
public final class ReusedRows {
  private ReusedRows() {}

  /**
   * Walks every partition of {@code df}'s rows as its physical plan hands them out, asks {@code
   * hasNext()} after each row, and counts the rows whose bytes changed meanwhile (zero for a
   * correct reader), and the rows walked.
   */
  public static long[] changedByHasNext(Dataset<Row> df) {
    return df.queryExecution()
        .toRdd()
        .toJavaRDD()
        .mapPartitions(
            it -> {
              long changed = 0;
              long rows = 0;
              while (it.hasNext()) {
                InternalRow r = it.next();
                InternalRow before = r.copy();
                it.hasNext();
                if (!r.equals(before)) {
                  changed++;
                }
                rows++;
              }
              return List.of(new long[] {changed, rows}).iterator();
            })
        .reduce((a, b) -> new long[] {a[0] + b[0], a[1] + b[1]});
  }
}
