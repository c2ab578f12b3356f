/**
 * Sluice's Spark plugin, the names a user writes: the shuffle manager ({@link
 * SluiceShuffleManager}, set as {@code spark.shuffle.manager}), the offloaded operators ({@link
 * Sluice}, {@link Agg}), the byte ordering a native {@code sortByKey} recognises ({@link
 * BytesOrdering}), the settings ({@link SluiceSetting}), the exception and the counters. The
 * subpackages are the plugin's parts, one concern each; their public classes are public only so
 * that the parts can reach each other and are not an API:
 *
 * <ul>
 *   <li>{@code shuffle}: a Sluice shuffle's handle, map-side writer and engine output, the fetch
 *       path's block stream and serializer manager, the reduce task's operator and memory, which
 *       shuffles Sluice covers, and the settings as a task reads them.
 *   <li>{@code ops}: offloaded operators (RDD and Spark SQL aggregates): their spec, map writer,
 *       reduce reader and first-level table.
 *   <li>{@code sort}: native sorts: key encodings ({@code sortByKey}, Spark SQL's sort orders),
 *       the sorted row partitioner and serializer, the merged rows and the range reader.
 *   <li>{@code combine}: Spark's own combiners run faster on the map and reduce sides (map-side
 *       combine, grouped reduce-side combine) and the fold table the pre-aggregators share.
 *   <li>{@code jni}: the native entry points and every code that crosses JNI (the engine
 *       operator, spill strategies, checksum algorithms).
 *   <li>{@code sql}: the Spark SQL extension and its planner rules and physical operators.
 * </ul>
 */
package dev.sluice.spark;
