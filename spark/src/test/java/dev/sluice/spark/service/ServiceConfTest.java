package dev.sluice.spark.service;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.api.Agg;
import dev.sluice.spark.jni.EngineOp;
import dev.sluice.spark.jni.SpillStrategy;
import dev.sluice.spark.shuffle.Coverage;
import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Test;

/**
 * Which shuffles the daemons reduce, per {@code service.reduceAtDaemon}; which map outputs they
 * take, per {@code service.minPushBytes} and {@code service.minShuffleBytes}.
 */
class ServiceConfTest {
  private static final long MIB = 1L << 20;

  private static ServiceConf conf(String reduceAtDaemon) {
    return ServiceConf.of(settings(reduceAtDaemon));
  }

  private static SparkConf settings(String reduceAtDaemon) {
    SparkConf c =
        new SparkConf(false)
            .set("spark.sluice.mode", "service")
            .set("spark.sluice.service.daemons", "127.0.0.1:7000, 127.0.0.2:7000")
            .set("spark.sluice.service.app", "app")
            .set("spark.sluice.service.appSecret", "00".repeat(32));
    if (reduceAtDaemon != null) {
      c.set("spark.sluice.service.reduceAtDaemon", reduceAtDaemon);
    }
    return c;
  }

  private static final EngineOp SUM =
      EngineOp.aggregate(Agg.SUM.code, 0, SpillStrategy.STATE);

  @Test
  void autoReducesAggregatesAtTheDaemonsAndLeavesSortsToTheTasks() {
    ServiceConf auto = conf(null);
    assertEquals("auto", auto.reduceAtDaemon, "the default");
    assertEquals(2, auto.nodes());
    assertTrue(auto.reducesAtDaemon(SUM));
    assertFalse(auto.reducesAtDaemon(EngineOp.SORT));
    assertFalse(auto.reducesAtDaemon(EngineOp.NONE));
    assertFalse(auto.reducesAtDaemon(null));
  }

  @Test
  void hostWideUnregisteringUnderTheExternalShuffleServiceKeepsShufflesEmbedded() {
    SparkConf c = settings(null);
    assertNull(ServiceConf.sparkSettingsReason(c));
    c.set("spark.shuffle.service.enabled", "true");
    assertNull(ServiceConf.sparkSettingsReason(c), "the service alone: by executor id");
    c.set("spark.files.fetchFailure.unRegisterOutputOnHost", "true");
    assertTrue(ServiceConf.sparkSettingsReason(c).contains("unRegisterOutputOnHost"));
    c.set("spark.shuffle.service.enabled", "false");
    assertNull(ServiceConf.sparkSettingsReason(c), "without the service: by executor id");
  }

  @Test
  void trueReducesEveryOperatorAndFalseNone() {
    ServiceConf on = conf("TRUE");
    assertTrue(on.reducesAtDaemon(SUM));
    assertTrue(on.reducesAtDaemon(EngineOp.SORT));
    assertFalse(on.reducesAtDaemon(EngineOp.NONE), "a plain shuffle has nothing to run");
    ServiceConf off = conf("false");
    assertFalse(off.reducesAtDaemon(SUM));
    assertFalse(off.reducesAtDaemon(EngineOp.SORT));
  }

  @Test
  void anotherValueIsRefusedNamingTheSetting() {
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> conf("sometimes"));
    assertTrue(e.getMessage().contains("service.reduceAtDaemon"), e.getMessage());
  }

  @Test
  void outputsOfSmallShufflesStayOnTheirExecutors() {
    ServiceConf d = conf(null);
    assertEquals(MIB, d.minPushBytes, "the default");
    assertEquals(256 * MIB, d.minShuffleBytes, "the default");
    String four = d.keepReason(20 * MIB, 4);
    assertTrue(four != null && four.contains("service.minShuffleBytes"), four);
    assertTrue(four.contains("about " + 80 * MIB + " bytes"), four);
    assertNull(d.keepReason(20 * MIB, 13), "260 MiB estimated: pushed");
    assertNull(d.keepReason(256 * MIB, 1), "one map of the whole size: pushed");
    String tiny = d.keepReason(MIB - 1, 100_000);
    assertTrue(tiny != null && tiny.contains("service.minPushBytes"), tiny);
    ServiceConf all =
        ServiceConf.of(
            settings(null)
                .set("spark.sluice.service.minPushBytes", "0")
                .set("spark.sluice.service.minShuffleBytes", "0"));
    assertNull(all.keepReason(0, 1), "0 and 0 push every output");
  }

  @Test
  void underSluicesStoragePluginEveryOutputIsPushed() {
    SparkConf c = settings(null);
    assertFalse(ServiceConf.of(c).reliableStorage, "Spark's local disk: outputs may stay");
    c.set(ServiceConf.STORAGE_PLUGIN_KEY, ServiceConf.STORAGE_PLUGIN);
    ServiceConf reliable = ServiceConf.of(c);
    assertTrue(reliable.reliableStorage);
    assertNull(reliable.keepReason(0, 1), "an executor given back keeps no output: all pushed");
    assertNull(reliable.keepReason(MIB - 1, 4));
    assertNull(Coverage.settingsReason(c), "Sluice writes under its own plugin");
  }

  @Test
  void theEstimateSaturates() {
    assertEquals(Long.MAX_VALUE, ServiceConf.shuffleEstimate(Long.MAX_VALUE / 2, 3));
    assertEquals(6 * MIB, ServiceConf.shuffleEstimate(2 * MIB, 3));
    assertEquals(2 * MIB, ServiceConf.shuffleEstimate(2 * MIB, 0), "at least its own output");
  }
}
