package dev.sluice.spark.ops;

/**
 * One aggregate of a Spark SQL aggregate the engine runs with several functions per group: the
 * engine's lanes ({@code sluice_core::reorg::aggregate::lanes}), with the same codes, input widths
 * and state words. A record's value is its lanes' inputs back to back; a lane's input is also its
 * state written out (a count, or a flags byte and the value), so a first level of aggregation on
 * the task thread sends its partial states as inputs.
 */
public enum Lane {
  /** Sum of each row's 1 or 0 (input: an 8-byte count to add; state: the count). */
  COUNT(1, 8, 1),
  /** Sum of nullable longs (input: flags + 8 bytes; state: sum, flags). */
  SUM64(2, 9, 2),
  /**
   * Sum of nullable 128-bit integers, a decimal's unscaled values (input: flags + 16 bytes; state:
   * low, high, flags).
   */
  SUM128(3, 17, 3),
  /** Smallest nullable long (input: flags + 8 bytes; state: value, flags). */
  MIN64(4, 9, 2),
  /** Largest nullable long (input: flags + 8 bytes; state: value, flags). */
  MAX64(5, 9, 2);

  /** Bits of one lane in a lanes code. */
  public static final int CODE_BITS = 3;
  /** Most lanes of one aggregate: what one 32-bit code holds. */
  public static final int LANES_MAX = 10;
  /** Flag: the lane folded a valid (non-null) value. */
  public static final long SEEN = 1;
  /** Flag: a sum overflowed its width (and wrapped). */
  public static final long OVERFLOW = 2;

  /** The engine's code of the lane. */
  public final int code;
  /** Bytes of one input. */
  public final int inputBytes;
  /** Words of state (8 bytes each) in a result. */
  public final int words;

  Lane(int code, int inputBytes, int words) {
    this.code = code;
    this.inputBytes = inputBytes;
    this.words = words;
  }

  /** The engine's code of {@code lanes} in order (lowest bits first). */
  public static int code(Lane[] lanes) {
    if (lanes.length == 0 || lanes.length > LANES_MAX) {
      throw new IllegalArgumentException(lanes.length + " lanes (1 to " + LANES_MAX + ")");
    }
    int c = 0;
    for (int i = lanes.length - 1; i >= 0; i--) {
      c = (c << CODE_BITS) | lanes[i].code;
    }
    return c;
  }

  /** Bytes of a record's value. */
  public static int inputBytes(Lane[] lanes) {
    int n = 0;
    for (Lane l : lanes) {
      n += l.inputBytes;
    }
    return n;
  }

  /** Words of a group's state. */
  public static int words(Lane[] lanes) {
    int n = 0;
    for (Lane l : lanes) {
      n += l.words;
    }
    return n;
  }
}
