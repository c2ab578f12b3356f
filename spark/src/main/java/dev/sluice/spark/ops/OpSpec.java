package dev.sluice.spark.ops;

import dev.sluice.spark.api.Agg;
import dev.sluice.spark.shuffle.ShuffleKind;
import dev.sluice.spark.shuffle.SluiceShuffleHandle;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;

/**
 * What an offloaded operator shuffle computes ({@link Agg} over values of one numeric type) and
 * how its keys and values are laid out for the engine.
 *
 * <p>Engine record of a map task: {@code key = partition id (u32 LE) ++ tag (1 byte) ++ key
 * bytes}, {@code value = the value, little-endian, exactly its engine type's width} ({@link
 * #engineValueType}: a count is a sum of counts of 1, a sum of ints a sum of longs). Key tags:
 * {@link #KEY_LONG} (8 bytes LE), {@link #KEY_INT} (4 bytes LE), {@link #KEY_STRING} (UTF-8). The
 * tag keeps keys of different types apart and lets the reduce side rebuild each key without knowing
 * its type up front; a null key is its tag alone ({@link #KEY_NULL}); with {@link #rawKeys} a
 * {@code byte[]} key is a string key's UTF-8 bytes (Spark SQL's strings), and string keys come back
 * as such bytes. Results come back as {@code key ++ 8-byte result}: an i64 (sum of integers, count,
 * min and max of integers) or an f64; an {@link #exact} sum (Spark SQL's {@code sum} in ANSI mode)
 * adds an 8-byte overflow flag, and a set flag is thrown as Spark SQL's overflow error.
 */
public final class OpSpec implements ShuffleKind.EngineOperator {
  private static final long serialVersionUID = 1L;

  static final byte KEY_LONG = 0;
  static final byte KEY_INT = 1;
  static final byte KEY_STRING = 2;
  /** A null key (Spark SQL's null group), no payload. */
  static final byte KEY_NULL = 3;

  /** Value types, as the native side numbers them. */
  static final int VALUE_LONG = 0;

  public static final int VALUE_INT = 1;
  public static final int VALUE_DOUBLE = 2;

  private static final String[] VALUE_NAMES = {"Long", "Integer", "Double"};

  /** The native code of the exact sum (see the class comment). */
  static final int CODE_SUM_EXACT = 4;

  /**
   * The native code of several aggregates per group ({@link Lane}); the value type code is then
   * the lanes' code.
   */
  static final int CODE_LANES = 5;

  final Agg agg;
  final int valueType;
  /** A sum that must fail on overflow rather than wrap. */
  final boolean exact;
  /** String keys come back as their UTF-8 bytes, not as {@code String}s. */
  final boolean rawKeys;
  /**
   * Whether map tasks fold hot keys on their own thread first ({@link OpPreAggregator}): for {@link
   * dev.sluice.spark.Sluice}'s operators over integers; Spark SQL's aggregates have a first level
   * of their own.
   */
  final boolean firstLevel;

  /**
   * The lanes of a Spark SQL aggregate by several columns or with several functions, or null: keys
   * are then {@link LaneRecord}s (their own partition and lane inputs), results {@code byte[]}
   * lane states.
   */
  final Lane[] lanes;

  /** An operator of {@link dev.sluice.spark.Sluice}'s API. */
  public OpSpec(Agg agg, int valueType) {
    this(agg, valueType, false, false, valueType != VALUE_DOUBLE);
  }

  /** An operator for Spark SQL's aggregates (no first level here). */
  public OpSpec(Agg agg, int valueType, boolean exact, boolean rawKeys) {
    this(agg, valueType, exact, rawKeys, false);
  }

  /** Several aggregates per group of a Spark SQL aggregate ({@link #lanes}). */
  public OpSpec(Lane[] lanes) {
    this.agg = Agg.SUM;
    this.valueType = VALUE_LONG;
    this.exact = false;
    this.rawKeys = true;
    this.firstLevel = false;
    this.lanes = lanes.clone();
    Lane.code(lanes);
  }

  private OpSpec(Agg agg, int valueType, boolean exact, boolean rawKeys, boolean firstLevel) {
    if (exact && (agg != Agg.SUM || valueType == VALUE_DOUBLE)) {
      throw new IllegalArgumentException("only a sum of integers is exact, not " + agg);
    }
    this.agg = agg;
    this.valueType = valueType;
    this.exact = exact;
    this.rawKeys = rawKeys;
    this.firstLevel = firstLevel;
    this.lanes = null;
  }

  /** The offloaded operator {@code handle}'s shuffle computes, or null when it computes none. */
  public static OpSpec of(SluiceShuffleHandle<?, ?, ?> handle) {
    return handle.kind() instanceof ShuffleKind.Operator o ? (OpSpec) o.op() : null;
  }

  /**
   * The native side's function code. A count runs as a sum of counts (each record counts 1, a
   * first level's partial its count), so partial counts and single records merge alike.
   */
  @Override
  public int function() {
    if (lanes != null) {
      return CODE_LANES;
    }
    if (exact) {
      return CODE_SUM_EXACT;
    }
    return agg == Agg.COUNT ? Agg.SUM.code : agg.code;
  }

  /**
   * The value type the engine aggregates: a count's and a sum of integers' are longs (a partial
   * sum of ints leaves the int range); otherwise the declared one.
   */
  @Override
  public int engineValueType() {
    if (lanes != null) {
      return Lane.code(lanes);
    }
    return agg == Agg.COUNT || (agg == Agg.SUM && valueType == VALUE_INT) ? VALUE_LONG : valueType;
  }

  /** The value type code of a value class, or -1 when the engine has none for it. */
  public static int valueTypeOf(Class<?> c) {
    if (c == Long.class) {
      return VALUE_LONG;
    }
    if (c == Integer.class) {
      return VALUE_INT;
    }
    if (c == Double.class) {
      return VALUE_DOUBLE;
    }
    return -1;
  }

  /** Bytes of one value in an engine record. */
  int valueBytes() {
    if (lanes != null) {
      return Lane.inputBytes(lanes);
    }
    return engineValueType() == VALUE_INT ? 4 : 8;
  }

  /**
   * The bytes of a string key: a {@code String}'s UTF-8 encoding, or, where this spec takes raw
   * keys (Spark SQL's strings, partitioned by their bytes), a {@code byte[]} as it is; null for a
   * key of another type. A {@code byte[]} key of the public operators is refused: Spark's hash
   * partitioner places an array by its identity, so equal arrays would be reduced apart. So is a
   * {@code String} holding an unpaired surrogate, which UTF-8 cannot encode: Java's encoder would
   * make it {@code ?} and merge it with another key.
   */
  byte[] keyUtf8(Object key) {
    if (key instanceof String s) {
      byte[] utf8 = s.getBytes(StandardCharsets.UTF_8);
      // The encoder writes '?' for what it cannot encode: only then is the string checked.
      for (byte c : utf8) {
        if (c == '?') {
          checkEncodable(s);
          break;
        }
      }
      return utf8;
    }
    if (key instanceof byte[] bytes) {
      if (rawKeys) {
        return bytes;
      }
      throw new IllegalArgumentException(
          "Sluice's offloaded operators take Long, Integer or String keys, not byte[] (Spark's"
              + " hash partitioner places an array by its identity, not its contents)");
    }
    return null;
  }

  /** Fails for a string holding an unpaired surrogate (no UTF-8 encoding). */
  private static void checkEncodable(String s) {
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      boolean paired =
          Character.isHighSurrogate(c)
              ? i + 1 < s.length() && Character.isLowSurrogate(s.charAt(++i))
              : !Character.isLowSurrogate(c);
      if (!paired) {
        throw new IllegalArgumentException(
            "a String key with an unpaired surrogate at index "
                + i
                + ": UTF-8 cannot encode it, so Sluice's offloaded operators cannot keep it apart"
                + " from other keys");
      }
    }
  }

  /**
   * Bytes of the key's tag and payload; {@code utf8} holds a string key's bytes ({@link
   * #keyUtf8}, computed once).
   */
  static int keyBytes(Object key, byte[] utf8) {
    if (key == null) {
      return 1;
    }
    if (key instanceof Long) {
      return 9;
    }
    if (key instanceof Integer) {
      return 5;
    }
    if (key instanceof String || key instanceof byte[]) {
      return 1 + utf8.length;
    }
    throw new IllegalArgumentException(
        "Sluice's offloaded operators take Long, Integer or String keys, not "
            + (key == null ? "null" : key.getClass().getName()));
  }

  /** Writes the key's tag and payload at the (little-endian) buffer's position. */
  static void putKey(ByteBuffer b, Object key, byte[] utf8) {
    if (key == null) {
      b.put(KEY_NULL);
    } else if (key instanceof Long) {
      b.put(KEY_LONG).putLong((Long) key);
    } else if (key instanceof Integer) {
      b.put(KEY_INT).putInt((Integer) key);
    } else {
      b.put(KEY_STRING).put(utf8);
    }
  }

  /**
   * Rebuilds a key from {@code len} bytes (tag and payload) at the (little-endian) buffer's
   * position.
   */
  Object getKey(ByteBuffer b, int len) {
    if (len < 1) {
      throw new dev.sluice.spark.api.SluiceException(
          "a Sluice result key of " + len + " bytes: no room for its tag");
    }
    byte tag = b.get();
    if (tag == KEY_LONG && len == 9) {
      return b.getLong();
    }
    if (tag == KEY_INT && len == 5) {
      return b.getInt();
    }
    if (tag == KEY_NULL && len == 1) {
      return null;
    }
    if (tag == KEY_STRING) {
      byte[] s = new byte[len - 1];
      b.get(s);
      return rawKeys ? s : new String(s, StandardCharsets.UTF_8);
    }
    throw new dev.sluice.spark.api.SluiceException(
        "a Sluice result key with tag " + tag + " and " + len + " bytes");
  }

  /**
   * A value as the engine aggregates it, in a long: a count's 1, an integer, or a double's bits.
   * Fails on a value of another type than the operator was declared over.
   */
  long engineValue(Object v) {
    if (agg == Agg.COUNT) {
      return 1;
    }
    if (valueType == VALUE_LONG && v instanceof Long) {
      return (Long) v;
    }
    if (valueType == VALUE_INT && v instanceof Integer) {
      return (Integer) v;
    }
    if (valueType == VALUE_DOUBLE && v instanceof Double) {
      return Double.doubleToRawLongBits((Double) v);
    }
    throw new IllegalArgumentException(
        "Sluice."
            + agg
            + " was declared over "
            + VALUE_NAMES[valueType]
            + " values, got "
            + (v == null ? "null" : v.getClass().getName()));
  }

  /** Writes an {@link #engineValue} (or a partial state) at the buffer's position. */
  void putValue(ByteBuffer b, long v) {
    if (engineValueType() == VALUE_INT) {
      b.putInt((int) v);
    } else {
      b.putLong(v);
    }
  }

  /**
   * The result object of a {@code len}-byte little-endian result at the buffer's position: 8 bytes
   * (16 for an exact sum), or a lanes state as a {@code byte[]}.
   */
  Object getResult(ByteBuffer b, int len) {
    int want = lanes != null ? 8 * Lane.words(lanes) : exact ? 16 : 8;
    if (len != want) {
      throw new IllegalStateException(
          "a Sluice result of " + len + " bytes where the operator gives " + want);
    }
    if (lanes != null) {
      byte[] state = new byte[len];
      b.get(state);
      return state;
    }
    long bits = b.getLong();
    if (exact && b.getLong() != 0) {
      throw SqlAggregates.overflow("the engine's exact sum");
    }
    if (agg == Agg.COUNT) {
      return bits;
    }
    if (valueType == VALUE_DOUBLE) {
      return Double.longBitsToDouble(bits);
    }
    if (valueType == VALUE_INT && agg != Agg.SUM) {
      return (int) bits;
    }
    return bits;
  }
}
