package dev.sluice.spark;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import org.apache.spark.SparkConf;
import org.apache.spark.api.java.JavaSparkContext;

/** Real local[2] SparkContexts for the Java tests, each with its own scratch directory. */
final class SparkContexts {
  private SparkContexts() {}

  /** A context whose shuffle manager is {@code manager}; shuffle files go under {@code dir}. */
  static JavaSparkContext start(String manager, Path dir) {
    return start(manager, dir, new SparkConf());
  }

  /** As {@link #start(String, Path)}, with {@code extra} settings on top. */
  static JavaSparkContext start(String manager, Path dir, SparkConf extra) {
    SparkConf conf =
        new SparkConf()
            .setMaster("local[2]")
            .setAppName("sluice-java-tests")
            .set("spark.shuffle.manager", manager)
            .set("spark.local.dir", dir.toString())
            .set("spark.driver.host", "127.0.0.1")
            .set("spark.driver.bindAddress", "127.0.0.1")
            .set("spark.ui.enabled", "false")
            .set("spark.default.parallelism", "4")
            // Sluice carries RDD shuffles whose serializer relocates records.
            .set("spark.serializer", "org.apache.spark.serializer.KryoSerializer");
    for (scala.Tuple2<String, String> kv : extra.getAll()) {
      conf.set(kv._1(), kv._2());
    }
    JavaSparkContext sc = new JavaSparkContext(conf);
    sc.setLogLevel("ERROR");
    return sc;
  }

  static Path scratch() throws IOException {
    return Files.createTempDirectory("sluice-java-tests");
  }
}
