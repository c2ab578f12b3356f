package dev.sluice.spark;

import org.apache.spark.ShuffleDependency;
import org.apache.spark.shuffle.BaseShuffleHandle;

/** The handle of a shuffle that runs through the Sluice engine (others keep Spark's handles). */
public final class SluiceShuffleHandle<K, V, C> extends BaseShuffleHandle<K, V, C> {
  private static final long serialVersionUID = 1L;

  /** Map tasks of the shuffle (the dependency's RDD is not shipped to executors). */
  private final int numMaps;
  /** The offloaded operator of a {@link Sluice} shuffle, or null for a plain one. */
  private final OpSpec op;
  /** The {@link SortKeys} kind of a shuffle the engine sorts, or {@link SortKeys#NONE}. */
  private final int sortKind;

  SluiceShuffleHandle(
      int shuffleId, ShuffleDependency<K, V, C> dependency, int numMaps, OpSpec op, int sortKind) {
    super(shuffleId, dependency);
    this.numMaps = numMaps;
    this.op = op;
    this.sortKind = sortKind;
  }

  OpSpec op() {
    return op;
  }

  int sortKind() {
    return sortKind;
  }

  /** The engine operator this shuffle registers and reduces with. */
  EngineOp engineOp() {
    if (op != null) {
      return EngineOp.aggregate(op);
    }
    return sortKind == SortKeys.NONE ? EngineOp.NONE : EngineOp.SORT;
  }

  public int numMaps() {
    return numMaps;
  }
}
