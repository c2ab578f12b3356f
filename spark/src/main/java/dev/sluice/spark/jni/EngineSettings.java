package dev.sluice.spark.jni;

/**
 * The settings a process's engine opens with ({@link SluiceNative#openEngine}), one typed object
 * the native side reads by field name and type ({@code sluice_jni::settings::read}; a field it
 * does not find fails the call), not nine arguments in an order both sides must keep. The
 * fields' meanings are the engine's ({@code sluice_jni::bridge::HostSettings}).
 */
public final class EngineSettings {
  /** Offload worker threads; read natively. */
  final int offloadThreads;
  /** Bytes of map buffers in flight before producers wait; read natively. */
  final long bufferPoolBytes;
  /** The engine's memory budget in bytes; read natively. */
  final long memoryBudget;
  /** An offloaded operator's map-side state per map attempt before it spills; read natively. */
  final long operatorStateBytes;
  /** The engine's own spill directory; read natively. */
  final String spillDir;
  /** Map tasks open at which they partition their own buffers (0: never); read natively. */
  final int inlineAtTasks;
  /** Pin offload worker {@code i} to core {@code i}; read natively. */
  final boolean pinOffloadThreads;
  /** Bytes of a scheduling segment; read natively. */
  final long segmentBytes;
  /** Host threads take a share of the map work while offload threads fall behind; read natively. */
  final boolean liquidOffload;

  public EngineSettings(
      int offloadThreads,
      long bufferPoolBytes,
      long memoryBudget,
      long operatorStateBytes,
      String spillDir,
      int inlineAtTasks,
      boolean pinOffloadThreads,
      long segmentBytes,
      boolean liquidOffload) {
    this.offloadThreads = offloadThreads;
    this.bufferPoolBytes = bufferPoolBytes;
    this.memoryBudget = memoryBudget;
    this.operatorStateBytes = operatorStateBytes;
    this.spillDir = spillDir;
    this.inlineAtTasks = inlineAtTasks;
    this.pinOffloadThreads = pinOffloadThreads;
    this.segmentBytes = segmentBytes;
    this.liquidOffload = liquidOffload;
  }
}
