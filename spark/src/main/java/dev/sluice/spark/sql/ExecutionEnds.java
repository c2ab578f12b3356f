package dev.sluice.spark.sql;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.SparkContext;
import org.apache.spark.scheduler.SparkListener;
import org.apache.spark.scheduler.SparkListenerEvent;
import org.apache.spark.sql.execution.SQLExecution$;
import org.apache.spark.sql.execution.ui.SparkListenerSQLExecutionEnd;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * Work to run when an SQL execution ends: one listener per {@code SparkContext} runs an
 * execution's work when Spark reports its end ({@code SparkListenerSQLExecutionEnd}, on the
 * listener bus, so after the action that ran it returned). When a new context appears, the old
 * one's executions will never report their end, and their work runs then (work that needs its
 * context checks that it is not stopped). A failing piece of work is logged and does not stop the
 * rest. An execution that ended takes no more work ({@link #running}).
 */
final class ExecutionEnds {
  private static final Logger LOG = LoggerFactory.getLogger(ExecutionEnds.class);

  /** Work by execution id. */
  private static final Map<String, List<Runnable>> PENDING = new ConcurrentHashMap<>();

  /** The context whose listener runs ended executions' work. */
  private static SparkContext listening;

  private ExecutionEnds() {}

  /**
   * Whether SQL execution {@code executionId} is still running: Spark forgets an execution's query
   * as it ends, and a thread of it still running then (a subquery or broadcast of a cancelled
   * query) would leave work that no end runs.
   */
  static boolean running(String executionId) {
    return SQLExecution$.MODULE$.getQueryExecution(Long.parseLong(executionId)) != null;
  }

  /** Runs {@code work} when SQL execution {@code executionId} of {@code sc} ends. */
  static void at(SparkContext sc, String executionId, Runnable work) {
    listen(sc);
    PENDING.compute(
        executionId,
        (id, list) -> {
          List<Runnable> l = list == null ? new ArrayList<>() : list;
          l.add(work);
          return l;
        });
  }

  private static void ended(String executionId) {
    List<Runnable> work = PENDING.remove(executionId);
    if (work == null) {
      return;
    }
    for (Runnable w : work) {
      try {
        w.run();
      } catch (Exception e) { // Scala code may throw a checked exception undeclared
        LOG.warn("Sluice: work at the end of SQL execution {} failed", executionId, e);
      }
    }
  }

  private static synchronized void listen(SparkContext sc) {
    if (listening == sc) {
      return;
    }
    for (String id : List.copyOf(PENDING.keySet())) {
      ended(id);
    }
    listening = sc;
    sc.addSparkListener(
        new SparkListener() {
          @Override
          public void onOtherEvent(SparkListenerEvent event) {
            if (event instanceof SparkListenerSQLExecutionEnd end) {
              ended(Long.toString(end.executionId()));
            }
          }
        });
  }
}
