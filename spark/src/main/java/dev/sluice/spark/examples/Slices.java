package dev.sluice.spark.examples;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;

/** How the example jobs split generated input over map tasks: one slice id per partition. */
final class Slices {
  private Slices() {}

  /** The slice ids {@code 0 .. slices - 1}, one per partition. */
  static JavaRDD<Integer> ids(JavaSparkContext sc, int slices) {
    List<Integer> ids = new ArrayList<>();
    for (int i = 0; i < slices; i++) {
      ids.add(i);
    }
    return sc.parallelize(ids, slices);
  }

  /** Items of {@code total} that slice {@code slice} generates (the first slices take one more). */
  static long share(long total, int slices, int slice) {
    return total / slices + (slice < total % slices ? 1 : 0);
  }

  /** Index of slice {@code slice}'s first item. */
  static long first(long total, int slices, int slice) {
    return total / slices * slice + Math.min(slice, total % slices);
  }
}
