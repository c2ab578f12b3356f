package dev.sluice.spark.shuffle;

import dev.sluice.spark.jni.EngineOp;
import dev.sluice.spark.sort.SortKind;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.shuffle.BaseShuffleHandle;

/** The handle of a shuffle that runs through the Sluice engine (others keep Spark's handles). */
public final class SluiceShuffleHandle<K, V, C> extends BaseShuffleHandle<K, V, C> {
  private static final long serialVersionUID = 2L;

  /** Map tasks of the shuffle (the dependency's RDD is not shipped to executors). */
  private final int numMaps;
  /** What the shuffle computes, chosen on the driver. */
  private final ShuffleKind kind;

  public SluiceShuffleHandle(
      int shuffleId, ShuffleDependency<K, V, C> dependency, int numMaps, ShuffleKind kind) {
    super(shuffleId, dependency);
    this.numMaps = numMaps;
    this.kind = kind;
  }

  public ShuffleKind kind() {
    return kind;
  }

  /** The sort kind of an ordered shuffle, else {@link SortKind#NONE}. */
  public SortKind sortKind() {
    return kind instanceof ShuffleKind.Ordered o ? o.sort() : SortKind.NONE;
  }

  /** The engine operator this shuffle registers and reduces with. */
  public EngineOp engineOp() {
    return kind.engineOp();
  }

  public int numMaps() {
    return numMaps;
  }
}
