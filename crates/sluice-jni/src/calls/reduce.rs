//! A reduce task's native operator: fed the fetched blocks, granted
//! memory, spilled, finished and read (by the handle `reduceOpen` returned).

use jni::objects::{JByteArray, JByteBuffer, JClass, JObject, JString};
use jni::sys::{jboolean, jint, jlong, jlongArray};
use jni::JNIEnv;
use sluice_engine::reduce::{self, BlockName, ReduceTask};

use super::{direct_memory_mut, guard, long_array, non_negative, reading};
use crate::bridge::{self};
use crate::error::{BridgeError, BridgeResult};
use crate::handles::{tag, Registry};
use crate::ops;

/// The open reduce operators, by the handle `reduceOpen` returned.
static REDUCE_TASKS: Registry<ReduceTask> = Registry::new("reduce operator", tag::REDUCE_OPERATOR);

/// `static native long liveReduceOperators()`: reduce operators opened and
/// not yet closed in this process.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_liveReduceOperators<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jlong {
    REDUCE_TASKS.len() as jlong
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
pub(super) fn copy_frame(
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

/// `static native long reducePeakBytes(long handle)`: the most bytes of
/// state the operator held at once (`ReduceTask::peak_state_bytes`).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_reducePeakBytes<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) -> jlong {
    guard(&mut env, -1, |_| {
        REDUCE_TASKS
            .with(handle, |op| Ok(jlong::try_from(op.peak_state_bytes()).unwrap_or(jlong::MAX)))
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
        long_array(env, [disk, memory])
    })
}

/// `static native long reduceHeldBytes(long handle)`: the bytes the
/// finished results hold in memory (`ReduceTask::held_bytes`: 0 for an
/// aggregate's or a distinct's merged from its spilled runs as read).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_reduceHeldBytes<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) -> jlong {
    guard(&mut env, -1, |_| {
        REDUCE_TASKS.with(handle, |op| Ok(jlong::try_from(op.held_bytes()).unwrap_or(jlong::MAX)))
    })
}

/// `static native long reduceSpillResults(long handle)`: sends what the
/// finished results hold in memory to disk (`ReduceTask::spill_results`:
/// results emitted whole, a sort's runs in memory); returns the bytes no
/// longer held (0 before `reduceFinish`, for results merged from spilled
/// runs, or when about one buffer is left).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_reduceSpillResults<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) -> jlong {
    guard(&mut env, -1, |_| REDUCE_TASKS.with(handle, |op| Ok(op.spill_results()? as jlong)))
}

/// `static native long reduceFinish(long handle)`: ends the input
/// (`ReduceTask::finish`); returns the result count, or -1 where it is
/// known only once the results are read.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_SluiceNative_reduceFinish<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    handle: jlong,
) -> jlong {
    guard(&mut env, -1, |_| {
        REDUCE_TASKS.with(handle, |op| Ok(op.finish()?.map_or(-1, |n| n as jlong)))
    })
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
        let (addr, capacity) = direct_memory_mut(env, &buffer)?;
        // SAFETY: a writable direct buffer's address is valid for its
        // capacity while the Java caller holds the buffer, which it does for
        // this call and does not touch meanwhile.
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
