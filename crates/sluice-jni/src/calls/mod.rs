//! The JNI entry points (`Java_dev_sluice_spark_jni_SluiceNative_*`), one
//! file per concern, and what they share: every body runs under `guard`,
//! which turns an error or a panic into a pending Java exception.

pub mod engine;
pub mod fetch;
pub mod map;
pub mod reduce;
pub mod service;

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;

use jni::objects::{JByteArray, JByteBuffer, JString, ReleaseMode};
use jni::sys::{jint, jlongArray};
use jni::JNIEnv;
use sluice_engine::reduce::BlockName;

use crate::error::{BridgeError, BridgeResult};

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

/// A new Java `long[]` holding `values` (as Java's signed longs).
fn long_array<I>(env: &mut JNIEnv<'_>, values: I) -> BridgeResult<jlongArray>
where
    I: IntoIterator,
    I::Item: Into<u64>,
{
    let as_i64: Vec<i64> = values.into_iter().map(|v| v.into() as i64).collect();
    let out = env.new_long_array(as_i64.len() as i32)?;
    env.set_long_array_region(&out, 0, &as_i64)?;
    Ok(out.into_raw())
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

/// As [`direct_memory`], for a buffer the call writes into: JNI hands out a
/// read-only buffer's address all the same (a read-only mapping of a file
/// among them, where a write is a SIGSEGV), so one is refused.
fn direct_memory_mut(
    env: &mut JNIEnv<'_>,
    buffer: &JByteBuffer<'_>,
) -> BridgeResult<(*mut u8, usize)> {
    if env.call_method(buffer, "isReadOnly", "()Z", &[])?.z()? {
        return Err(BridgeError::Argument("a read-only buffer to write results into".into()));
    }
    direct_memory(env, buffer)
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
