//! The engine's stop check for Spark's task threads.
//!
//! A task thread waiting inside the engine (for room in the map buffer
//! pool) asks, after each slice of its wait, whether the JVM wants it to
//! stop: `SluiceNative.stopRequested()`, true when the thread was
//! interrupted or its Spark task was killed. The JVM, the class and the
//! method are resolved once, when the engine is opened from a task or the
//! driver; the engine's own threads are not the JVM's and always get
//! false.

use std::sync::OnceLock;

use jni::objects::{GlobalRef, JClass, JStaticMethodID};
use jni::signature::{Primitive, ReturnType};
use jni::{JNIEnv, JavaVM};

use crate::error::BridgeResult;

/// The Java class whose static `stopRequested()` answers the check.
const STOP_CLASS: &str = "dev/sluice/spark/jni/SluiceNative";

struct StopMethod {
    vm: JavaVM,
    class: GlobalRef,
    method: JStaticMethodID,
}

static STOP: OnceLock<StopMethod> = OnceLock::new();

/// Resolves the check through `env` (once) and sets it as the engine's.
pub fn install(env: &mut JNIEnv<'_>) -> BridgeResult<()> {
    if STOP.get().is_none() {
        let class: JClass<'_> = env.find_class(STOP_CLASS)?;
        let method = env.get_static_method_id(&class, "stopRequested", "()Z")?;
        let class = env.new_global_ref(class)?;
        let vm = env.get_java_vm()?;
        let _ = STOP.set(StopMethod { vm, class, method });
    }
    sluice_engine::waits::set_stop_check(stop_requested);
    Ok(())
}

/// Whether the calling thread's Java side asks it to stop (false on a
/// thread the JVM does not know, or if the call fails).
fn stop_requested() -> bool {
    let Some(stop) = STOP.get() else {
        return false;
    };
    // Only a thread the JVM knows has an env; no thread is attached here.
    let Ok(mut env) = stop.vm.get_env() else {
        return false;
    };
    let class: &JClass<'_> = stop.class.as_obj().into();
    // SAFETY: the method id was resolved on this class with signature
    // "()Z", which the return type and the empty arguments match.
    let answer = unsafe {
        env.call_static_method_unchecked(
            class,
            stop.method,
            ReturnType::Primitive(Primitive::Boolean),
            &[],
        )
    };
    match answer.and_then(|v| v.z()) {
        Ok(stop) => stop,
        Err(_) => {
            // Leave no exception pending for the caller's later JNI calls.
            let _ = env.exception_clear();
            false
        }
    }
}
