//! The fetch path's block checks: a fetched block's frame, a segment's
//! end, and the values of a block decoded for Spark's reader.

use jni::objects::{JByteArray, JClass, ReleaseMode};
use jni::sys::{jint, jlong};
use jni::JNIEnv;
use sluice_core::format::header::HEADER_BYTES;
use sluice_engine::output::trailer;
use sluice_engine::reduce::{self, BlockName};

use super::{guard, non_negative, reading, with_frame};
use crate::error::{BridgeError, BridgeResult};

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
