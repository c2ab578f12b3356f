package dev.sluice.spark.service;

/**
 * A daemon refused a request naming an older generation of a shuffle than the one it holds: the
 * driver assigned the shuffle anew (after a fetch failure) while this request's task ran. The
 * daemon is alive; the request's data belongs to a generation nobody reads. Thrown by the native
 * client (its class name is in {@code sluice-jni}'s {@code error.rs}).
 */
public final class StaleGenerationException extends DaemonRefusedException {
  private static final long serialVersionUID = 1L;

  public StaleGenerationException(String message) {
    super(message);
  }
}
