package dev.sluice.spark.service;

import java.io.Serializable;

/**
 * The assignment a service shuffle has now: held by the shuffle's handle and, on the driver, by
 * {@link ServiceFailures}, which replaces it after a failed read. The listener holds this cell,
 * not the handle, so that the handle's dependency stays collectable and Spark's context cleaner
 * still unregisters the shuffle. An executor gets a copy with the handle, fixed for its task.
 */
public final class CurrentAssignment implements Serializable {
  private static final long serialVersionUID = 1L;

  private volatile Assignment now;

  public CurrentAssignment(Assignment first) {
    this.now = first;
  }

  public Assignment get() {
    return now;
  }

  /** Replaces the assignment with {@code next} if it is still {@code expected}; whether it did. */
  synchronized boolean replace(Assignment expected, Assignment next) {
    if (now != expected) {
      return false;
    }
    now = next;
    return true;
  }
}
