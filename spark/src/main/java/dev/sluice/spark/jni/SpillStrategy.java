package dev.sluice.spark.jni;

import java.util.Locale;

/**
 * What an offloaded operator's map side does when its state is full ({@code
 * spark.sluice.operatorSpill}), with the engine's codes ({@code sluice_jni::ops::spill_strategy};
 * {@code crates/sluice-jni/tests/contract.rs} checks both sides).
 */
public enum SpillStrategy {
  /** Emit every group and start empty (SmartShuffle's first). */
  STATE(0),
  /** Keep the groups, pass records with new keys through (SmartShuffle's second). */
  INPUT(1),
  /** A cache of groups where a new key evicts one group of its full bucket (Sluice's own). */
  EVICT(2);

  /** The engine's code. */
  public final int code;

  SpillStrategy(int code) {
    this.code = code;
  }

  /** The strategy a setting names (any case, spaces around), or null if none does. */
  public static SpillStrategy named(String value) {
    String v = value.trim().toUpperCase(Locale.ROOT);
    for (SpillStrategy s : values()) {
      if (s.name().equals(v)) {
        return s;
      }
    }
    return null;
  }
}
