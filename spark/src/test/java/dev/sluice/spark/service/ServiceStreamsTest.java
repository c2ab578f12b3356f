package dev.sluice.spark.service;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.io.IOException;
import java.io.InputStream;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.Map;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.spark.SparkConf;
import org.apache.spark.executor.TempShuffleReadMetrics;
import org.apache.spark.shuffle.FetchFailedException;
import org.junit.jupiter.api.Test;

/** A service read's iterator after a failure, and after {@code close}. */
class ServiceStreamsTest {
  /** A port on {@code host} that nothing listens on (bound and let go). */
  private static int closedPort(String host) throws Exception {
    try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getByName(host))) {
      return s.getLocalPort();
    }
  }

  private static ServiceStreams streams(Daemons daemons) {
    return streams(daemons, true);
  }

  private static ServiceStreams streams(Daemons daemons, boolean detectCorrupt) {
    // Partitions 0..4 over two daemons: 0-1 at the first, 2-3 at the second.
    return new ServiceStreams(
        daemons,
        7,
        new Assignment(0, new int[] {0, 1}),
        0,
        4,
        4,
        new ServiceStreams.Winners(Map.of(0, 0L), new long[0], true),
        (id, in) -> in,
        detectCorrupt,
        new TempShuffleReadMetrics(),
        null);
  }

  private static Daemons daemons(String app, String first, String second) {
    return Daemons.of(
        ServiceConf.of(
            new SparkConf(false)
                .set("spark.sluice.mode", "service")
                .set("spark.sluice.service.daemons", first + "," + second)
                .set("spark.sluice.service.app", app)
                .set("spark.sluice.service.appSecret", "00".repeat(32))));
  }

  @Test
  void aFailedReadFailsEveryLaterCallAndReadsNoOtherDaemon() throws Exception {
    // The first daemon cannot be reached; the second is a socket that counts who connects. A
    // caller that catches the fetch failure and asks again must get it again, not the second
    // daemon's partitions as if the first's had been read.
    try (ServerSocket second = new ServerSocket(0, 8, InetAddress.getByName("127.0.0.2"))) {
      AtomicInteger connected = new AtomicInteger();
      Thread accept =
          new Thread(
              () -> {
                try {
                  while (true) {
                    Socket s = second.accept();
                    connected.incrementAndGet();
                    s.close();
                  }
                } catch (java.io.IOException closed) {
                  // The test ended.
                }
              });
      accept.setDaemon(true);
      accept.start();
      Daemons daemons =
          daemons(
              "sticky",
              "127.0.0.1:" + closedPort("127.0.0.1"),
              "127.0.0.2:" + second.getLocalPort());
      ServiceStreams it = streams(daemons);
      Throwable first = assertThrows(FetchFailedException.class, it::hasNext);
      Throwable again = assertThrows(FetchFailedException.class, it::hasNext);
      assertSame(first, again, "the same failure");
      assertThrows(FetchFailedException.class, it::next);
      assertEquals(0, connected.get(), "the second daemon was read after the first failed");
    }
  }

  @Test
  void aClosedReadBorrowsNoConnection() throws Exception {
    // Closed before its first read (the task ended on another thread): it ends, connecting to
    // neither daemon.
    try (ServerSocket first = new ServerSocket()) {
      first.bind(new InetSocketAddress(InetAddress.getByName("127.0.0.1"), 0), 8);
      Daemons daemons =
          daemons(
              "closed",
              "127.0.0.1:" + first.getLocalPort(),
              "127.0.0.2:" + closedPort("127.0.0.2"));
      ServiceStreams it = streams(daemons);
      it.close();
      assertFalse(it.hasNext());
      first.setSoTimeout(200);
      assertThrows(java.net.SocketTimeoutException.class, first::accept, "nothing connected");
    }
  }

  /** Two daemons nothing listens for: a read's segments here are handed to it directly. */
  private static Daemons unreachable(String app) throws Exception {
    return daemons(
        app, "127.0.0.1:" + closedPort("127.0.0.1"), "127.0.0.2:" + closedPort("127.0.0.2"));
  }

  /** A decoded segment whose first read finds a corrupt block. */
  private static InputStream corrupt() {
    return new InputStream() {
      @Override
      public int read() throws IOException {
        throw new IOException("Sluice block at byte 0 of shuffle_7_0_2: CRC32C mismatch");
      }
    };
  }

  @Test
  void aSegmentThatFailsToDecodeIsAFetchFailureAtTheDaemons() throws Exception {
    // A daemon's segment whose block fails its check as it is decoded: with
    // spark.shuffle.detectCorrupt on, a fetch failure at the shuffle's service location (map
    // index -1, so Spark unregisters the pushed outputs and reruns their maps), not an error that
    // fails the task four times over the same bytes; every later call gets the same failure.
    ServiceStreams it = streams(unreachable("corrupt"));
    InputStream segment = it.fetched(2, corrupt());
    FetchFailedException e = assertThrows(FetchFailedException.class, segment::read);
    org.apache.spark.FetchFailed reason = (org.apache.spark.FetchFailed) e.toTaskFailedReason();
    assertEquals(ServiceStreams.failedAt(7), reason.bmAddress());
    assertEquals(7, reason.shuffleId());
    assertEquals(-1, reason.mapIndex());
    assertEquals(2, reason.reduceId());
    assertTrue(e.getMessage().contains("CRC32C mismatch"), e.getMessage());
    assertSame(e, assertThrows(FetchFailedException.class, it::hasNext));
    assertSame(e, assertThrows(FetchFailedException.class, () -> segment.read(new byte[4], 0, 4)));
  }

  @Test
  void withDetectCorruptOffADecodingFailureFailsTheTask() throws Exception {
    // As under Spark's own shuffle with spark.shuffle.detectCorrupt off: the task's error.
    InputStream segment = streams(unreachable("corrupt-off"), false).fetched(2, corrupt());
    IOException e = assertThrows(IOException.class, segment::read);
    assertTrue(e.getMessage().contains("CRC32C mismatch"), e.getMessage());
  }
}
