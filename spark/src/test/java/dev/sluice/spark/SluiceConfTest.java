package dev.sluice.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import dev.sluice.spark.api.SluiceSetting;
import dev.sluice.spark.shuffle.SluiceConf;
import org.apache.spark.SparkConf;
import org.junit.jupiter.api.Test;

/** Sluice's settings as the manager reads them, without a SparkContext. */
class SluiceConfTest {
  private static int spill(String value) {
    SparkConf conf = new SparkConf(false);
    if (value != null) {
      conf.set(SluiceSetting.OPERATOR_SPILL.key, value);
    }
    return SluiceConf.spillStrategy(conf).code;
  }

  @Test
  void spillStrategiesMapToTheEngineCodes() {
    assertEquals(2, spill(null), "evict by default");
    assertEquals(0, spill("state"));
    assertEquals(1, spill("input"));
    assertEquals(2, spill(" Evict "));
  }

  @Test
  void anUnknownSpillStrategyIsRefusedByName() {
    IllegalArgumentException e =
        assertThrows(IllegalArgumentException.class, () -> spill("lru"));
    assertTrue(e.getMessage().contains(SluiceSetting.OPERATOR_SPILL.key), e.getMessage());
    assertTrue(e.getMessage().contains("lru"), e.getMessage());
  }
}
