package dev.sluice.spark.sql;

import dev.sluice.spark.shim.Scala;
import dev.sluice.spark.sort.RangeShuffledRDD;
import java.io.Serializable;
import java.util.LinkedHashMap;
import org.apache.spark.SparkContext;
import org.apache.spark.sql.execution.metric.SQLMetric;
import org.apache.spark.sql.execution.metric.SQLMetrics$;
import org.apache.spark.sql.execution.metric.SQLShuffleReadMetricsReporter;
import org.apache.spark.sql.execution.metric.SQLShuffleReadMetricsReporter$;
import org.apache.spark.sql.execution.metric.SQLShuffleWriteMetricsReporter$;
import scala.collection.immutable.Map;

/**
 * The SQL metrics of a native node that owns a shuffle, as Spark's exchange reports them: the
 * shuffle's write and read metrics and the rows' "data size" (the row serializer's count, which
 * adaptive execution plans joins from).
 */
final class ExchangeMetrics implements Serializable {
  private static final long serialVersionUID = 1L;

  final Map<String, SQLMetric> write;
  final Map<String, SQLMetric> read;
  final SQLMetric dataSize;

  ExchangeMetrics(SparkContext sc) {
    write = SQLShuffleWriteMetricsReporter$.MODULE$.createShuffleWriteMetrics(sc);
    read = SQLShuffleReadMetricsReporter$.MODULE$.createShuffleReadMetrics(sc);
    dataSize = SQLMetrics$.MODULE$.createSizeMetric(sc, "data size", -1L);
  }

  /** Reads that report to the read metrics as well as to the task's, as Spark's exchange reads. */
  RangeShuffledRDD.Reporting reads() {
    Map<String, SQLMetric> r = read;
    return task -> new SQLShuffleReadMetricsReporter(task, r);
  }

  /** Every metric by name, for the node's {@code metrics()}. */
  Map<String, SQLMetric> all() {
    java.util.Map<String, SQLMetric> all = new LinkedHashMap<>(Scala.asJava(shuffle()));
    all.put("dataSize", dataSize);
    return Scala.map(all);
  }

  /**
   * The shuffle's write and read metrics by name, for a node whose records are not rows (no "data
   * size").
   */
  Map<String, SQLMetric> shuffle() {
    java.util.Map<String, SQLMetric> all = new LinkedHashMap<>();
    all.putAll(Scala.asJava(write));
    all.putAll(Scala.asJava(read));
    return Scala.map(all);
  }
}
