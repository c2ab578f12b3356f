package dev.sluice.spark.shuffle;

import java.lang.reflect.Field;
import org.apache.spark.serializer.Serializer;
import org.apache.spark.sql.execution.metric.SQLMetric;

/**
 * Spark SQL's exchange "data size" metric, which {@code UnsafeRowSerializer} adds each row's size
 * to as it writes it. Rows that skip the serializer ({@link UnsafeRowFastPath}) must be added
 * too: adaptive execution plans joins from this figure (a broadcast join when a side looks
 * small), so it must be exactly what Spark's own writer reports. Loaded only for Spark SQL
 * shuffles, so the plugin needs Spark SQL on the class path only for them.
 */
public final class RowDataSize {
  private final SQLMetric metric;
  private long bytes;

  private RowDataSize(SQLMetric metric) {
    this.metric = metric;
  }

  /**
   * The metric of {@code serializer} (an {@code UnsafeRowSerializer}), or null when it has none.
   * A serializer without the field is refused: the fast path would report wrong sizes.
   */
  static RowDataSize of(Serializer serializer) {
    SQLMetric m;
    try {
      Field f = serializer.getClass().getDeclaredField("dataSize");
      f.setAccessible(true);
      m = (SQLMetric) f.get(serializer);
    } catch (ReflectiveOperationException | RuntimeException e) {
      throw new IllegalStateException(
          "Sluice: cannot read the data size metric of " + serializer.getClass().getName(), e);
    }
    return m == null ? null : new RowDataSize(m);
  }

  /** Counts one row of {@code size} bytes (the row, not the serializer's 4-byte framing). */
  void add(int size) {
    bytes += size;
  }

  /** Adds the rows counted so far to the metric. */
  void publish() {
    if (bytes > 0) {
      metric.add(bytes);
      bytes = 0;
    }
  }
}
