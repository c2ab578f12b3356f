package dev.sluice.spark.service;

/**
 * A daemon answered every try of a new connection busy for as long as the caller waited (it serves
 * its {@code --max-connections}), or answered a request busy after it waited a minute for room in
 * the daemon's frame memory: it is alive, with its data. A read that meets it fails its task
 * (retried by Spark) rather than the shuffle's map stage. Thrown by the native client (its class
 * name is in {@code sluice-jni}'s {@code error.rs}).
 */
public final class DaemonBusyException extends DaemonRefusedException {
  private static final long serialVersionUID = 1L;

  public DaemonBusyException(String message) {
    super(message);
  }
}
