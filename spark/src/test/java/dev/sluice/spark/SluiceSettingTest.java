package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.api.Limits;
import dev.sluice.spark.api.SluiceSetting;
import dev.sluice.spark.jni.SluiceNative;
import dev.sluice.spark.shuffle.SluiceConf;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import org.apache.spark.HashPartitioner;
import org.apache.spark.SparkConf;
import org.apache.spark.SparkException;
import org.apache.spark.api.java.JavaSparkContext;
import org.junit.jupiter.api.Test;
import scala.Tuple2;

/** The settings registry: the generated docs, the native defaults, parsing, one engine per JVM. */
class SluiceSettingTest {
  /** {@code docs/configuration.md}, from Maven's working directory ({@code spark/}). */
  private static final Path DOCS = Paths.get("..", "docs", "configuration.md");

  @Test
  void theConfigurationDocIsGeneratedFromTheRegistry() throws IOException {
    String want = SluiceSetting.markdown();
    if (Boolean.getBoolean("sluice.writeDocs")) {
      Files.writeString(DOCS, want, StandardCharsets.UTF_8);
    }
    String have = Files.exists(DOCS) ? Files.readString(DOCS, StandardCharsets.UTF_8) : "";
    assertEquals(
        want,
        have,
        DOCS
            + " is stale: regenerate it with (cd spark && mvn -q -B test -Dtest=SluiceSettingTest"
            + " -Dsluice.writeDocs=true)");
    for (SluiceSetting s : SluiceSetting.values()) {
      assertTrue(have.contains("`" + s.key + "`"), s.key);
    }
  }

  @Test
  void engineDefaultsAgreeWithTheNativeSide() {
    SparkConf none = new SparkConf(false);
    long[] java = {
      SluiceSetting.OFFLOAD_THREADS.integer(none),
      SluiceSetting.BUFFER_POOL_BYTES.bytes(none),
      SluiceSetting.MEMORY_BUDGET.bytes(none),
      SluiceSetting.OPERATOR_STATE_BYTES.bytes(none),
      SluiceSetting.PIN_OFFLOAD_THREADS.flag(none) ? 1 : 0,
      SluiceSetting.SEGMENT_BYTES.bytes(none),
      SluiceSetting.LIQUID_OFFLOAD.flag(none) ? 1 : 0
    };
    assertArrayEquals(SluiceNative.engineDefaults(), java);
    assertEquals(Limits.RECORD_BYTES_MAX, SluiceSetting.RECORD_BYTES_MAX.bytes(none));
  }

  @Test
  void everyDefaultParsesWithinItsBounds() {
    SparkConf none = new SparkConf(false);
    for (SluiceSetting s : SluiceSetting.values()) {
      assertTrue(s.key.startsWith(SluiceSetting.PREFIX), s.key);
      assertEquals(s, SluiceSetting.of(s.key));
      switch (s.type) {
        case INT -> s.integer(none);
        case BYTES -> s.bytes(none);
        case BOOLEAN -> s.flag(none);
        case CHOICE -> assertTrue(s.choices().contains(s.choice(none)), s.key);
        case TEXT -> assertEquals(s.defaultValue, s.text(none), s.key);
      }
    }
    SluiceConf c = new SluiceConf(none);
    assertEquals(1 << 20, c.bufferBytes);
    assertTrue(c.inlineWhenBusy);
  }

  private static IllegalArgumentException refused(String key, String value) {
    SparkConf conf = new SparkConf(false).set(key, value);
    return assertThrows(IllegalArgumentException.class, () -> new SluiceConf(conf));
  }

  @Test
  void aValueOutOfBoundsOrOfTheWrongTypeIsRefusedByName() {
    String k = SluiceSetting.BUFFER_BYTES.key;
    IllegalArgumentException e = refused(k, "128m");
    assertTrue(e.getMessage().contains(k + " is 128 MiB"), e.getMessage());
    assertTrue(e.getMessage().contains("between 4 KiB and 64 MiB"), e.getMessage());
    e = refused(SluiceSetting.MEMORY_BUDGET.key, "lots");
    assertTrue(e.getMessage().contains("spark.sluice.memoryBudget is 'lots'"), e.getMessage());
    e = refused(SluiceSetting.OFFLOAD_THREADS.key, "0");
    assertTrue(e.getMessage().contains("spark.sluice.offloadThreads is 0"), e.getMessage());
    e = refused(SluiceSetting.SQL_ROWS_DIRECT.key, "yes");
    assertTrue(e.getMessage().contains("true or false expected"), e.getMessage());
    assertFalse(
        new SluiceConf(new SparkConf(false).set(SluiceSetting.SQL_ROWS_DIRECT.key, " FALSE "))
            .sqlRowsDirect);
  }

  private static long shuffled(JavaSparkContext sc) {
    return sc.parallelize(Arrays.asList(1, 2, 3, 4), 2)
        .mapToPair(i -> new Tuple2<>(i, i))
        .partitionBy(new HashPartitioner(2))
        .count();
  }

  @Test
  void aLaterContextAskingForOtherEngineSettingsFailsNamingThem() throws IOException {
    String manager = SluiceShuffleManager.class.getName();
    // The JVM's engine opens (or is already open) with the defaults.
    JavaSparkContext sc = SparkContexts.start(manager, SparkContexts.scratch());
    try {
      assertEquals(4, shuffled(sc));
    } finally {
      sc.stop();
    }
    JavaSparkContext other =
        SparkContexts.start(
            manager,
            SparkContexts.scratch(),
            new SparkConf().set(SluiceSetting.MEMORY_BUDGET.key, "128m"));
    try {
      SparkException e = assertThrows(SparkException.class, () -> shuffled(other));
      assertTrue(
          e.getMessage().contains("spark.sluice.memoryBudget: the engine has 268435456, asked for"),
          e.getMessage());
      assertTrue(e.getMessage().contains("one engine per JVM"), e.getMessage());
    } finally {
      other.stop();
    }
    // The same settings as the engine's are fine again.
    JavaSparkContext again = SparkContexts.start(manager, SparkContexts.scratch());
    try {
      assertEquals(4, shuffled(again));
    } finally {
      again.stop();
    }
  }
}
