/**
 * The JNI boundary: {@link dev.sluice.spark.jni.SluiceNative}'s native methods (crate {@code
 * sluice-jni}) and every code that crosses it, as enums or typed objects with explicit codes that
 * {@code crates/sluice-jni/tests/contract.rs} checks against the Rust side. Internal to the plugin.
 */
package dev.sluice.spark.jni;
