package dev.sluice.spark.examples;

import dev.sluice.spark.metrics.SluiceMetrics;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.stream.Collectors;
import java.util.stream.LongStream;
import org.apache.spark.SparkEnv;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Tuple2;

/**
 * What Sluice holds open in each executor, read by tasks that run there: native map attempts and
 * reduce operators still alive, and the engine's bytes ({@link SluiceMetrics#engineHeld}). Between
 * jobs the counts and the engine's buffers, operator state and results must be zero (every task
 * closed what it opened, however it ended), and its free pages within their limit; the soak test
 * ({@code spark/soak.py}) asks after its jobs.
 */
public final class ExecutorProbe {
  private ExecutorProbe() {}

  /**
   * Each executor's id and its "liveMapAttempts,liveReduceOperators,bufferBytes,operatorBytes,
   * resultsBytes,freePageBytes,freePageLimit", from {@code tasks} small tasks (enough that every
   * executor runs some).
   */
  public static Map<String, String> run(JavaSparkContext sc, int tasks) {
    List<Tuple2<String, String>> seen =
        Slices.ids(sc, tasks)
            .map(
                i ->
                    new Tuple2<>(
                        SparkEnv.get().executorId(),
                        SluiceMetrics.liveMapAttempts()
                            + ","
                            + SluiceMetrics.liveReduceOperators()
                            + ","
                            + LongStream.of(SluiceMetrics.engineHeld())
                                .mapToObj(Long::toString)
                                .collect(Collectors.joining(","))))
            .collect();
    Map<String, String> out = new TreeMap<>();
    for (Tuple2<String, String> t : seen) {
      out.put(t._1(), t._2());
    }
    return out;
  }
}
