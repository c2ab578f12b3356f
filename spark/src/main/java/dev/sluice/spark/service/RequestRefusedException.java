package dev.sluice.spark.service;

/**
 * A daemon refused one request for what it names, and serves others: a commit that does not match
 * the chunks it staged for the attempt (or whose chunks it let go), a read of an attempt that never
 * committed there, a shuffle it does not hold (unregistered, or registered before the daemon
 * restarted), an argument out of range. The request fails as any refusal does (a push keeps its
 * output on the executor, a read is a fetch failure), but the daemon is not left out of this JVM's
 * pushes ({@link Daemons#leftOutAfter}): its disk, its connections and every other shuffle it
 * holds are fine. Thrown by the native client (its class name is in {@code sluice-jni}'s {@code
 * error.rs}).
 */
public final class RequestRefusedException extends DaemonRefusedException {
  private static final long serialVersionUID = 1L;

  public RequestRefusedException(String message) {
    super(message);
  }
}
