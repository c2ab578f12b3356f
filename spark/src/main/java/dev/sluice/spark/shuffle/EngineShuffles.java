package dev.sluice.spark.shuffle;

/**
 * Marks the shuffle manager that runs shuffles through the Sluice engine ({@code
 * dev.sluice.spark.SluiceShuffleManager}, the one class a user names), so that the parts below it
 * ask whether Spark's shuffle manager is Sluice's without naming the class above them.
 */
public interface EngineShuffles {
  /** The class name a user sets as {@code spark.shuffle.manager}. */
  String MANAGER_CLASS = "dev.sluice.spark.SluiceShuffleManager";
}
