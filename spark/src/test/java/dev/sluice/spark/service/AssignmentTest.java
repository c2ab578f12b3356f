package dev.sluice.spark.service;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import org.apache.spark.storage.BlockManagerId;
import org.junit.jupiter.api.Test;

/**
 * A shuffle's assignment over the daemons that registered it, and what the driver reads back from
 * a failed read to open the next generation.
 */
class AssignmentTest {
  @Test
  void ownersSplitThePartitionsAmongThemselvesOnly() {
    // Daemons 0 and 2 of three registered; daemon 1 is in no range.
    Assignment a = new Assignment(7, new int[] {0, 2});
    assertEquals(2, a.nodes());
    int partitions = 9;
    int[] byDaemon = new int[3];
    for (int r = 0; r < partitions; r++) {
      int k = a.ownerOf(r, partitions);
      assertTrue(a.first(k, partitions) <= r && r < a.first(k + 1, partitions), "in its range");
      byDaemon[a.daemon(k)]++;
    }
    assertEquals(0, byDaemon[1]);
    assertEquals(partitions, byDaemon[0] + byDaemon[2]);
    assertEquals(partitions, a.first(a.nodes(), partitions));
    assertTrue(a.owns(0) && !a.owns(1) && a.owns(2) && !a.owns(3));
    assertThrows(IllegalArgumentException.class, () -> new Assignment(1, new int[0]));
  }

  @Test
  void theNextGenerationIsAboveTheLastAndTheClock() {
    int now = Daemons.nextGeneration(0);
    assertTrue(now > 0, "seconds since 2026");
    assertEquals(now + 1_000_001, Daemons.nextGeneration(now + 1_000_000));
    assertTrue(Daemons.nextGeneration(5) >= now);
  }

  @Test
  void aFailedReadNamesItsShuffleAndGeneration() {
    BlockManagerId at = ServiceStreams.failedAt(41);
    assertEquals(41, ServiceStreams.shuffleOf(at));
    // A pushed output's status names its writer's host, the same executor id: a fetch failure
    // unregisters every pushed output of the shuffle, whichever host wrote it.
    BlockManagerId pushed = ServiceStreams.location(41, "10.0.0.5");
    assertEquals(41, ServiceStreams.shuffleOf(pushed));
    assertEquals(at.executorId(), pushed.executorId());
    assertEquals("10.0.0.5", pushed.host());
    assertFalse(at.host().equals(pushed.host()));
    assertEquals(
        -1,
        ServiceStreams.shuffleOf(BlockManagerId.apply("3", "10.0.0.5", 7337, scala.Option.empty())));
    String message =
        ServiceStreams.readFailure(0, 4, "127.0.0.2:7340", 31_000_123, "refused (generation 9)");
    assertEquals(31_000_123, ServiceStreams.generationIn(message));
    assertEquals(-1, ServiceStreams.generationIn("Sluice service: connection reset"));
    assertEquals(-1, ServiceStreams.generationIn("(generation 12"));
    assertEquals(-1, ServiceStreams.generationIn(null));
  }
}
