package dev.sluice.spark.service;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.api.Agg;
import dev.sluice.spark.jni.EngineOp;
import dev.sluice.spark.jni.SpillStrategy;
import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Test;

/** Which shuffles the daemons reduce, per {@code service.reduceAtDaemon}. */
class ServiceConfTest {
  private static ServiceConf conf(String reduceAtDaemon) {
    SparkConf c =
        new SparkConf(false)
            .set("spark.sluice.mode", "service")
            .set("spark.sluice.service.daemons", "127.0.0.1:7000, 127.0.0.2:7000")
            .set("spark.sluice.service.app", "app")
            .set("spark.sluice.service.appSecret", "00".repeat(32));
    if (reduceAtDaemon != null) {
      c.set("spark.sluice.service.reduceAtDaemon", reduceAtDaemon);
    }
    return ServiceConf.of(c);
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
}
