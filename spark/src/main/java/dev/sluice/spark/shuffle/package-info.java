/**
 * A Sluice shuffle under Spark, outside any operator: its handle, the map-side writers and the
 * attempt's engine output, the fetch path's verified block stream and the Spark SQL rows read
 * from it, the reduce task's native operator and its memory, which shuffles Sluice covers, and
 * the settings as a task reads them. Internal to the plugin.
 */
package dev.sluice.spark.shuffle;
