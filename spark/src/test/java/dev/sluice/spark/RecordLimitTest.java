package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.util.Arrays;
import org.apache.spark.HashPartitioner;
import org.apache.spark.SparkException;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * A record larger than Sluice's record limit (a Sluice block's payload, 64 MiB) fails its task
 * with an error that names the limit and the setting that avoids it, and leaves nothing behind;
 * a record just under the limit is carried.
 */
class RecordLimitTest {
  @Test
  void aRecordOverTheLimitIsAClearErrorAndOneUnderItIsCarried() throws IOException {
    JavaSparkContext sc =
        SparkContexts.start(SluiceShuffleManager.class.getName(), SparkContexts.scratch());
    try {
      int over = (int) NativeMapOutput.RECORD_BYTES_MAX + 1024;
      SparkException e =
          assertThrows(
              SparkException.class,
              () ->
                  sc.parallelize(Arrays.asList(1, 2), 2)
                      .mapToPair(i -> new Tuple2<>(i, new byte[i == 1 ? over : 10]))
                      .partitionBy(new HashPartitioner(2))
                      .count());
      assertTrue(e.getMessage().contains("record limit of 64 MiB"), e.getMessage());
      assertTrue(e.getMessage().contains("spark.shuffle.manager=sort"), e.getMessage());
      assertEquals(0, WriteErrorTest.liveAttemptsOnceTasksEnd(sc));
      // 60 MiB, under the limit, crosses intact.
      int under = 60 << 20;
      long sum =
          sc.parallelize(Arrays.asList(1), 1)
              .mapToPair(i -> new Tuple2<>(i, filled(under)))
              .partitionBy(new HashPartitioner(2))
              .values()
              .map(RecordLimitTest::checksum)
              .reduce(Long::sum);
      assertEquals(checksum(filled(under)), sum);
    } finally {
      sc.stop();
    }
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
