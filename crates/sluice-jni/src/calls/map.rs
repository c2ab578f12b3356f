//! A map attempt's calls: open, hand buffers over, spill, commit, abort
//! (`bridge::HostMapTask`, by the handle `mapOpen` returned).

use jni::objects::{JByteBuffer, JClass, JObject, JString};
use jni::sys::{jboolean, jint, jlong, jlongArray};
use jni::JNIEnv;

use super::{direct_memory, guard, long_array, non_negative, path_from};
use crate::bridge::{self, HostMapTask};
use crate::error::BridgeError;
use crate::format::HostFormat;
use crate::handles::{tag, Registry};

/// The open map attempts, by the handle `mapOpen` returned.
static MAP_TASKS: Registry<HostMapTask> = Registry::new("map attempt", tag::MAP_ATTEMPT);

/// `static native long mapOpen(int engineShuffle, int mapIndex, int attempt, int partitions, boolean hostKeys, boolean rowChecksums)`
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_mapOpen<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    shuffle: jint,
    map: jint,
    attempt: jint,
    partitions: jint,
    host_keys: jboolean,
    row_checksums: jboolean,
) -> jlong {
    guard(&mut env, 0, |_| {
        let task = HostMapTask::open(
            shuffle as u32,
            non_negative(map.into(), "map index")? as u32,
            non_negative(attempt.into(), "attempt")? as u32,
            non_negative(partitions.into(), "partitions")? as u32,
            host_keys != 0,
            row_checksums != 0,
        )?;
        Ok(MAP_TASKS.insert(task))
    })
}

/// `static native long[] mapRowChecksums(long task)`: the row checksums of
/// the records handed over so far, each partition's XOR then each
/// partition's SUM (see `row_checksum`); the attempt must have been opened
/// with `rowChecksums`.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_mapRowChecksums<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    task: jlong,
) -> jlongArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let values = MAP_TASKS.with(task, |t| {
            t.row_checksums().ok_or_else(|| {
                BridgeError::Argument("row checksums of an attempt opened without them".into())
            })
        })?;
        long_array(env, values)
    })
}

/// `static native void mapProduce(long task, ByteBuffer direct, int bytes, int records)`
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_mapProduce<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    task: jlong,
    buffer: JByteBuffer<'l>,
    bytes: jint,
    records: jint,
) {
    guard(&mut env, (), |env| {
        let len = non_negative(bytes.into(), "buffer length")? as usize;
        let count = non_negative(records.into(), "record count")? as u32;
        let (addr, capacity) = direct_memory(env, &buffer)?;
        if len > capacity {
            return Err(BridgeError::Argument(format!(
                "{len} bytes claimed in a {capacity}-byte buffer"
            )));
        }
        // SAFETY: a direct buffer's address is valid for its capacity while
        // the Java caller holds the buffer (it does, for this call), and
        // `len <= capacity`.
        let data = unsafe { std::slice::from_raw_parts(addr as *const u8, len) };
        MAP_TASKS.with(task, |task| task.produce(data, count))
    })
}

/// `static native long[] mapCommit(long task, String dataFile, OutputFormat format)`:
/// each partition's bytes in the file, then (if `format` has a checksum,
/// [`HostFormat::checksum`]) each partition's Spark checksum, then
/// the records in the file (after any engine operator combined them). Frees
/// the task.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_mapCommit<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    task: jlong,
    path: JString<'l>,
    format: JObject<'l>,
) -> jlongArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        // Taken first so that the attempt is freed whatever fails below.
        let task = MAP_TASKS.take(task)?;
        let path = path_from(env, &path)?;
        let format = HostFormat::read(env, &format)?;
        let written = task.commit_to_file(&path, format.codec()?, format.checksum()?)?;
        let records: u64 = written.records.iter().sum();
        let values = written.lengths.iter().chain(&written.checksums).chain([&records]);
        long_array(env, values.copied())
    })
}

/// `static native long[] mapSpill(long task, String spillFile, OutputFormat format)`:
/// writes the output so far to the spill file in the format's codec and
/// frees it; returns the bytes of each partition's segment in the file.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_mapSpill<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    task: jlong,
    path: JString<'l>,
    format: JObject<'l>,
) -> jlongArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let path = path_from(env, &path)?;
        let codec = HostFormat::read(env, &format)?.codec()?;
        let lengths = MAP_TASKS.with(task, |task| task.spill(&path, codec))?;
        long_array(env, lengths)
    })
}

/// `static native void mapAbort(long task)`: drops the attempt's output.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_mapAbort<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    task: jlong,
) {
    guard(&mut env, (), |_| {
        drop(MAP_TASKS.take(task)?);
        Ok(())
    })
}

/// `static native long liveMapAttempts()`: see [`bridge::live_map_attempts`].
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_liveMapAttempts<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jlong {
    bridge::live_map_attempts() as jlong
}
