/**
 * The plugin's counters in this JVM ({@link dev.sluice.spark.metrics.SluiceMetrics}): what the
 * parts above count as they run, and what the native library holds, which tests and jobs read.
 * Above the JNI boundary, below every part that counts.
 */
package dev.sluice.spark.metrics;
