package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.api.SluiceSetting;
import java.io.IOException;
import java.util.Arrays;
import org.apache.spark.HashPartitioner;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkException;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * Records up to Sluice's record limit are carried (512 MiB here; the limit, a Sluice block's
 * payload, is 768 MiB); a record over the limit set by {@code spark.sluice.recordBytesMax} fails
 * its task with an error that names the limit and the settings that avoid it, and leaves nothing
 * behind.
 */
class RecordLimitTest {
  @Test
  void aRecordOverTheLimitIsAClearErrorNamingTheSetting() throws IOException {
    JavaSparkContext sc =
        SparkContexts.start(
            SluiceShuffleManager.class.getName(),
            SparkContexts.scratch(),
            new SparkConf().set(SluiceSetting.RECORD_BYTES_MAX.key, "1m"));
    try {
      int over = (1 << 20) + 1024;
      SparkException e =
          assertThrows(
              SparkException.class,
              () ->
                  sc.parallelize(Arrays.asList(1, 2), 2)
                      .mapToPair(i -> new Tuple2<>(i, new byte[i == 1 ? over : 10]))
                      .partitionBy(new HashPartitioner(2))
                      .count());
      assertTrue(e.getMessage().contains("record limit of 1 MiB"), e.getMessage());
      assertTrue(e.getMessage().contains("spark.sluice.recordBytesMax"), e.getMessage());
      assertTrue(e.getMessage().contains("at most 768 MiB"), e.getMessage());
      assertTrue(e.getMessage().contains("spark.shuffle.manager=sort"), e.getMessage());
      assertEquals(0, WriteErrorTest.liveAttemptsOnceTasksEnd(sc));
      // Just under the limit crosses intact.
      int under = (1 << 20) - 1024;
      assertEquals(checksum(filled(under)), carried(sc, under));
    } finally {
      sc.stop();
    }
  }

  @Test
  void aRecordOf512MiBIsCarriedIntact() throws IOException {
    JavaSparkContext sc =
        SparkContexts.start(SluiceShuffleManager.class.getName(), SparkContexts.scratch());
    try {
      int big = 512 << 20;
      assertEquals(checksum(filled(big)), carried(sc, big));
    } finally {
      sc.stop();
    }
  }

  /** The checksum of one record of {@code n} bytes after a Sluice shuffle. */
  static long carried(JavaSparkContext sc, int n) {
    return sc.parallelize(Arrays.asList(1), 1)
        .mapToPair(i -> new Tuple2<>(i, filled(n)))
        .partitionBy(new HashPartitioner(2))
        .values()
        .map(RecordLimitTest::checksum)
        .reduce(Long::sum);
  }

  static byte[] filled(int n) {
    byte[] b = new byte[n];
    for (int i = 0; i < n; i++) {
      b[i] = (byte) (i * 31 + (i >>> 11));
    }
    return b;
  }

  static long checksum(byte[] b) {
    java.util.zip.CRC32C c = new java.util.zip.CRC32C();
    c.update(b);
    return c.getValue() + ((long) b.length << 32);
  }
}
