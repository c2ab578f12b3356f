/**
 * Offloaded operators: aggregates the engine runs map side and reduce side ({@code
 * Sluice.reduceByKey}, {@code Sluice.distinct}, Spark SQL aggregates), with their spec, map
 * writer, reduce reader and the map thread's first-level table. Internal to the plugin.
 */
package dev.sluice.spark.ops;
