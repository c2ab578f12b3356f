package dev.sluice.spark.api;

/**
 * An aggregation {@link Sluice} runs inside the engine, map side (partial, per destination) and
 * reduce side (exact, spilling sorted runs when its memory is spent).
 */
public enum Agg {
  /** Sum of the values; integral sums are {@code Long} and wrap on overflow. */
  SUM(0),
  /** Number of values, a {@code Long}. */
  COUNT(1),
  /** Smallest value, of the values' type. */
  MIN(2),
  /** Largest value, of the values' type. */
  MAX(3);

  /** The native side's code for the function. */
  public final int code;

  Agg(int code) {
    this.code = code;
  }
}
