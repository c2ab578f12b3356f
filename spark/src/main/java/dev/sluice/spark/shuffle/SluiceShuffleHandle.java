package dev.sluice.spark.shuffle;

import dev.sluice.spark.jni.EngineOp;
import dev.sluice.spark.service.Assignment;
import dev.sluice.spark.service.CurrentAssignment;
import dev.sluice.spark.sort.SortKind;
import org.apache.spark.ShuffleDependency;
import org.apache.spark.shuffle.BaseShuffleHandle;

/** The handle of a shuffle that runs through the Sluice engine (others keep Spark's handles). */
public final class SluiceShuffleHandle<K, V, C> extends BaseShuffleHandle<K, V, C> {
  private static final long serialVersionUID = 4L;

  /** Map tasks of the shuffle (the dependency's RDD is not shipped to executors). */
  private final int numMaps;
  /** What the shuffle computes, chosen on the driver. */
  private final ShuffleKind kind;

  /**
   * The shuffle's generation and owning daemons at the service, or null when its map output stays
   * embedded. On the driver, {@code ServiceFailures} replaces the assignment in the cell after a
   * failed read at the daemons; Spark serializes a stage's tasks with the handle when it submits
   * the stage, so every task of a stage attempt sees one assignment, and a rerun stage the new one.
   */
  private final CurrentAssignment service;

  public SluiceShuffleHandle(
      int shuffleId, ShuffleDependency<K, V, C> dependency, int numMaps, ShuffleKind kind) {
    this(shuffleId, dependency, numMaps, kind, null);
  }

  public SluiceShuffleHandle(
      int shuffleId,
      ShuffleDependency<K, V, C> dependency,
      int numMaps,
      ShuffleKind kind,
      CurrentAssignment service) {
    super(shuffleId, dependency);
    this.numMaps = numMaps;
    this.kind = kind;
    this.service = service;
  }

  /** Whether the shuffle's map output goes to the service's daemons. */
  public boolean service() {
    return service != null;
  }

  /** The shuffle's generation and owners at the daemons now, or null (see {@link #service}). */
  public Assignment assignment() {
    return service == null ? null : service.get();
  }

  /**
   * Whether a shuffle of this kind and dependency can go to the daemons: one whose reduce side
   * runs in the engine (a sort's merge, an operator's final aggregate: the reduce task feeds it
   * the daemon's stream), or records as they are (no aggregator, no ordering), which a reader
   * deserializes as they come. A plain shuffle with Spark's aggregator or ordering stays embedded
   * (its reader is Spark's).
   */
  public static boolean serviceCovers(ShuffleKind kind, ShuffleDependency<?, ?, ?> dependency) {
    return kind.nativeReduce()
        || (dependency.aggregator().isEmpty()
            && dependency.keyOrdering().isEmpty()
            && !dependency.mapSideCombine());
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
