package dev.sluice.spark.shuffle;

import dev.sluice.spark.Sluice;
import dev.sluice.spark.jni.EngineOp;
import dev.sluice.spark.jni.SpillStrategy;
import dev.sluice.spark.ops.OpSpec;
import dev.sluice.spark.sort.SortKind;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.shuffle.BaseShuffleHandle;

/** The handle of a shuffle that runs through the Sluice engine (others keep Spark's handles). */
public final class SluiceShuffleHandle<K, V, C> extends BaseShuffleHandle<K, V, C> {
  private static final long serialVersionUID = 1L;

  /** Map tasks of the shuffle (the dependency's RDD is not shipped to executors). */
  private final int numMaps;
  /** The offloaded operator of a {@link Sluice} shuffle, or null for a plain one. */
  private final OpSpec op;
  /**
   * The map-side spilling strategy of an offloaded operator ({@link
   * dev.sluice.spark.SluiceSetting#OPERATOR_SPILL} on the driver, so every executor spills alike).
   */
  private final SpillStrategy operatorSpill;
  /** The {@link SortKind} kind of a shuffle the engine sorts, or {@link SortKind#NONE}. */
  private final SortKind sortKind;

  public SluiceShuffleHandle(
      int shuffleId,
      ShuffleDependency<K, V, C> dependency,
      int numMaps,
      OpSpec op,
      SpillStrategy operatorSpill,
      SortKind sortKind) {
    super(shuffleId, dependency);
    this.numMaps = numMaps;
    this.op = op;
    this.operatorSpill = operatorSpill;
    this.sortKind = sortKind;
  }

  public OpSpec op() {
    return op;
  }

  public SortKind sortKind() {
    return sortKind;
  }

  /** The engine operator this shuffle registers and reduces with. */
  public EngineOp engineOp() {
    if (op != null) {
      return EngineOp.aggregate(op, operatorSpill);
    }
    return sortKind == SortKind.NONE ? EngineOp.NONE : EngineOp.SORT;
  }

  public int numMaps() {
    return numMaps;
  }
}
