//! Sluice's JNI bridge: the embedded engine under Apache Spark (the Java
//! side is the `spark/` Maven module, class `dev.sluice.spark.jni.SluiceNative`).
//!
//! The JVM crosses into Rust once per buffer, never per record: a map task
//! serializes records into a direct buffer and hands it over whole
//! (`mapProduce`); the engine's offload workers group it by partition while
//! the task goes on serializing; `mapCommit` writes the attempt's output in
//! Spark's data-file layout, Sluice blocks inside each partition's segment.
//! A reduce task decodes one fetched block per call (`frameInfo`,
//! `decodeValues`).
//!
//! Every entry point runs under `catch_unwind`; an error or a panic becomes
//! a Java exception (see `error`), and the function returns a neutral value
//! the Java side never reads because the exception is pending.
//!
//! Everything the calls do is the engine's (`sluice_engine`): a Spark
//! shuffle is a host-owned engine shuffle, its map attempts
//! `FileMapTask`s writing data files (`sluice_engine::output`), its reduce
//! side block checks and `ReduceTask`s (`sluice_engine::reduce`). This
//! crate keeps the entry points, their argument checks and the mapping of
//! errors to Java exceptions:
//!
//! - `bridge`: the process's engine (one per JVM, its settings) and the
//!   map attempts it runs for the JVM.
//! - `row_checksum`: Spark's order-independent row checksum of a map
//!   attempt's rows, computed as they are handed over.
//! - `ops`: the host's operator codes (Java's `EngineOp`) checked into the
//!   engine's operator spec.
//! - `settings`: the engine's settings (Java's `EngineSettings`) read by
//!   field into the bridge's.
//! - `format`: how a map attempt's output is written (Java's
//!   `OutputFormat`: codec, level, checksum) checked into the engine's.
//! - `fields`: reading those typed objects by field name and type.
//! - `error`: errors and the Java exception each becomes.
//! - `handles`: the ids Java holds for open map attempts and reduce
//!   operators, checked on every call (never raw pointers).
//! - `stop`: the engine's check, in a wait, whether the JVM killed the
//!   waiting task.

pub mod bridge;
pub mod error;
pub mod fields;
pub mod format;
pub mod handles;
pub mod ops;
pub mod row_checksum;
pub mod settings;
pub mod stop;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use jni::objects::{JByteArray, JByteBuffer, JClass, JObject, JString, ReleaseMode};
use jni::sys::{jboolean, jint, jlong, jlongArray};
use jni::JNIEnv;
use sluice_core::format::header::HEADER_BYTES;
use sluice_engine::output::trailer;
use sluice_engine::reduce::{self, BlockName, ReduceTask};

use crate::bridge::{HostMapTask, HostSettings};
use crate::error::{BridgeError, BridgeResult};
use crate::format::HostFormat;
use crate::handles::Registry;

/// The open map attempts, by the handle `mapOpen` returned.
static MAP_TASKS: Registry<HostMapTask> = Registry::new("map attempt");

/// The open reduce operators, by the handle `reduceOpen` returned.
static REDUCE_TASKS: Registry<ReduceTask> = Registry::new("reduce operator");

/// Runs `f`, turning an error or a panic into a pending Java exception and
/// `fallback`.
fn guard<T>(
    env: &mut JNIEnv<'_>,
    fallback: T,
    f: impl FnOnce(&mut JNIEnv<'_>) -> BridgeResult<T>,
) -> T {
    let outcome = catch_unwind(AssertUnwindSafe(|| f(env)));
    let err = match outcome {
        Ok(Ok(v)) => return v,
        Ok(Err(e)) => e,
        Err(payload) => BridgeError::Panic(panic_text(payload.as_ref())),
    };
    // A pending exception (from a failed JNI call) is left as it is.
    if !env.exception_check().unwrap_or(true) {
        let _ = env.throw_new(err.java_class(), err.to_string());
    }
    fallback
}

/// Runs `f`, which reads the fetched bytes of `what`, turning its errors
/// and panics into what they are to the host ([`BridgeError::reading`]).
fn reading<T>(what: &BlockName, f: impl FnOnce() -> BridgeResult<T>) -> BridgeResult<T> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r.map_err(|e| e.reading(what)),
        Err(payload) => Err(BridgeError::Panic(panic_text(payload.as_ref())).reading(what)),
    }
}

fn panic_text(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "unknown panic payload".to_owned()
    }
}

fn non_negative(v: i64, what: &str) -> BridgeResult<u64> {
    u64::try_from(v).map_err(|_| BridgeError::Argument(format!("{what} is negative ({v})")))
}

/// A file path the Java side passed.
fn path_from(env: &mut JNIEnv<'_>, path: &JString<'_>) -> BridgeResult<PathBuf> {
    let path: String = env.get_string(path)?.into();
    Ok(PathBuf::from(path))
}

/// The whole memory of a direct buffer, as (address, capacity).
fn direct_memory(env: &mut JNIEnv<'_>, buffer: &JByteBuffer<'_>) -> BridgeResult<(*mut u8, usize)> {
    Ok((env.get_direct_buffer_address(buffer)?, env.get_direct_buffer_capacity(buffer)?))
}

/// The first `len` bytes of a Java byte array, from a JNI critical section:
/// `f` runs while the section is open, so it must make no JNI call except
/// opening further (nested) critical sections.
fn with_frame<T>(
    env: &mut JNIEnv<'_>,
    frame: &JByteArray<'_>,
    len: jint,
    f: impl FnOnce(&[u8]) -> BridgeResult<T>,
) -> BridgeResult<T> {
    let len = non_negative(len.into(), "frame length")? as usize;
    // SAFETY: `f` makes no JNI call while the critical section is open
    // (the caller's contract).
    let input = unsafe { env.get_array_elements_critical(frame, ReleaseMode::NoCopyBack) }?;
    // SAFETY: i8 and u8 have the same layout; the slice lives as long as
    // the critical section.
    let input: &[u8] =
        unsafe { std::slice::from_raw_parts(input.as_ptr() as *const u8, input.len()) };
    let frame = input.get(..len).ok_or_else(|| {
        BridgeError::Argument(format!("frame of {len} bytes in a {}-byte array", input.len()))
    })?;
    f(frame)
}

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
        Ok((bridge::unaccounted_bytes(&settings) + tasks * task) as jlong)
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
        .map(|v| v as i64);
        let out = env.new_long_array(values.len() as i32)?;
        env.set_long_array_region(&out, 0, &values)?;
        Ok(out.into_raw())
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
        let as_i64: Vec<i64> = values.iter().map(|&v| v as i64).collect();
        let out = env.new_long_array(as_i64.len() as i32)?;
        env.set_long_array_region(&out, 0, &as_i64)?;
        Ok(out.into_raw())
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
/// [`format::HostFormat::checksum`]) each partition's Spark checksum, then
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
        let as_i64: Vec<i64> = written
            .lengths
            .iter()
            .chain(&written.checksums)
            .chain(std::iter::once(&records))
            .map(|&l| l as i64)
            .collect();
        let out = env.new_long_array(as_i64.len() as i32)?;
        env.set_long_array_region(&out, 0, &as_i64)?;
        Ok(out.into_raw())
    })
}

/// `static native long mapSpill(long task, String spillFile, OutputFormat format)`:
/// writes the output so far to the spill file in the format's codec and
/// frees it; returns the bytes written.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_mapSpill<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    task: jlong,
    path: JString<'l>,
    format: JObject<'l>,
) -> jlong {
    guard(&mut env, -1, |env| {
        let path = path_from(env, &path)?;
        let codec = HostFormat::read(env, &format)?.codec()?;
        MAP_TASKS.with(task, |task| Ok(task.spill(&path, codec)? as jlong))
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

/// `static native long liveReduceOperators()`: reduce operators opened and
/// not yet closed in this process.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_liveReduceOperators<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jlong {
    REDUCE_TASKS.len() as jlong
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
        .map(|v| v as i64);
        let out = env.new_long_array(values.len() as i32)?;
        env.set_long_array_region(&out, 0, &values)?;
        Ok(out.into_raw())
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

/// `static native long liveMapAttempts()`: see [`bridge::live_map_attempts`].
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_liveMapAttempts<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jlong {
    bridge::live_map_attempts() as jlong
}

/// `static native long frameInfo(byte[] header, int shuffle, long map, int reduce, int reduceEnd, long offset)`:
/// `frameLength | uncompressedLength << 32` of the block whose header is
/// the array's first 36 bytes; a segment trailer (checked) instead gives
/// [`trailer::FRAME_TRAILER_FLAG`] `|` its length.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_frameInfo<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    header: JByteArray<'l>,
    shuffle: jint,
    map: jlong,
    reduce: jint,
    reduce_end: jint,
    offset: jlong,
) -> jlong {
    guard(&mut env, -1, |env| {
        let mut h = [0i8; HEADER_BYTES];
        env.get_byte_array_region(&header, 0, &mut h)?;
        let bytes: [u8; HEADER_BYTES] = h.map(|b| b as u8);
        let name = batch_name(shuffle, map, reduce, reduce_end, offset)?;
        reading(&name, || {
            if trailer::SegmentTrailer::is_trailer(&bytes) {
                trailer::SegmentTrailer::parse(&bytes, &name)?;
                return Ok(trailer::FRAME_TRAILER_FLAG | trailer::TRAILER_BYTES as i64);
            }
            let info = reduce::frame_info(&bytes, &name)?;
            Ok(info.frame_len as i64 | (info.uncompressed_len as i64) << 32)
        })
    })
}

/// The name of a segment of partitions `reduce..reduce_end`, refusing an
/// empty range.
fn batch_name(
    shuffle: jint,
    map: jlong,
    reduce: jint,
    reduce_end: jint,
    offset: jlong,
) -> BridgeResult<BlockName> {
    if reduce_end <= reduce || reduce < 0 {
        return Err(BridgeError::Argument(format!(
            "bad reduce partition range {reduce}..{reduce_end}"
        )));
    }
    Ok(BlockName { shuffle, map, reduce, reduce_end, offset })
}

/// `static native int segmentEnd(byte[] trailer, int shuffle, long map, int reduce, int reduceEnd, long offset, long records, int blocks, int crc, int expected)`:
/// checks the trailer at the array's start against what the reader
/// counted since the segment began (`expected` -1: any partition of the
/// range); returns the trailer's next partition.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_segmentEnd<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    trailer: JByteArray<'l>,
    shuffle: jint,
    map: jlong,
    reduce: jint,
    reduce_end: jint,
    offset: jlong,
    records: jlong,
    blocks: jint,
    crc: jint,
    expected: jint,
) -> jint {
    guard(&mut env, -1, |env| {
        let mut h = [0i8; trailer::TRAILER_BYTES];
        env.get_byte_array_region(&trailer, 0, &mut h)?;
        let bytes: [u8; trailer::TRAILER_BYTES] = h.map(|b| b as u8);
        let name = batch_name(shuffle, map, reduce, reduce_end, offset)?;
        let counted = trailer::Counted {
            records: non_negative(records, "records")?,
            blocks: non_negative(blocks.into(), "blocks")? as u32,
            crc: crc as u32,
            expected: u32::try_from(expected).ok(),
        };
        reading(&name, || {
            let next = trailer::segment_end(&bytes, &name, &counted)?;
            // Past every partition a Java int can name: a forged trailer.
            i32::try_from(next).map_err(|_| BridgeError::Fetched {
                what: name.to_string(),
                detail: format!("segment trailer's next partition {next} is out of range"),
            })
        })
    })
}

/// `static native void fetchEnd(int shuffle, long map, int reduce, int reduceEnd, long offset, int lastNext, int blocksAfter)`:
/// checks that a fetched segment ended where its trailers say it does
/// (`lastNext` -1: no trailer was read); throws if it was cut short.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_fetchEnd<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    shuffle: jint,
    map: jlong,
    reduce: jint,
    reduce_end: jint,
    offset: jlong,
    last_next: jint,
    blocks_after: jint,
) {
    guard(&mut env, (), |_| {
        let name = batch_name(shuffle, map, reduce, reduce_end, offset)?;
        let blocks = non_negative(blocks_after.into(), "blocks")? as u32;
        reading(&name, || Ok(trailer::fetch_end(&name, u32::try_from(last_next).ok(), blocks)?))
    })
}

/// `static native long decodeValues(byte[] frame, int frameLength, int shuffle, long map, int reduce, int reduceEnd, long offset, byte[] out)`:
/// `bytes | records << 32` of the values copied into `out`; the block's
/// records must belong to partitions `reduce..reduceEnd`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_decodeValues<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    frame: JByteArray<'l>,
    frame_len: jint,
    shuffle: jint,
    map: jlong,
    reduce: jint,
    reduce_end: jint,
    offset: jlong,
    out: JByteArray<'l>,
) -> jlong {
    guard(&mut env, -1, |env| {
        let name = batch_name(shuffle, map, reduce, reduce_end, offset)?;
        // SAFETY: a second handle on the same thread's env, used only to
        // open the second critical section (the crate ties each section to
        // a mutable borrow of the env it came from).
        let mut env2 = unsafe { env.unsafe_clone() };
        with_frame(env, &frame, frame_len, |frame| {
            // SAFETY: no other JNI call is made while the critical sections
            // are open; the arrays are distinct Java objects.
            let mut output =
                unsafe { env2.get_array_elements_critical(&out, ReleaseMode::CopyBack) }?;
            // SAFETY: i8 and u8 have the same layout; the slice lives as
            // long as the critical section.
            let output: &mut [u8] = unsafe {
                std::slice::from_raw_parts_mut(output.as_mut_ptr() as *mut u8, output.len())
            };
            let (bytes, records) =
                reading(&name, || Ok(reduce::decode_values(frame, &name, output)?))?;
            Ok(bytes as i64 | (records as i64) << 32)
        })
    })
}

/// `static native long reduceOpen(EngineOp op, int startPartition, int endPartition, String spillDir)`:
/// a reduce task's final aggregate, or its sort-merge for a sort, spilling
/// to `spillDir` (freed by `reduceClose`).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_reduceOpen<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    op: JObject<'l>,
    start: jint,
    end: jint,
    spill_dir: JString<'l>,
) -> jlong {
    guard(&mut env, 0, |env| {
        let start = non_negative(start.into(), "start partition")? as u32;
        let end = non_negative(end.into(), "end partition")? as u32;
        let op = ops::HostOp::read(env, &op)?.reduce_spec()?;
        let dir: String = env.get_string(&spill_dir)?.into();
        bridge::engine()?;
        let op = ReduceTask::open(&op, start..end, std::path::Path::new(&dir))?;
        Ok(REDUCE_TASKS.insert(op))
    })
}

/// `static native int reduceFeed(long handle, byte[] frame, int frameLength, int shuffle, long map, int reduce, long offset)`:
/// decodes, verifies and merges one fetched block; returns its records.
///
/// The block is copied out of the Java array first (a plain region copy,
/// no critical section): taking it in may merge and spill runs to disk,
/// and a critical section would hold off the JVM's garbage collector for
/// as long as that write takes.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_reduceFeed<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    frame: JByteArray<'l>,
    frame_len: jint,
    shuffle: jint,
    map: jlong,
    reduce: jint,
    offset: jlong,
) -> jint {
    guard(&mut env, -1, |env| {
        let name = BlockName::single(shuffle, map, reduce, offset);
        FEED_FRAME.with(|buf| {
            let mut buf = buf.borrow_mut();
            copy_frame(env, &frame, frame_len, &mut buf)?;
            let fed = REDUCE_TASKS
                .with(handle, |op| reading(&name, || Ok(op.feed(&buf, &name)? as jint)));
            // A huge block's copy is not kept with the thread.
            if buf.capacity() > reduce::THREAD_BUFFER_KEEP_BYTES {
                *buf = Vec::new();
            }
            fed
        })
    })
}

thread_local! {
    /// The block a reduce task's thread is feeding, copied out of the JVM.
    static FEED_FRAME: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Copies the first `len` bytes of a Java byte array into `buf` (resized
/// to exactly `len`), with no critical section open.
fn copy_frame(
    env: &mut JNIEnv<'_>,
    array: &JByteArray<'_>,
    len: jint,
    buf: &mut Vec<u8>,
) -> BridgeResult<()> {
    let len = non_negative(len.into(), "frame length")? as usize;
    let have = env.get_array_length(array)? as usize;
    if len > have {
        return Err(BridgeError::Argument(format!("frame of {len} bytes in a {have}-byte array")));
    }
    buf.clear();
    buf.resize(len, 0);
    // SAFETY: i8 and u8 have the same size and alignment; the slice covers
    // exactly `buf`'s initialised bytes.
    let as_i8 = unsafe { std::slice::from_raw_parts_mut(buf.as_mut_ptr() as *mut i8, len) };
    env.get_byte_array_region(array, 0, as_i8)?;
    Ok(())
}

/// `static native boolean reduceGrant(long handle, long bytes)`: memory
/// Spark granted the task for the operator's state (a sort's runs, an
/// aggregate's table); true when the operator took it.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_reduceGrant<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    bytes: jlong,
) -> jboolean {
    guard(&mut env, 0, |_| {
        let bytes = non_negative(bytes, "granted bytes")? as usize;
        REDUCE_TASKS.with(handle, |op| {
            op.grant(bytes);
            Ok(1)
        })
    })
}

/// `static native long reduceShortfall(long handle, long upcoming)`: bytes
/// the task must be granted before the operator takes a block of
/// `upcoming` decoded bytes within its memory (0 if it has room; see
/// `ReduceTask::shortfall`).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_reduceShortfall<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    upcoming: jlong,
) -> jlong {
    guard(&mut env, -1, |_| {
        let upcoming = non_negative(upcoming, "upcoming bytes")? as usize;
        let short = REDUCE_TASKS.with(handle, |op| Ok(op.shortfall(upcoming)))?;
        Ok(jlong::try_from(short).unwrap_or(jlong::MAX))
    })
}

/// `static native long reduceSpilledRuns(long handle)`: runs the operator
/// wrote to disk for want of granted memory (after `reduceFinish`).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_reduceSpilledRuns<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) -> jlong {
    guard(&mut env, -1, |_| REDUCE_TASKS.with(handle, |op| Ok(op.spilled_runs() as jlong)))
}

/// `static native long[] reduceSpillBytes(long handle)`: the bytes the
/// operator wrote to spill files and the payload bytes they held in memory
/// (after `reduceFinish`).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_reduceSpillBytes<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) -> jlongArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let (disk, memory) = REDUCE_TASKS.with(handle, |op| Ok(op.spilled_bytes()))?;
        let out = env.new_long_array(2)?;
        env.set_long_array_region(&out, 0, &[disk as i64, memory as i64])?;
        Ok(out.into_raw())
    })
}

/// `static native long reduceSpillResults(long handle)`: sends the
/// finished results not yet read to a spill file in the task's spill
/// directory (read back a buffer at a time); returns the bytes no longer
/// held in memory (0 for a sort, before `reduceFinish`, or when about one
/// buffer is left).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_reduceSpillResults<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) -> jlong {
    guard(&mut env, -1, |_| REDUCE_TASKS.with(handle, |op| Ok(op.spill_results()? as jlong)))
}

/// `static native long reduceFinish(long handle)`: emits every key's
/// result; returns how many.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_reduceFinish<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) -> jlong {
    guard(&mut env, -1, |_| REDUCE_TASKS.with(handle, |op| Ok(op.finish()? as jlong)))
}

/// `static native long reduceNext(long handle, ByteBuffer direct)`:
/// copies results into the buffer (whole records of an aggregation, the
/// values of a sort, in key order); returns `bytes | records << 32`, 0 at
/// the end, and the bytes the next result needs (records 0) when it does
/// not fit the buffer.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_reduceNext<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
    buffer: JByteBuffer<'l>,
) -> jlong {
    guard(&mut env, -1, |env| {
        let (addr, capacity) = direct_memory(env, &buffer)?;
        // SAFETY: a direct buffer's address is valid for its capacity while
        // the Java caller holds the buffer, which it does for this call and
        // does not touch meanwhile.
        let out = unsafe { std::slice::from_raw_parts_mut(addr, capacity) };
        let (bytes, records) = REDUCE_TASKS.with(handle, |op| Ok(op.next_records(out)?))?;
        Ok(bytes as i64 | (records as i64) << 32)
    })
}

/// `static native void reduceClose(long handle)`: frees the aggregate
/// (its memory and spill files).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_reduceClose<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) {
    guard(&mut env, (), |_| {
        drop(REDUCE_TASKS.take(handle)?);
        Ok(())
    })
}
