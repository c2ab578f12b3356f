package dev.sluice.spark.service;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.jni.ServiceNative;
import org.junit.jupiter.api.Test;

/** The JVM and the native side agree on which daemon owns which reduce partitions. */
class NodesTest {
  @Test
  void ownershipIsTheNativeSidesAndRangesAreContiguous() {
    for (int nodes = 1; nodes <= 7; nodes++) {
      for (int partitions = 1; partitions <= 300; partitions += partitions < 20 ? 1 : 17) {
        for (int r = 0; r < partitions; r++) {
          int n = Nodes.of(r, partitions, nodes);
          assertEquals(ServiceNative.nodeOf(r, partitions, nodes), n, r + " of " + partitions);
          assertTrue(Nodes.first(n, partitions, nodes) <= r, "first of its node");
          assertTrue(r < Nodes.first(n + 1, partitions, nodes), "before the next node's first");
        }
        assertEquals(0, Nodes.first(0, partitions, nodes));
        assertEquals(partitions, Nodes.first(nodes, partitions, nodes));
      }
    }
  }
}
