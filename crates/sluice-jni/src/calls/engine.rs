//! The process's engine: its settings and defaults, what it holds, the
//! shuffles registered with it, and the counts the host's checks read.

use jni::objects::{JClass, JObject};
use jni::sys::{jint, jlong, jlongArray};
use jni::JNIEnv;

use super::{guard, long_array, non_negative};
use crate::bridge::{self, HostSettings};
use crate::{ops, settings, stop};
use std::path::PathBuf;

/// `static native long unaccountedBytes(long bufferPoolBytes, long memoryBudget, int reduceTasks)`:
/// the engine's [`bridge::unaccounted_bytes`] plus `reduceTasks` times
/// [`bridge::unaccounted_task_bytes`].
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_unaccountedBytes<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    buffer_pool_bytes: jlong,
    memory_budget: jlong,
    reduce_tasks: jint,
) -> jlong {
    guard(&mut env, -1, |_| {
        let settings = HostSettings {
            offload_threads: 1,
            buffer_pool_bytes: non_negative(buffer_pool_bytes, "buffer pool bytes")? as usize,
            memory_budget: non_negative(memory_budget, "memory budget")? as usize,
            operator_state_bytes: 0,
            spill_dir: PathBuf::new(),
            ..bridge::host_defaults()
        };
        let tasks = non_negative(reduce_tasks.into(), "reduce tasks")? as u64;
        let task = bridge::unaccounted_task_bytes();
        let bytes = bridge::unaccounted_bytes(&settings).saturating_add(tasks.saturating_mul(task));
        Ok(jlong::try_from(bytes).unwrap_or(jlong::MAX))
    })
}

/// `static native long[] engineDefaults()`: the engine's defaults for the
/// settings a host passes to `openEngine` ([`bridge::host_defaults`]), for
/// the host's test that its own defaults agree.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_engineDefaults<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jlongArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let d = bridge::host_defaults();
        let values = [
            d.offload_threads,
            d.buffer_pool_bytes,
            d.memory_budget,
            d.operator_state_bytes,
            usize::from(d.pin_offload_threads),
            d.segment_bytes,
            usize::from(d.liquid_offload),
        ]
        .map(|v| v as u64);
        long_array(env, values)
    })
}

/// `static native void openEngine(EngineSettings settings)`: the settings
/// read by field ([`settings::read`]).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_openEngine<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    settings: JObject<'l>,
) {
    guard(&mut env, (), |env| {
        let settings = settings::read(env, &settings)?;
        stop::install(env)?;
        bridge::open_engine(&settings).map(|_| ())
    })
}

/// `static native int registerShuffle(int partitions, int maps, EngineOp op)`:
/// the engine id. `op` is read by field ([`ops::HostOp::read`]): none,
/// a sort ([`ops::OP_SORT`]), or an offloaded aggregation (codes of
/// [`ops::agg_spec`]) spilling by its strategy ([`ops::spill_strategy`]).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_registerShuffle<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    partitions: jint,
    maps: jint,
    op: JObject<'l>,
) -> jint {
    guard(&mut env, -1, |env| {
        let p = non_negative(partitions.into(), "partitions")? as u32;
        let m = non_negative(maps.into(), "map count")? as u32;
        let op = ops::HostOp::read(env, &op)?.stage_spec()?;
        Ok(bridge::register_shuffle(p, m, op)? as jint)
    })
}

/// `static native void unregisterShuffle(int engineShuffle)`
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_unregisterShuffle<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    shuffle: jint,
) {
    guard(&mut env, (), |_| bridge::unregister_shuffle(shuffle as u32))
}

/// `static native long[] engineHeld()`: what the process's engine holds
/// now ([`sluice_engine::EngineHeld`]: map buffers, operator state, results,
/// free pages, the free pages' limit, in bytes); zeros before it opens.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_engineHeld<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jlongArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let h = bridge::engine().map(|e| e.held()).unwrap_or_default();
        let values = [
            h.buffer_bytes,
            h.operator_bytes,
            h.results_bytes,
            h.free_page_bytes,
            h.free_page_limit,
        ]
        .map(|v| v as u64);
        long_array(env, values)
    })
}

/// `static native long stoppedWaits()`: see [`sluice_engine::waits::stopped_waits`].
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_stoppedWaits<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jlong {
    sluice_engine::waits::stopped_waits() as jlong
}
