package dev.sluice.spark.jni;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.jupiter.api.Test;

/**
 * The Java half of the engine's stop check (the Rust half and the wait it ends are tested in
 * {@code crates/sluice-engine/src/buffer.rs}): an interrupted thread asks to stop, a running one
 * does not, and the interrupt stays set for the code that handles it after the native call.
 */
class StopRequestedTest {
  @Test
  void anInterruptedThreadAsksToStopAndKeepsItsInterrupt() throws InterruptedException {
    AtomicBoolean before = new AtomicBoolean(true);
    AtomicBoolean after = new AtomicBoolean(false);
    AtomicBoolean kept = new AtomicBoolean(false);
    Thread t =
        new Thread(
            () -> {
              before.set(SluiceNative.stopRequested());
              Thread.currentThread().interrupt();
              after.set(SluiceNative.stopRequested());
              kept.set(Thread.currentThread().isInterrupted());
            });
    t.start();
    t.join();
    assertFalse(before.get(), "a running thread with no task does not stop");
    assertTrue(after.get(), "an interrupted thread stops");
    assertTrue(kept.get(), "the interrupt is left set");
  }
}
