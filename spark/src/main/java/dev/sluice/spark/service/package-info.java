/**
 * The client of the service's daemons ({@code docs/service.md}): which daemon owns which reduce
 * partitions ({@link dev.sluice.spark.service.Nodes}), the settings ({@link
 * dev.sluice.spark.service.ServiceConf}), one pool of connections per JVM ({@link
 * dev.sluice.spark.service.Daemons}), a map attempt's push ({@link
 * dev.sluice.spark.service.ServicePush}) and a reduce task's streams ({@link
 * dev.sluice.spark.service.ServiceStreams}). Internal to the plugin.
 */
package dev.sluice.spark.service;
