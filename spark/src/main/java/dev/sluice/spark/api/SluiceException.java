package dev.sluice.spark.api;

/** A failure inside the native Sluice engine: misuse, a refused buffer, or a native panic. */
public final class SluiceException extends RuntimeException {
  private static final long serialVersionUID = 1L;

  public SluiceException(String message) {
    super(message);
  }

  public SluiceException(String message, Throwable cause) {
    super(message, cause);
  }
}
