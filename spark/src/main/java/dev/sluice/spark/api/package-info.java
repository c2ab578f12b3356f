/**
 * The types every part of the plugin and its users name, at the bottom of the plugin's layers: the
 * aggregate functions of the offloaded operators ({@link dev.sluice.spark.api.Agg}), the byte
 * ordering a native {@code sortByKey} recognises ({@link dev.sluice.spark.api.BytesOrdering}), the
 * settings registry ({@link dev.sluice.spark.api.SluiceSetting}) with the engine's fixed limits
 * ({@link dev.sluice.spark.api.Limits}), and the exception a task fails with ({@link
 * dev.sluice.spark.api.SluiceException}). It names no other package of the plugin.
 */
package dev.sluice.spark.api;
