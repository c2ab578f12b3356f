package dev.sluice.spark.sql;

import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.fail;

import dev.sluice.spark.shim.Scala;
import dev.sluice.spark.sort.RowSortKey;
import java.math.BigDecimal;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HexFormat;
import java.util.List;
import java.util.Random;
import java.util.SplittableRandom;
import org.apache.spark.sql.catalyst.expressions.Ascending$;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BoundReference;
import org.apache.spark.sql.catalyst.expressions.Descending$;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.InterpretedOrdering;
import org.apache.spark.sql.catalyst.expressions.InterpretedUnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.NullsFirst$;
import org.apache.spark.sql.catalyst.expressions.NullsLast$;
import org.apache.spark.sql.catalyst.expressions.SortOrder;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.types.DataTypeUtils;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.api.Test;

/**
 * The native sort's byte keys order rows exactly as Spark SQL does: for random sort orders (one
 * to four columns of every type {@link NativeSortRule#kindOf} encodes, each ascending or
 * descending, nulls first or last) over rows of the values where encodings go wrong (negative
 * and subnormal floats, {@code -0.0}, NaNs of other bits, the extremes of every integral type,
 * dates and timestamps before 1970, negative decimals of both widths, strings and binaries with
 * bytes 0x00 and 0x80 to 0xFF and prefixes of each other), the rows sorted by their keys
 * (unsigned, lexicographic) are in Spark's {@link InterpretedOrdering}, and two rows have equal
 * keys exactly when Spark finds them equal. Checking each neighbour in key order suffices: Spark's
 * ordering is transitive, so agreement on neighbours is agreement on every pair.
 */
class SortKeyOrderSqlRowsTest {
  private static final int ROWS = 1500;
  private static final int ORDERS = 400;
  private static final double NULLS = 0.08;

  private static double nan(long bits) {
    return Double.longBitsToDouble(bits);
  }

  private static float nanF(int bits) {
    return Float.intBitsToFloat(bits);
  }

  private static Decimal dec(String v, int precision, int scale) {
    return Decimal.apply(new BigDecimal(v), precision, scale);
  }

  private static UTF8String str(String s) {
    return UTF8String.fromString(s);
  }

  private static byte[] bin(int... bytes) {
    byte[] b = new byte[bytes.length];
    for (int i = 0; i < bytes.length; i++) {
      b[i] = (byte) bytes[i];
    }
    return b;
  }

  /** A column: its type and the values drawn for it (Spark's internal representation). */
  private record Column(DataType type, Object[] values) {}

  private static final Column[] COLUMNS = {
    new Column(DataTypes.BooleanType, new Object[] {true, false}),
    new Column(
        DataTypes.ByteType, new Object[] {(byte) -128, (byte) -1, (byte) 0, (byte) 1, (byte) 127}),
    new Column(
        DataTypes.ShortType,
        new Object[] {
          (short) -32768, (short) -256, (short) -1, (short) 0, (short) 255, (short) 32767
        }),
    new Column(
        DataTypes.IntegerType,
        new Object[] {Integer.MIN_VALUE, -65536, -1, 0, 1, 255, 256, Integer.MAX_VALUE}),
    new Column(
        DataTypes.LongType,
        new Object[] {Long.MIN_VALUE, -(1L << 32), -1L, 0L, 1L, 1L << 31, Long.MAX_VALUE}),
    // Days since 1970: 0001-01-01, 1969-12-31, 1970-01-01, 9999-12-31.
    new Column(DataTypes.DateType, new Object[] {-719162, -1, 0, 1, 2932896}),
    // Microseconds since 1970, before and after it.
    new Column(
        DataTypes.TimestampType,
        new Object[] {-62135596800000000L, -1L, 0L, 1L, 4102444800000000L}),
    new Column(DataTypes.TimestampNTZType, new Object[] {-62135596800000000L, -1L, 0L, 1L}),
    new Column(
        DataTypes.FloatType,
        new Object[] {
          -Float.MAX_VALUE, -1e5f, -2.5f, -1f, -Float.MIN_VALUE, -0f, 0f, Float.MIN_VALUE,
          Float.MIN_NORMAL, 0.5f, 1f, Float.MAX_VALUE, Float.POSITIVE_INFINITY,
          Float.NEGATIVE_INFINITY, Float.NaN, nanF(0x7fc00001), nanF(0xffc00000), nanF(0x7f800001)
        }),
    new Column(
        DataTypes.DoubleType,
        new Object[] {
          -Double.MAX_VALUE, -1e10, -2.5, -1.0, -Double.MIN_VALUE, -0.0, 0.0, Double.MIN_VALUE,
          Double.MIN_NORMAL, 0.5, 1.0, Double.MAX_VALUE, Double.POSITIVE_INFINITY,
          Double.NEGATIVE_INFINITY, Double.NaN, nan(0x7ff8000000000001L), nan(0xfff8000000000000L),
          nan(0x7ff0000000000001L)
        }),
    // Decimals of up to 18 digits are a long in the row; wider ones, bytes of two's complement.
    new Column(
        DataTypes.createDecimalType(10, 2),
        new Object[] {
          dec("-99999999.99", 10, 2), dec("-1.01", 10, 2), dec("-0.01", 10, 2), dec("0", 10, 2),
          dec("0.01", 10, 2), dec("99999999.99", 10, 2)
        }),
    new Column(
        DataTypes.createDecimalType(20, 0),
        new Object[] {
          dec("-99999999999999999999", 20, 0), dec("-256", 20, 0), dec("-129", 20, 0),
          dec("-128", 20, 0), dec("-1", 20, 0), dec("0", 20, 0), dec("127", 20, 0),
          dec("128", 20, 0), dec("99999999999999999999", 20, 0)
        }),
    new Column(
        DataTypes.createDecimalType(38, 6),
        new Object[] {
          dec("-99999999999999999999999999999999.999999", 38, 6), dec("-1.000001", 38, 6),
          dec("-0.000001", 38, 6), dec("0", 38, 6), dec("0.000001", 38, 6),
          dec("12345678901234567890.123456", 38, 6),
          dec("99999999999999999999999999999999.999999", 38, 6)
        }),
    new Column(
        DataTypes.BinaryType,
        new Object[] {
          bin(), bin(0), bin(0, 0), bin(0, 1), bin(1), bin(0x7f), bin(0x80), bin(0x80, 0),
          bin(0xff), bin(0xff, 0), bin(0xff, 0xff), bin('a'), bin('a', 0), bin('a', 0, 'b'),
          bin('a', 'b'), bin('a', 0xff)
        }),
    new Column(
        DataTypes.StringType,
        new Object[] {
          str(""), str("a"), str("a\0"), str("a\0b"), str("ab"), str("\u00e9"), str("\u00ff"),
          str("\u0100"), str("\uffff"), str("\uD83D\uDE00"), str("Z"), str("z"), str("\u007f"),
          str("\0"), UTF8String.fromBytes("a\u00e9".getBytes(StandardCharsets.UTF_8))
        }),
  };

  @Test
  void keysOrderRowsAsSparkSqlDoes() {
    SplittableRandom random = new SplittableRandom(20261206);
    List<StructField> fields = new ArrayList<>();
    for (int c = 0; c < COLUMNS.length; c++) {
      fields.add(DataTypes.createStructField("c" + c, COLUMNS[c].type(), true));
    }
    StructType schema = DataTypes.createStructType(fields);
    List<Attribute> output = new ArrayList<>();
    Scala.asJava(DataTypeUtils.toAttributes(schema)).forEach(output::add);
    UnsafeRow[] rows = rows(random);
    int[] kindsSeen = new int[RowSortKey.DECIMAL + 1];
    for (int t = 0; t < ORDERS; t++) {
      List<SortOrder> order = randomOrder(output, random);
      RowSortKey key =
          NativeSortRule.keyOf(Scala.seq(order), Scala.seq(output), new ArrayList<>());
      assertNotNull(key, "every column type here has an encoding: " + order);
      for (SortOrder o : order) {
        kindsSeen[NativeSortRule.kindOf(o.dataType())]++;
      }
      check(key, new InterpretedOrdering(Scala.seq(order), Scala.seq(output)), rows, order);
    }
    for (int k = 0; k < kindsSeen.length; k++) {
      assertTrue(kindsSeen[k] > 0, "kind " + k + " drawn in no order");
    }
  }

  /** Rows sorted by key: Spark orders each before the next, or equal to it where the keys are. */
  private static void check(
      RowSortKey key, InterpretedOrdering spark, UnsafeRow[] rows, List<SortOrder> order) {
    byte[][] keys = new byte[rows.length][];
    Integer[] byKey = new Integer[rows.length];
    for (int i = 0; i < rows.length; i++) {
      keys[i] = key.encode(rows[i]);
      byKey[i] = i;
    }
    Arrays.sort(byKey, Comparator.comparing(i -> keys[i], Arrays::compareUnsigned));
    for (int j = 0; j + 1 < rows.length; j++) {
      int a = byKey[j];
      int b = byKey[j + 1];
      int byBytes = Integer.signum(Arrays.compareUnsigned(keys[a], keys[b]));
      int bySpark = Integer.signum(spark.compare(rows[a], rows[b]));
      if (byBytes != bySpark) {
        fail(
            "order "
                + order
                + ": rows "
                + shown(rows[a], order)
                + " and "
                + shown(rows[b], order)
                + " compare "
                + byBytes
                + " by key, "
                + bySpark
                + " by Spark SQL (key "
                + key
                + ")");
      }
    }
  }

  /** The values of {@code row}'s sorted columns, bits of floats and bytes of binaries shown. */
  private static String shown(UnsafeRow row, List<SortOrder> order) {
    List<String> values = new ArrayList<>();
    for (SortOrder o : order) {
      int c = Integer.parseInt(((Attribute) o.child()).name().substring(1));
      Object v = row.isNullAt(c) ? null : row.get(c, COLUMNS[c].type());
      if (v instanceof Double d) {
        v = d + " (0x" + Long.toHexString(Double.doubleToRawLongBits(d)) + ")";
      } else if (v instanceof Float f) {
        v = f + " (0x" + Integer.toHexString(Float.floatToRawIntBits(f)) + ")";
      } else if (v instanceof byte[] b) {
        v = HexFormat.of().formatHex(b);
      }
      values.add(String.valueOf(v));
    }
    return values.toString();
  }

  private static UnsafeRow[] rows(SplittableRandom random) {
    // Interpreted: the SQL jars' code generator (Janino) is not on this test's class path.
    List<Expression> columns = new ArrayList<>();
    for (int c = 0; c < COLUMNS.length; c++) {
      columns.add(new BoundReference(c, COLUMNS[c].type(), true));
    }
    UnsafeProjection project = InterpretedUnsafeProjection.createProjection(Scala.seq(columns));
    UnsafeRow[] rows = new UnsafeRow[ROWS];
    for (int i = 0; i < ROWS; i++) {
      GenericInternalRow row = new GenericInternalRow(COLUMNS.length);
      for (int c = 0; c < COLUMNS.length; c++) {
        Object[] values = COLUMNS[c].values();
        row.update(
            c, random.nextDouble() < NULLS ? null : values[random.nextInt(values.length)]);
      }
      rows[i] = project.apply(row).copy();
    }
    return rows;
  }

  private static List<SortOrder> randomOrder(List<Attribute> output, SplittableRandom random) {
    List<Integer> columns = new ArrayList<>();
    for (int c = 0; c < output.size(); c++) {
      columns.add(c);
    }
    Collections.shuffle(columns, new Random(random.nextLong()));
    List<SortOrder> order = new ArrayList<>();
    int n = 1 + random.nextInt(4);
    for (int i = 0; i < n; i++) {
      Expression column = output.get(columns.get(i));
      order.add(
          new SortOrder(
              column,
              random.nextBoolean() ? Ascending$.MODULE$ : Descending$.MODULE$,
              random.nextBoolean() ? NullsFirst$.MODULE$ : NullsLast$.MODULE$,
              Scala.seq(List.<Expression>of())));
    }
    return order;
  }
}
