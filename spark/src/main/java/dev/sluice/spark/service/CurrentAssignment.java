package dev.sluice.spark.service;

import java.io.IOException;
import java.io.ObjectOutputStream;
import java.io.Serializable;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

/**
 * The assignment a service shuffle has now: held by the shuffle's handle and, on the driver, by
 * {@link ServiceFailures}, which replaces it after a failed read. The listener holds this cell,
 * not the handle, so that the handle's dependency stays collectable and Spark's context cleaner
 * still unregisters the shuffle. An executor gets a copy with the handle, fixed for its task.
 *
 * <p>A replacement is begun as soon as the listener sees the failed read (no I/O) and ended once
 * the daemons registered the new generation. Serializing the cell meanwhile (Spark submitting the
 * rerun stage) waits for the end, at most {@link #PENDING_WAIT_MS}, so the rerun's tasks carry the
 * new assignment rather than the one that failed, however long the registration takes within that
 * bound.
 */
public final class CurrentAssignment implements Serializable {
  private static final long serialVersionUID = 1L;

  /**
   * How long serializing the cell waits for a replacement under way: above the client's connect
   * timeout (10 s) and the driver's wait on a busy daemon ({@link Daemons#DRIVER_BUSY_WAIT_MS}, 5
   * s), so one daemon gone or full does not make a rerun start on the old assignment.
   */
  public static final long PENDING_WAIT_MS = 30_000;

  private volatile Assignment now;

  /** On the driver, while a replacement is under way: released when it ends. */
  private transient volatile CountDownLatch pending;

  public CurrentAssignment(Assignment first) {
    this.now = first;
  }

  public Assignment get() {
    return now;
  }

  /**
   * Begins a replacement after a failed read of generation {@code failed}: when that is still the
   * current generation and none is under way. Whether it began (then {@link #end} must follow).
   */
  synchronized boolean begin(int failed) {
    if (now == null || now.generation != failed || pending != null) {
      return false;
    }
    pending = new CountDownLatch(1);
    return true;
  }

  /** Ends the replacement begun: {@code next} is the assignment from now on (null: none). */
  synchronized void end(Assignment next) {
    if (next != null) {
      now = next;
    }
    CountDownLatch p = pending;
    pending = null;
    if (p != null) {
      p.countDown();
    }
  }

  private void writeObject(ObjectOutputStream out) throws IOException {
    CountDownLatch p = pending;
    if (p != null) {
      try {
        p.await(PENDING_WAIT_MS, TimeUnit.MILLISECONDS);
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
      }
    }
    out.defaultWriteObject();
  }
}
