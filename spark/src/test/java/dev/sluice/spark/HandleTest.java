package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.api.SluiceException;
import dev.sluice.spark.jni.EngineOp;
import dev.sluice.spark.jni.SluiceNative;
import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.api.java.JavaPairRDD;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/**
 * Native map attempts and reduce operators are named by checked handles: a handle that is closed
 * or was never opened is a {@link SluiceException}, never a read through a dangling pointer (which
 * crashes the JVM or returns freed bytes); and a reduce task's results read by another thread while
 * the task closes them (Spark's {@code PipedRDD}) end cleanly.
 */
class HandleTest {
  private static JavaSparkContext sc;

  @BeforeAll
  static void start() throws IOException {
    sc = SparkContexts.start(SluiceShuffleManager.class.getName(), SparkContexts.scratch());
  }

  @AfterAll
  static void stop() {
    sc.stop();
  }

  @Test
  void aHandleNeverOpenedOrClosedIsATypedError() {
    // The engine is open once a Sluice shuffle ran in this JVM.
    assertEquals(
        3, sc.parallelizePairs(List.of(new Tuple2<>(1, 1), new Tuple2<>(2, 2), new Tuple2<>(3, 3)))
            .reduceByKey(Integer::sum, 2)
            .count());
    ByteBuffer buf = ByteBuffer.allocateDirect(4096);
    // Ids a pointer-based bridge would have dereferenced: a plausible heap address, a small
    // number, a negative one.
    for (long bogus : new long[] {0x7f00_1234_5670L, 12345L, -8L, Long.MAX_VALUE}) {
      SluiceException next =
          assertThrows(SluiceException.class, () -> SluiceNative.reduceNext(bogus, buf));
      assertTrue(next.getMessage().contains("reduce operator handle " + bogus), next.getMessage());
      assertThrows(SluiceException.class, () -> SluiceNative.reduceFinish(bogus));
      assertThrows(SluiceException.class, () -> SluiceNative.reduceClose(bogus));
      SluiceException produce =
          assertThrows(SluiceException.class, () -> SluiceNative.mapProduce(bogus, buf, 0, 0));
      assertTrue(produce.getMessage().contains("map attempt handle " + bogus), produce.getMessage());
      assertThrows(SluiceException.class, () -> SluiceNative.mapAbort(bogus));
    }
  }

  @Test
  void aLiveHandleOfAnotherKindIsATypedError() throws IOException {
    // A map attempt and a reduce operator opened in this JVM may have the same count; their
    // handles differ by kind, so one passed for the other names nothing live there. (Through JNI
    // the counts seldom meet: handles.rs a_live_handle_of_another_kind_is_stale shows the tag;
    // this checks the typed error end to end.)
    // The engine is open once a Sluice shuffle ran in this JVM.
    sc.parallelizePairs(List.of(new Tuple2<>(1, 1))).reduceByKey(Integer::sum, 2).count();
    int shuffle = SluiceNative.registerShuffle(2, 1, EngineOp.NONE);
    Path dir = Files.createTempDirectory("sluice-handles");
    long map = SluiceNative.mapOpen(shuffle, 0, 0, 2, false, false);
    long reduce = SluiceNative.reduceOpen(EngineOp.SORT, 0, 1, dir.toString());
    try {
      SluiceException e =
          assertThrows(SluiceException.class, () -> SluiceNative.reduceClose(map));
      assertTrue(e.getMessage().contains("reduce operator handle " + map), e.getMessage());
      e = assertThrows(SluiceException.class, () -> SluiceNative.mapAbort(reduce));
      assertTrue(e.getMessage().contains("map attempt handle " + reduce), e.getMessage());
    } finally {
      SluiceNative.mapAbort(map);
      SluiceNative.reduceClose(reduce);
      SluiceNative.unregisterShuffle(shuffle);
    }
  }

  @Test
  void aBlockDecodedIntoItsOwnFrameIsRefused() {
    // decodeValues reads the frame and writes the values in two JNI critical sections: one array
    // passed as both would alias a slice the decoder reads with the one it writes.
    byte[] a = new byte[1 << 10];
    IllegalArgumentException e =
        assertThrows(
            IllegalArgumentException.class,
            () -> SluiceNative.decodeValues(a, 64, 0, 0L, 0, 1, 0L, a));
    assertTrue(e.getMessage().contains("one array"), e.getMessage());
  }

  @Test
  void resultsAreNeverWrittenIntoAReadOnlyBuffer() throws IOException {
    // JNI hands out a read-only direct buffer's address as any other's: results written into a
    // read-only mapping of a file would crash the JVM. Refused before the handle is looked at.
    Path file = Files.createTempFile("sluice-read-only", ".bin");
    try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
      Files.write(file, new byte[4096]);
      ByteBuffer mapped = ch.map(FileChannel.MapMode.READ_ONLY, 0, 4096);
      IllegalArgumentException e =
          assertThrows(IllegalArgumentException.class, () -> SluiceNative.reduceNext(1L, mapped));
      assertTrue(e.getMessage().contains("read-only"), e.getMessage());
    } finally {
      Files.delete(file);
    }
  }

  @Test
  void resultsPipedFromAnotherThreadWhileTheTaskClosesThem() {
    // reduceByKey reads its results through native reduce operators (grouped by key hash, on by
    // default); pipe() feeds each partition's records to `head -1` from a writer thread of its
    // own, which can still be reading when `head` has exited and the task completes and closes
    // the operator. Every run gives each partition's first line and nothing else.
    List<Tuple2<Long, Long>> pairs = new ArrayList<>();
    for (long i = 0; i < 200_000; i++) {
      pairs.add(new Tuple2<>(i % 50_000, 1L));
    }
    JavaPairRDD<Long, Long> sums = sc.parallelizePairs(pairs, 4).reduceByKey(Long::sum, 8);
    Map<String, Boolean> valid = new HashMap<>();
    for (long k = 0; k < 50_000; k++) {
      valid.put("(" + k + ",4)", true);
    }
    for (int run = 0; run < 10; run++) {
      List<String> firsts = sums.map(Tuple2::toString).pipe("head -1").collect();
      assertEquals(8, firsts.size(), "one line per partition");
      for (String line : firsts) {
        assertTrue(valid.containsKey(line), line);
      }
    }
  }
}
