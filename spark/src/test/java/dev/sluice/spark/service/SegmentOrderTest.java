package dev.sluice.spark.service;

import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.jni.ServiceNative;
import org.junit.jupiter.api.Test;

/** The segments a daemon's read may send ({@link SegmentOrder}). */
class SegmentOrderTest {
  /** Maps 0 and 1 wrote partitions 2 and 3, map 2 partition 3 only. */
  private static final long[] LISTED = {
    ServiceStreams.segment(2, 0),
    ServiceStreams.segment(2, 1),
    ServiceStreams.segment(3, 0),
    ServiceStreams.segment(3, 1),
    ServiceStreams.segment(3, 2),
  };

  private static SegmentOrder reading(boolean complete) {
    SegmentOrder order = new SegmentOrder(LISTED, complete);
    order.start(2, 4);
    return order;
  }

  private static void refused(String wrong, String what) {
    assertTrue(wrong != null && wrong.contains(what), wrong);
  }

  @Test
  void everyListedSegmentOnceInPartitionOrderPasses() {
    SegmentOrder order = reading(true);
    // A partition's maps come in commit order, not map order.
    for (long key : new long[] {LISTED[1], LISTED[0], LISTED[4], LISTED[2], LISTED[3]}) {
      assertNull(order.check((int) (key >>> 32), (int) key));
    }
    // The next read starts afresh.
    order.start(2, 4);
    assertNull(order.check(2, 0));
  }

  @Test
  void aSegmentSentTwiceIsRefused() {
    SegmentOrder order = reading(true);
    assertNull(order.check(2, 0));
    assertNull(order.check(2, 1));
    refused(order.check(2, 0), "map index 0's segment of partition 2 twice");
  }

  @Test
  void aPartitionOutOfOrderOrOutsideTheReadIsRefused() {
    SegmentOrder order = reading(true);
    assertNull(order.check(3, 0));
    // Partition 2 after 3: its map 0 segment was not sent before, but a daemon streams its
    // partitions in order, so this one comes back after the read left it.
    refused(order.check(2, 0), "partition 2 after one of partition 3");
    refused(reading(true).check(4, 0), "outside the read's 2..4");
    refused(reading(true).check(1, 0), "outside the read's 2..4");
  }

  @Test
  void aSegmentTheMapStatusesSayIsEmptyIsRefusedWhereTheyListEverySegment() {
    refused(reading(true).check(2, 2), "which its map status says is empty");
    // A batch of partitions lists none of its segments: nothing to say it is empty.
    assertNull(reading(false).check(2, 2));
  }

  @Test
  void aReducedReadSendsEachPartitionsResultsOnce() {
    SegmentOrder order = reading(false);
    assertNull(order.check(2, ServiceNative.REDUCED_MAP));
    refused(order.check(2, ServiceNative.REDUCED_MAP), "the results of partition 2 twice");
    assertNull(order.check(3, ServiceNative.REDUCED_MAP));
    refused(order.check(3, -2), "map index -2");
  }
}
