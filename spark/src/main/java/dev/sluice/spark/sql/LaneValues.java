package dev.sluice.spark.sql;

import dev.sluice.spark.ops.Lane;
import java.io.Serializable;
import java.math.BigInteger;
import java.nio.ByteBuffer;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.Decimal;

/**
 * The map side's arithmetic of a lanes aggregate ({@link LaneAggregate}): reads each lane's value
 * from a row of the lanes' value expressions, folds it into a group's state words exactly as the
 * engine's lanes do (flags, wrapping sums that flag an overflow, 128-bit decimal sums), and writes
 * a state out as the engine's input, which is how both a single row and a first-level partial
 * cross.
 */
final class LaneValues implements Serializable {
  private static final long serialVersionUID = 1L;

  /** How a lane's value is read from its column. */
  static final int READ_LONG = 0;

  static final int READ_INT = 1;
  static final int READ_SHORT = 2;
  static final int READ_BYTE = 3;
  /** A decimal's unscaled value (precision and scale of the lane). */
  static final int READ_DECIMAL = 4;

  private final Lane[] lanes;
  private final int[] reads;
  private final int[] precisions;
  private final int[] scales;
  /** Each lane's first state word. */
  private final int[] at;
  final int words;
  final int inputBytes;

  LaneValues(Lane[] lanes, int[] reads, int[] precisions, int[] scales) {
    this.lanes = lanes;
    this.reads = reads;
    this.precisions = precisions;
    this.scales = scales;
    this.at = new int[lanes.length];
    int w = 0;
    for (int i = 0; i < lanes.length; i++) {
      at[i] = w;
      w += lanes[i].words;
    }
    this.words = w;
    this.inputBytes = Lane.inputBytes(lanes);
  }

  Lane[] lanes() {
    return lanes;
  }

  /** Folds row {@code v} (lane {@code i}'s value in column {@code i}) into {@code st[base..]}. */
  void fold(InternalRow v, long[] st, int base) {
    for (int i = 0; i < lanes.length; i++) {
      int w = base + at[i];
      if (lanes[i] == Lane.COUNT) {
        st[w] += v.getLong(i);
        continue;
      }
      if (v.isNullAt(i)) {
        continue;
      }
      switch (lanes[i]) {
        case SUM64 -> add64(st, w, read(v, i), Lane.SEEN);
        case SUM128 -> {
          if (reads[i] != READ_DECIMAL) {
            long x = read(v, i);
            add128(st, w, x, x >> 63, Lane.SEEN);
          } else if (precisions[i] <= Decimal.MAX_LONG_DIGITS()) {
            long u = v.getDecimal(i, precisions[i], scales[i]).toUnscaledLong();
            add128(st, w, u, u >> 63, Lane.SEEN);
          } else {
            BigInteger u =
                v.getDecimal(i, precisions[i], scales[i]).toJavaBigDecimal().unscaledValue();
            add128(st, w, u.longValue(), u.shiftRight(64).longValue(), Lane.SEEN);
          }
        }
        default -> pick(st, w, read(v, i), lanes[i] == Lane.MIN64);
      }
    }
  }

  private long read(InternalRow v, int i) {
    return switch (reads[i]) {
      case READ_INT -> v.getInt(i);
      case READ_SHORT -> v.getShort(i);
      case READ_BYTE -> v.getByte(i);
      case READ_DECIMAL -> v.getDecimal(i, precisions[i], scales[i]).toUnscaledLong();
      default -> v.getLong(i);
    };
  }

  /** Merges state {@code o[ob..]} into {@code st[base..]}. */
  void merge(long[] st, int base, long[] o, int ob) {
    for (int i = 0; i < lanes.length; i++) {
      int w = base + at[i];
      int x = ob + at[i];
      switch (lanes[i]) {
        case COUNT -> st[w] += o[x];
        case SUM64 -> add64(st, w, o[x], o[x + 1]);
        case SUM128 -> add128(st, w, o[x], o[x + 1], o[x + 2]);
        default -> {
          if ((o[x + 1] & Lane.SEEN) != 0) {
            pick(st, w, o[x], lanes[i] == Lane.MIN64);
          }
        }
      }
    }
  }

  /** Writes the state at {@code st[base..]} as the engine's input (a little-endian buffer). */
  void write(long[] st, int base, ByteBuffer out) {
    for (int i = 0; i < lanes.length; i++) {
      int w = base + at[i];
      switch (lanes[i]) {
        case COUNT -> out.putLong(st[w]);
        case SUM128 -> out.put((byte) st[w + 2]).putLong(st[w]).putLong(st[w + 1]);
        default -> out.put((byte) st[w + 1]).putLong(st[w]);
      }
    }
  }

  /** Lane {@code i}'s first state word. */
  int at(int i) {
    return at[i];
  }

  private static void add64(long[] st, int w, long x, long flags) {
    long sum = st[w] + x;
    boolean over = ((st[w] ^ sum) & (x ^ sum)) < 0;
    st[w] = sum;
    st[w + 1] |= flags | (over ? Lane.OVERFLOW : 0);
  }

  private static void add128(long[] st, int w, long lo, long hi, long flags) {
    long a = st[w];
    long b = st[w + 1];
    long sumLo = a + lo;
    long carry = Long.compareUnsigned(sumLo, a) < 0 ? 1 : 0;
    long sumHi = b + hi + carry;
    // A signed overflow of the high word (with the carry in): both operands' signs agree and
    // the result's differs.
    boolean over = ((b ^ sumHi) & (hi ^ sumHi)) < 0;
    st[w] = sumLo;
    st[w + 1] = sumHi;
    st[w + 2] |= flags | (over ? Lane.OVERFLOW : 0);
  }

  private static void pick(long[] st, int w, long x, boolean min) {
    if ((st[w + 1] & Lane.SEEN) == 0 || (min ? x < st[w] : x > st[w])) {
      st[w] = x;
    }
    st[w + 1] |= Lane.SEEN;
  }
}
