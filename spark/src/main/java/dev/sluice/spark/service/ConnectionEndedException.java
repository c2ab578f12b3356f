package dev.sluice.spark.service;

import java.io.IOException;

/**
 * A daemon's connection ended under a read: closed between frames or inside one, or reset. A daemon
 * closes a read's stream that its reduce task left waiting past the daemon's stall limit ({@code
 * sluice daemon --stream-stall-s}, 600 s by default), and {@link ServiceStreams} then resumes the
 * read on a new connection after the blocks it holds; a daemon that died ends its connections so
 * too, and then cannot be reached. Not a timeout, a corrupt frame or a refusal. Thrown by the native
 * client (its class name is in {@code sluice-jni}'s {@code error.rs}).
 */
public final class ConnectionEndedException extends IOException {
  private static final long serialVersionUID = 1L;

  public ConnectionEndedException(String message) {
    super(message);
  }
}
