package dev.sluice.spark.ops;

/**
 * The key of a Spark SQL aggregate by several columns as its map tasks hand it to the engine: the
 * bytes of the grouping columns' {@code UnsafeRow} (binary equality is Spark's own hash-aggregate
 * key equality) and the partition Spark SQL's hash partitioning of those columns gives it,
 * computed where the row was read. Results come back with the bytes alone.
 */
public record GroupKey(int partition, byte[] bytes) {}
