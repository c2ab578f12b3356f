package dev.sluice.spark.service;

/**
 * Which daemon owns which reduce partitions: daemon {@code n} of {@code N} owns the contiguous
 * partitions {@code [ceil(n P / N), ceil((n + 1) P / N))}, the engine's two-level partitioning
 * ({@code sluice_engine::node_of}; a test checks that both sides agree). Contiguous ranges keep a
 * range partitioner's order and make an adaptive reader's coalesced range one read per daemon.
 */
public final class Nodes {
  private Nodes() {}

  /** The daemon of reduce partition {@code r} of {@code partitions}, with {@code nodes} daemons. */
  public static int of(int r, int partitions, int nodes) {
    return (int) ((long) r * nodes / Math.max(1, partitions));
  }

  /** The first reduce partition daemon {@code n} owns ({@code partitions} for {@code n = N}). */
  public static int first(int n, int partitions, int nodes) {
    long p = partitions;
    long d = Math.max(1, nodes);
    return (int) Math.min(p, (n * p + d - 1) / d);
  }
}
