package dev.sluice.spark.examples;

import dev.sluice.spark.Sluice;
import dev.sluice.spark.api.Agg;
import java.util.Arrays;
import java.util.Iterator;
import java.util.SplittableRandom;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaRDD;
import org.apache.spark.api.java.JavaSparkContext;
import scala.Tuple2;

/**
 * HiBench's WordCount as an RDD job: lines of text read with {@code textFile}, split on spaces,
 * each word counted; by Spark's {@code reduceByKey} (HiBench's code) or by {@link
 * Sluice#reduceByKey} (the count offloaded to the engine). {@link #generate} writes HiBench-like
 * input: lines of 10 to 99 words drawn uniformly from a list of 1,000 words.
 */
public final class WordCountJob {
  /** Distinct words in the list. */
  public static final int WORDS = 1000;

  private static final int MIN_WORDS_PER_LINE = 10;
  private static final int MAX_WORDS_PER_LINE = 99;

  private WordCountJob() {}

  /** The word list: 1,000 distinct lowercase words of 3 to 10 letters, the same on every call. */
  static String[] wordList() {
    SplittableRandom r = new SplittableRandom(0x30d5);
    java.util.LinkedHashSet<String> words = new java.util.LinkedHashSet<>();
    while (words.size() < WORDS) {
      char[] w = new char[3 + r.nextInt(8)];
      for (int i = 0; i < w.length; i++) {
        w[i] = (char) ('a' + r.nextInt(26));
      }
      words.add(new String(w));
    }
    return words.toArray(new String[0]);
  }

  /**
   * Writes about {@code bytes} of text in {@code slices} files under {@code path} (a directory
   * that must not exist yet); returns the number of words written.
   */
  public static long generate(JavaSparkContext sc, String path, long bytes, int slices) {
    JavaRDD<String> lines =
        Slices.ids(sc, slices)
            .flatMap(
                slice -> {
                  String[] words = wordList();
                  SplittableRandom r = new SplittableRandom(0x7e47 + slice);
                  long share = bytes / slices;
                  return new Iterator<String>() {
                    long written = 0;

                    @Override
                    public boolean hasNext() {
                      return written < share;
                    }

                    @Override
                    public String next() {
                      StringBuilder b = new StringBuilder();
                      int n = MIN_WORDS_PER_LINE + r.nextInt(MAX_WORDS_PER_LINE - MIN_WORDS_PER_LINE + 1);
                      for (int i = 0; i < n; i++) {
                        if (i > 0) {
                          b.append(' ');
                        }
                        b.append(words[r.nextInt(WORDS)]);
                      }
                      written += b.length() + 1;
                      return b.toString();
                    }
                  };
                });
    lines.saveAsTextFile(path);
    return sc.textFile(path).map(l -> (long) l.split(" ").length).reduce(Long::sum);
  }

  /** Each word of the text under {@code path} with its count, in {@code partitions} partitions. */
  public static JavaPairRDD<String, Long> counts(
      JavaSparkContext sc, String path, int partitions, boolean offloaded) {
    JavaRDD<String> words = sc.textFile(path).flatMap(l -> Arrays.asList(l.split(" ")).iterator());
    if (offloaded) {
      JavaPairRDD<String, Integer> ones = words.mapToPair(w -> new Tuple2<>(w, 1));
      return Sluice.reduceByKey(ones, Agg.SUM, Integer.class, partitions);
    }
    return words
        .mapToPair(w -> new Tuple2<>(w, 1))
        .reduceByKey(Integer::sum, partitions)
        .mapValues(Integer::longValue);
  }

  /**
   * Counts; returns {@code {distinct words, total count, checksum}}, the checksum summing {@code
   * word.hashCode() * 1000003 + count} over every word (order-independent).
   */
  public static long[] run(JavaSparkContext sc, String path, int partitions, boolean offloaded) {
    return counts(sc, path, partitions, offloaded)
        .map(t -> new long[] {1, t._2(), t._1().hashCode() * 1_000_003L + t._2()})
        .reduce((a, b) -> new long[] {a[0] + b[0], a[1] + b[1], a[2] + b[2]});
  }
}
