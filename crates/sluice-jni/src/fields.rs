//! Reading a host's typed spec (a Java object the binding passes instead
//! of a tuple of ints) by field name and JNI type: a field the class does
//! not declare with that type fails the call with a JNI error, so the two
//! sides cannot silently disagree on an order.

use jni::objects::JObject;
use jni::JNIEnv;

use crate::error::{BridgeError, BridgeResult};

/// `obj`, or an argument error naming the Java `class` if it is null.
pub fn non_null<'a, 'l>(obj: &'a JObject<'l>, class: &str) -> BridgeResult<&'a JObject<'l>> {
    if obj.is_null() {
        return Err(BridgeError::Argument(format!("no {class} (null)")));
    }
    Ok(obj)
}

/// The `int` fields `names` of a non-null Java object of `class`.
pub fn ints<const N: usize>(
    env: &mut JNIEnv<'_>,
    obj: &JObject<'_>,
    class: &str,
    names: [&str; N],
) -> BridgeResult<[i32; N]> {
    let obj = non_null(obj, class)?;
    let mut out = [0; N];
    for (slot, name) in out.iter_mut().zip(names) {
        *slot = env.get_field(obj, name, "I")?.i()?;
    }
    Ok(out)
}
