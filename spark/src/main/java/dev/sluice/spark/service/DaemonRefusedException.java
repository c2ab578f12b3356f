package dev.sluice.spark.service;

import java.io.IOException;

/**
 * A daemon answered a request with a refusal (an unknown shuffle, a commit that does not match, a
 * full disk...): the daemon is alive and the connection usable, unlike a plain {@link
 * IOException} from the native client, which is a connection that failed (refused, reset, timed
 * out, closed). Thrown by the native client (its class name is in {@code sluice-jni}'s {@code
 * error.rs}).
 */
public class DaemonRefusedException extends IOException {
  private static final long serialVersionUID = 1L;

  public DaemonRefusedException(String message) {
    super(message);
  }
}
