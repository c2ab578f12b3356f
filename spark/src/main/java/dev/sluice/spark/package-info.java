/**
 * Sluice's Spark plugin: here, its entry points, the shuffle manager ({@link
 * SluiceShuffleManager}, set as {@code spark.shuffle.manager}) and the offloaded operators' API
 * ({@link Sluice}); in {@code api}, the types users name with them (aggregate functions, the byte
 * ordering a native {@code sortByKey} recognises, the settings, the exception); in {@code
 * metrics}, the counters. The other subpackages are the plugin's parts, one concern each; their
 * public classes are public only so that the parts can reach each other and are not an API.
 *
 * <p>The packages depend one way, each on those below it only (a test, {@code
 * PackageLayersTest}, fails on any reference upward), bottom to top:
 *
 * <ul>
 *   <li>{@code shim}: what differs between Spark lines (one source folder per line).
 *   <li>{@code api}: the shared types above, and the engine's fixed limits.
 *   <li>{@code jni}: the native entry points and every code that crosses JNI (the engine
 *       operator, spill strategies, checksum algorithms, the block stream's frame codes).
 *   <li>{@code metrics}: the counters the parts above add to, and the native library's holdings.
 *   <li>{@code combine}: Spark's own combiners run faster on the map and reduce sides (map-side
 *       combine, grouped reduce-side combine) and the fold table the pre-aggregators share.
 *   <li>{@code sort}: native sorts: key encodings ({@code sortByKey}, Spark SQL's sort orders),
 *       the sorted row partitioner and serializer, Spark SQL's row framing, the merged rows, the
 *       decode buffers and the range reader.
 *   <li>{@code shuffle}: a Sluice shuffle's handle and {@code ShuffleKind} (plain, ordered or an
 *       offloaded operator: what decides its writer, reader and engine operator), map-side writer
 *       and engine output, the fetch path's block stream and serializer manager, the reduce task's
 *       operator and memory, which shuffles Sluice covers, and the settings as a task reads them.
 *   <li>{@code ops}: offloaded operators (RDD and Spark SQL aggregates): their spec, map writer,
 *       reduce reader and first-level table.
 *   <li>this package: the entry points.
 *   <li>{@code sql}: the Spark SQL extension and its planner rules and physical operators.
 *   <li>{@code examples}: the example and benchmark jobs (a jar of their own).
 * </ul>
 */
package dev.sluice.spark;
