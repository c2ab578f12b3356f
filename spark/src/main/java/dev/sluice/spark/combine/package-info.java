/**
 * Spark's own combiners ({@code reduceByKey} and the like with Java functions), run faster: the
 * map-side combine table with eviction, the reduce side's grouped combine, and the long-fold
 * table the two pre-aggregators share. Internal to the plugin.
 */
package dev.sluice.spark.combine;
