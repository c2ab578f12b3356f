package dev.sluice.spark.service;

import dev.sluice.spark.jni.ServiceNative;
import java.util.Arrays;
import java.util.BitSet;

/**
 * What one daemon's read may send, checked segment by segment as the reader meets them: the
 * segments of the read's partitions {@code lo..hi} only, in partition order (the daemon streams
 * its partitions one after another, each one's blocks in commit order), each (partition, map
 * index) once (a map's blocks of one partition are consecutive, so a segment that comes back is
 * one sent twice, whose records would be counted twice), and, where the map statuses list every
 * segment that is not empty, none of the others. A reduced read's segments are map {@link
 * ServiceNative#REDUCED_MAP}'s, one per partition. Only a daemon with a bug, or bytes forged in
 * between, sends otherwise; every block's CRC32C and every segment's trailer would pass such a
 * stream.
 */
final class SegmentOrder {
  /** The segments the map statuses say are not empty, by {@link ServiceStreams#segment} key. */
  private final long[] listed;

  /** Whether {@link #listed} is every such segment (no batch of partitions hid some). */
  private final boolean complete;

  private int lo;
  private int hi;
  /** The partition of the segment met last, or -1 before the read's first. */
  private int partition = -1;

  /** The map indexes met in {@link #partition}. */
  private final BitSet maps = new BitSet();

  private boolean reduced;

  SegmentOrder(long[] listed, boolean complete) {
    this.listed = listed;
    this.complete = complete;
  }

  /** Starts a read of partitions {@code lo..hi}. */
  void start(int lo, int hi) {
    this.lo = lo;
    this.hi = hi;
    partition = -1;
    maps.clear();
    reduced = false;
  }

  /** Null if the read may send map {@code map}'s segment of {@code p} next, else what is wrong. */
  String check(int p, int map) {
    if (p < lo || p >= hi) {
      return "the daemon sent a segment of partition " + p + ", outside the read's " + lo + ".."
          + hi;
    }
    if (p < partition) {
      return "the daemon sent a segment of partition " + p + " after one of partition "
          + partition;
    }
    if (p != partition) {
      partition = p;
      maps.clear();
      reduced = false;
    }
    if (map == ServiceNative.REDUCED_MAP) {
      if (reduced) {
        return "the daemon sent the results of partition " + p + " twice";
      }
      reduced = true;
      return null;
    }
    if (map < 0) {
      return "the daemon sent map index " + map + " for partition " + p;
    }
    if (maps.get(map)) {
      return "the daemon sent map index " + map + "'s segment of partition " + p + " twice";
    }
    maps.set(map);
    if (complete && Arrays.binarySearch(listed, ServiceStreams.segment(p, map)) < 0) {
      return "the daemon sent a segment of map index " + map + " for partition " + p
          + ", which its map status says is empty";
    }
    return null;
  }
}
