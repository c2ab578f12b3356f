//! The fetch path's block checks: a fetched block's frame, a segment's
//! end, and the values of a block decoded for Spark's reader.

use jni::objects::{JByteArray, JClass};
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
        // `out`'s length before any critical section is open: no JNI call
        // but the critical sections' own may be made while one is (jni-rs
        // asks an array's length as it opens its section, so the second
        // section is opened here with JNI's functions directly).
        let out_len = env.get_array_length(&out)? as usize;
        // The two sections become a shared and a mutable slice: one array
        // passed as both would alias them.
        if env.is_same_object(&frame, &out)? {
            return Err(BridgeError::Argument(
                "decodeValues: the frame and the output are one array".into(),
            ));
        }
        if decoded_apart(env, &frame, frame_len)? {
            return decode_copied(env, &frame, frame_len, &out, out_len, &name);
        }
        let raw = env.get_raw();
        with_frame(env, &frame, frame_len, |frame| {
            // SAFETY: `raw` is this thread's env, `out` a live byte array of
            // `out_len` bytes, not the frame's array (checked); no other JNI
            // call is made while the sections are open.
            let output = unsafe { CriticalBytes::open(raw, out.as_raw(), out_len) }?;
            // SAFETY: the elements stay valid until `output` is dropped
            // (released, copied back), after the slice's last use.
            let bytes_out = unsafe { std::slice::from_raw_parts_mut(output.ptr, output.len) };
            let (bytes, records) =
                reading(&name, || Ok(reduce::decode_values(frame, &name, bytes_out)?))?;
            Ok(bytes as i64 | (records as i64) << 32)
        })
    })
}

/// Most bytes a block decoded in JNI critical sections may have, stored or
/// decoded (4 MiB, about four of Spark's blocks): while the sections are
/// open no garbage collection can run on the collectors that lock them out
/// (serial, parallel, G1 before JDK 22), so a larger block (a large record is
/// a block of its own, up to 768 MiB) is copied in and out instead
/// ([`decode_copied`]).
const CRITICAL_DECODE_BYTES_MAX: usize = 4 << 20;

/// Whether the block in `frame` is larger, stored or decoded, than
/// [`CRITICAL_DECODE_BYTES_MAX`] (its header read with a region copy; a
/// header that does not parse is decoded either way, and reported there).
fn decoded_apart(env: &mut JNIEnv<'_>, frame: &JByteArray<'_>, len: jint) -> BridgeResult<bool> {
    let len = non_negative(len.into(), "frame length")? as usize;
    if len > CRITICAL_DECODE_BYTES_MAX {
        return Ok(true);
    }
    if len < HEADER_BYTES || (env.get_array_length(frame)? as usize) < HEADER_BYTES {
        return Ok(false);
    }
    let mut h = [0i8; HEADER_BYTES];
    env.get_byte_array_region(frame, 0, &mut h)?;
    let h: [u8; HEADER_BYTES] = h.map(|b| b as u8);
    Ok(sluice_core::format::header::BlockHeader::parse(&h)
        .is_ok_and(|h| h.uncompressed_len as usize > CRITICAL_DECODE_BYTES_MAX))
}

/// Bytes of values gathered before they are set into the Java array on the
/// copied path (1 MiB): the values of a large block cross in pieces, so the
/// path needs the frame's copy and the decoder's buffer, not a third copy of
/// the block.
const COPY_OUT_BYTES: usize = 1 << 20;

/// [`Java_dev_sluice_spark_jni_SluiceNative_decodeValues`] with no critical
/// section: the frame is copied out of the JVM and decoded, and the values
/// are set into `out` (`out_len` bytes) a piece at a time.
fn decode_copied(
    env: &mut JNIEnv<'_>,
    frame: &JByteArray<'_>,
    frame_len: jint,
    out: &JByteArray<'_>,
    out_len: usize,
    name: &BlockName,
) -> BridgeResult<jlong> {
    let mut input = Vec::new();
    super::reduce::copy_frame(env, frame, frame_len, &mut input)?;
    let mut piece: Vec<i8> = Vec::with_capacity(COPY_OUT_BYTES);
    let mut at = 0usize;
    let set = |env: &mut JNIEnv<'_>, piece: &mut Vec<i8>, at: &mut usize| {
        let start = jint::try_from(*at).ok().filter(|_| *at + piece.len() <= out_len);
        let Some(start) = start else {
            return Err(BridgeError::Argument(format!(
                "output buffer of {out_len} bytes too small for block of {name}"
            )));
        };
        env.set_byte_array_region(out, start, piece)?;
        *at += piece.len();
        piece.clear();
        Ok(())
    };
    let mut failed: Option<BridgeError> = None;
    let records = reading(name, || {
        Ok(reduce::decode_values_with(&input, name, |value| {
            for chunk in value.chunks(COPY_OUT_BYTES) {
                if piece.len() + chunk.len() > COPY_OUT_BYTES {
                    if let Err(e) = set(env, &mut piece, &mut at) {
                        failed = Some(e);
                        return Err(sluice_engine::EngineError::Argument("copy out failed".into()));
                    }
                }
                piece.extend(chunk.iter().map(|&b| b as i8));
            }
            Ok(())
        })?)
    });
    if let Some(e) = failed {
        return Err(e);
    }
    let records = records?;
    set(env, &mut piece, &mut at)?;
    Ok(at as i64 | (records as i64) << 32)
}

/// A byte array's elements in a JNI critical section opened with JNI's own
/// functions, released (and copied back) when dropped.
struct CriticalBytes {
    env: *mut jni::sys::JNIEnv,
    array: jni::sys::jbyteArray,
    ptr: *mut u8,
    len: usize,
}

impl CriticalBytes {
    /// Opens `array`'s critical section.
    ///
    /// # Safety
    /// `env` is the calling thread's JNI env, `array` a live byte array of
    /// `len` elements; the caller makes no JNI call but critical sections'
    /// until this is dropped.
    unsafe fn open(
        env: *mut jni::sys::JNIEnv,
        array: jni::sys::jbyteArray,
        len: usize,
    ) -> BridgeResult<Self> {
        // SAFETY: `env` is the thread's valid env (the caller's contract).
        let get = unsafe { (**env).GetPrimitiveArrayCritical }
            .ok_or(jni::errors::Error::JNIEnvMethodNotFound("GetPrimitiveArrayCritical"))?;
        // SAFETY: as above; `array` is a live byte array.
        let ptr = unsafe { get(env, array, std::ptr::null_mut()) } as *mut u8;
        if ptr.is_null() {
            return Err(jni::errors::Error::NullPtr("GetPrimitiveArrayCritical").into());
        }
        Ok(CriticalBytes { env, array, ptr, len })
    }
}

impl Drop for CriticalBytes {
    fn drop(&mut self) {
        // SAFETY: the section `open` opened, released once (mode 0: copy
        // back and free).
        unsafe {
            if let Some(release) = (**self.env).ReleasePrimitiveArrayCritical {
                release(self.env, self.array, self.ptr.cast(), 0);
            }
        }
    }
}
