package dev.sluice.spark.service;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InterruptedIOException;
import org.junit.jupiter.api.Test;

/**
 * Which failed pushes leave their daemon out of this JVM's pushes: a failed connection and a
 * refusal of the daemon's own (a full disk, a shutdown), not a refusal of the request for what it
 * names, a newer generation, a killed task or the task's own error.
 */
class LeftOutTest {
  @Test
  void onlyAFailedConnectionOrADaemonsOwnRefusalLeavesTheDaemonOut() {
    assertTrue(Daemons.leftOutAfter(new IOException("connection reset")));
    assertTrue(Daemons.leftOutAfter(new DaemonRefusedException("Storage: no space left")));
    assertTrue(Daemons.leftOutAfter(new ConnectionEndedException("closed while pushing")));
    assertFalse(Daemons.leftOutAfter(new RequestRefusedException("UnknownShuffle: shuffle 3")));
    assertFalse(Daemons.leftOutAfter(new StaleGenerationException("generation 8 is registered")));
    assertFalse(Daemons.leftOutAfter(new InterruptedIOException("task killed")));
    assertFalse(Daemons.leftOutAfter(new IllegalStateException("the task's own")));
  }
}
