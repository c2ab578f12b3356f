//! The engine's settings as a host passes them: Java's `EngineSettings`,
//! read by field name and JNI type (a field the class does not declare
//! with that type fails the call), so the two sides cannot disagree on an
//! argument order; each value checked into [`HostSettings`].

use std::path::PathBuf;

use jni::objects::{JObject, JString};
use jni::JNIEnv;

use crate::bridge::HostSettings;
use crate::error::{BridgeError, BridgeResult};
use crate::fields;

/// The fields of Java's `EngineSettings` and their JNI types, in the order
/// [`read`] reads them (`contract.rs` checks the Java declarations).
pub const FIELDS: [(&str, &str); 9] = [
    ("offloadThreads", "I"),
    ("bufferPoolBytes", "J"),
    ("memoryBudget", "J"),
    ("operatorStateBytes", "J"),
    ("spillDir", "Ljava/lang/String;"),
    ("inlineAtTasks", "I"),
    ("pinOffloadThreads", "Z"),
    ("segmentBytes", "J"),
    ("liquidOffload", "Z"),
];

/// Reads a Java `EngineSettings`: a null object, a negative count or size,
/// a null spill directory or a zero segment size is an argument error.
pub fn read(env: &mut JNIEnv<'_>, settings: &JObject<'_>) -> BridgeResult<HostSettings> {
    let settings = fields::non_null(settings, "EngineSettings")?;
    let [threads, pool, budget, state, dir, inline, pin, segment, liquid] = FIELDS;
    let mut int = |(name, sig): (&str, &str)| -> BridgeResult<usize> {
        let v = match sig {
            "I" => i64::from(env.get_field(settings, name, sig)?.i()?),
            _ => env.get_field(settings, name, sig)?.j()?,
        };
        usize::try_from(v).map_err(|_| BridgeError::Argument(format!("{name} is negative ({v})")))
    };
    let offload_threads = int(threads)?;
    let buffer_pool_bytes = int(pool)?;
    let memory_budget = int(budget)?;
    let operator_state_bytes = int(state)?;
    let inline_at_tasks = int(inline)?;
    let segment_bytes = match int(segment)? {
        0 => return Err(BridgeError::Argument("segmentBytes is 0".into())),
        n => n,
    };
    let spill_dir = env.get_field(settings, dir.0, dir.1)?.l()?;
    if spill_dir.is_null() {
        return Err(BridgeError::Argument("no spill directory (null spillDir)".into()));
    }
    let spill_dir: String = env.get_string(&JString::from(spill_dir))?.into();
    Ok(HostSettings {
        offload_threads,
        buffer_pool_bytes,
        memory_budget,
        operator_state_bytes,
        spill_dir: PathBuf::from(spill_dir),
        inline_at_tasks,
        pin_offload_threads: env.get_field(settings, pin.0, pin.1)?.z()?,
        segment_bytes,
        liquid_offload: env.get_field(settings, liquid.0, liquid.1)?.z()?,
    })
}
