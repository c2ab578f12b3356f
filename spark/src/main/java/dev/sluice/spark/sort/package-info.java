/**
 * Native sorts: the key encodings whose byte order is the job's order ({@code sortByKey}'s keys,
 * Spark SQL's sort orders), the sorted row partitioner and serializer, the merged rows a reduce
 * task reads, and the reader of coalesced partition ranges. Internal to the plugin.
 */
package dev.sluice.spark.sort;
