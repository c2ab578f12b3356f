//! The service's client side for the JVM (`dev.sluice.spark.jni.ServiceNative`):
//! connections to daemons, map attempts pushing to them, reads of one
//! stream. Each call blocks the calling (task) thread on the process's one
//! small tokio runtime, [`RUNTIME_THREADS`] threads that drive the sockets.
//! Connections and pushers are handles in registries (see `handles`),
//! never pointers. A daemon's refusal or a broken connection is an
//! `IOException` naming the daemon (`BridgeError::Service`).

use std::net::SocketAddr;
use std::os::unix::fs::FileExt;
use std::sync::OnceLock;
use std::time::Duration;

use jni::objects::{JClass, JIntArray, JLongArray, JObject, JString};
use jni::sys::{jboolean, jbyteArray, jint, jlong};
use jni::JNIEnv;
use sluice_service::auth::Key;
use sluice_service::protocol::{ReduceOp, Winner};
use sluice_service::{AttemptPusher, Client, ReadMode};

use super::{guard, non_negative};
use crate::error::{BridgeError, BridgeResult};
use crate::handles::{tag, Registry};
use crate::ops::HostOp;

/// `request`'s codes (Java's `ServiceNative.REGISTER` ...; a contract test
/// checks both sides).
pub const REGISTER: jint = 0;
/// Deletes a shuffle's data.
pub const UNREGISTER: jint = 1;
/// Extends the application's lease.
pub const RENEW: jint = 2;
/// Deletes all of the application's data.
pub const END_APPLICATION: jint = 3;

/// Threads of the runtime that drives the service's sockets.
pub const RUNTIME_THREADS: usize = 1;

static CLIENTS: Registry<Client> = Registry::new("service connection", tag::SERVICE_CONNECTION);
static PUSHERS: Registry<AttemptPusher> = Registry::new("service push", tag::SERVICE_PUSH);

fn runtime() -> BridgeResult<&'static tokio::runtime::Runtime> {
    static RT: OnceLock<Result<tokio::runtime::Runtime, String>> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(RUNTIME_THREADS)
            .thread_name("sluice-service-io")
            .enable_all()
            .build()
            .map_err(|e| e.to_string())
    })
    .as_ref()
    .map_err(|e| BridgeError::Argument(format!("the service runtime did not start: {e}")))
}

fn u32_arg(v: i64, what: &str) -> BridgeResult<u32> {
    u32::try_from(v).map_err(|_| BridgeError::Argument(format!("{what} {v} is out of range")))
}

/// `static native long connect(String address, String app, String keyHex, long leaseMs, long busyWaitMs, boolean leaseOnly)`:
/// a daemon that answers busy is tried again for `busyWaitMs`; a
/// `leaseOnly` connection is [`Client::connect_lease`]'s.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_connect<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    address: JString<'l>,
    app: JString<'l>,
    key_hex: JString<'l>,
    lease_ms: jlong,
    busy_wait_ms: jlong,
    lease_only: jboolean,
) -> jlong {
    guard(&mut env, 0, |env| {
        let address: String = env.get_string(&address)?.into();
        let app: String = env.get_string(&app)?.into();
        let key_hex: String = env.get_string(&key_hex)?.into();
        let addr: SocketAddr = address.parse().map_err(|_| {
            BridgeError::Argument(format!("daemon address {address:?} is not ip:port"))
        })?;
        let key = Key::from_hex(&key_hex)
            .map_err(|e| BridgeError::Argument(format!("spark.sluice.service.appSecret: {e}")))?;
        let lease = Duration::from_millis(non_negative(lease_ms, "lease")?);
        let busy_wait = Duration::from_millis(non_negative(busy_wait_ms, "busy wait")?);
        let rt = runtime()?;
        let client = if lease_only != 0 {
            rt.block_on(Client::connect_lease(addr, &app, &key, lease, busy_wait))?
        } else {
            rt.block_on(Client::connect_within(addr, &app, &key, lease, busy_wait))?
        };
        Ok(CLIENTS.insert(client))
    })
}

/// `static native void close(long connection)`.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_close<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    connection: jlong,
) {
    guard(&mut env, (), |_| {
        drop(CLIENTS.take(connection)?);
        Ok(())
    })
}

/// `static native boolean idle(long connection)`: no read half done on it.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_idle<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    connection: jlong,
) -> jboolean {
    guard(&mut env, 0, |_| CLIENTS.with(connection, |c| Ok(jboolean::from(c.is_idle()))))
}

/// `static native boolean stillOpen(long connection)`: idle, and its daemon
/// has not closed it ([`sluice_service::Client::still_open`], a peek that
/// does not wait).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_stillOpen<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    connection: jlong,
) -> jboolean {
    guard(&mut env, 0, |_| CLIENTS.with(connection, |c| Ok(jboolean::from(c.still_open()))))
}

/// `static native void request(long connection, int what, int shuffle, int generation, int partitions)`:
/// `what` is [`REGISTER`] (a shuffle), [`UNREGISTER`] (it), [`RENEW`] (the
/// lease) or [`END_APPLICATION`].
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_request<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    connection: jlong,
    what: jint,
    shuffle: jint,
    generation: jint,
    partitions: jint,
) {
    guard(&mut env, (), |_| {
        let rt = runtime()?;
        let (shuffle, generation) =
            (u32_arg(shuffle.into(), "shuffle")?, u32_arg(generation.into(), "generation")?);
        CLIENTS.with(connection, |c| {
            match what {
                REGISTER => rt.block_on(c.register_shuffle(
                    shuffle,
                    generation,
                    u32_arg(partitions.into(), "partitions")?,
                ))?,
                UNREGISTER => rt.block_on(c.unregister_shuffle(shuffle))?,
                RENEW => rt.block_on(c.renew())?,
                END_APPLICATION => rt.block_on(c.end_application())?,
                other => return Err(BridgeError::Argument(format!("unknown request {other}"))),
            }
            Ok(())
        })
    })
}

/// `static native long pushOpen(int shuffle, int generation, int map, long attempt)`.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_pushOpen<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    shuffle: jint,
    generation: jint,
    map: jint,
    attempt: jlong,
) -> jlong {
    guard(&mut env, 0, |_| {
        Ok(PUSHERS.insert(AttemptPusher::new(
            u32_arg(shuffle.into(), "shuffle")?,
            u32_arg(generation.into(), "generation")?,
            u32_arg(map.into(), "map")?,
            non_negative(attempt, "attempt")?,
        )))
    })
}

/// Bytes of a data file `pushFile` reads per `add`.
pub const PUSH_FILE_READ_BYTES: usize = 1 << 20;

/// Bytes the service's client may hold for one task outside Spark's memory
/// manager, at most: a read's frame and the copy of its block
/// (`MAX_FRAME_PAYLOAD_BYTES` each), and, beside it (a task reads one
/// shuffle while its spills of the next are pushed), a push's records
/// gathered for the next chunk ([`PUSH_CHUNK_BYTES`]), the frames it keeps
/// until they are acknowledged ([`PUSH_WINDOW`] of at most
/// `MAX_FRAME_PAYLOAD_BYTES`) and [`PUSH_FILE_READ_BYTES`] of its file.
///
/// [`PUSH_CHUNK_BYTES`]: sluice_service::protocol::limits::PUSH_CHUNK_BYTES
/// [`PUSH_WINDOW`]: sluice_service::client::PUSH_WINDOW
pub fn task_buffer_bytes() -> u64 {
    use sluice_service::protocol::limits::{MAX_FRAME_PAYLOAD_BYTES, PUSH_CHUNK_BYTES};
    let frame = MAX_FRAME_PAYLOAD_BYTES as usize;
    let read = 2 * frame;
    let push =
        PUSH_CHUNK_BYTES + sluice_service::client::PUSH_WINDOW * frame + PUSH_FILE_READ_BYTES;
    (read + push) as u64
}

/// `static native long taskBufferBytes()`: [`task_buffer_bytes`].
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_taskBufferBytes<'l>(
    _env: JNIEnv<'l>,
    _class: JClass<'l>,
) -> jlong {
    task_buffer_bytes() as jlong
}

/// `static native void pushFile(long push, long connection, String path, int first, long[] starts, long[] ends)`:
/// adds partitions `first..first + starts.length` of the file at `path` (a
/// data file, or a spill file while the map runs) to a push, partition
/// `first + i` being the file's bytes `starts[i]..ends[i]`, read here and
/// sent in chunks as they fill. A file that cannot be read is `LocalFile`
/// (the task's fault); a daemon's failure is `Service`.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_pushFile<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    push: jlong,
    connection: jlong,
    path: JString<'l>,
    first: jint,
    starts: JLongArray<'l>,
    ends: JLongArray<'l>,
) {
    guard(&mut env, (), |env| {
        let path: String = env.get_string(&path)?.into();
        let ranges = file_ranges(env, &starts, &ends)?;
        let first = u32_arg(first.into(), "partition")?;
        let local = |what: &str, e: std::io::Error| {
            BridgeError::LocalFile(format!("{what} {path} to push it: {e}"))
        };
        let file = std::fs::File::open(&path).map_err(|e| local("opening", e))?;
        let longest = ranges.iter().map(|&(s, e)| e - s).max().unwrap_or(0);
        let mut buf = vec![0u8; (longest as usize).min(PUSH_FILE_READ_BYTES)];
        let rt = runtime()?;
        PUSHERS.with(push, |p| {
            CLIENTS.with(connection, |c| {
                for (i, &(start, end)) in ranges.iter().enumerate() {
                    let mut pos = start;
                    let partition = first + i as u32;
                    while pos < end {
                        let len = ((end - pos) as usize).min(buf.len());
                        file.read_exact_at(&mut buf[..len], pos)
                            .map_err(|e| local("reading", e))?;
                        // Records ride in the segment's trailer, which the reader checks.
                        rt.block_on(p.add(c, partition, 0, &buf[..len]))?;
                        pos += len as u64;
                    }
                }
                Ok(())
            })
        })
    })
}

/// Byte ranges `starts[i]..ends[i]` from two Java arrays of one length,
/// each start at most its end.
fn file_ranges(
    env: &mut JNIEnv<'_>,
    starts: &JLongArray<'_>,
    ends: &JLongArray<'_>,
) -> BridgeResult<Vec<(u64, u64)>> {
    let n = env.get_array_length(starts)?;
    if env.get_array_length(ends)? != n {
        return Err(BridgeError::Argument("starts and ends of different lengths".into()));
    }
    let (mut s, mut e) = (vec![0i64; n as usize], vec![0i64; n as usize]);
    env.get_long_array_region(starts, 0, &mut s)?;
    env.get_long_array_region(ends, 0, &mut e)?;
    s.iter()
        .zip(&e)
        .map(|(&s, &e)| {
            let (s, e) = (non_negative(s, "start")?, non_negative(e, "end")?);
            if e < s {
                return Err(BridgeError::Argument(format!("range {s}..{e} goes backwards")));
            }
            Ok((s, e))
        })
        .collect()
}

/// `static native void pushSettle(long push, long connection)`: sends what
/// is pending and waits for every chunk's acknowledgement, so that the
/// connection may serve another request and the push go on over another
/// one later (a map task pushing its spills while it runs).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_pushSettle<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    push: jlong,
    connection: jlong,
) {
    guard(&mut env, (), |_| {
        let rt = runtime()?;
        PUSHERS.with(push, |p| CLIENTS.with(connection, |c| Ok(rt.block_on(p.settle_all(c))?)))
    })
}

/// `static native boolean pushCommit(long push, long connection)`: flushes
/// and commits (the push handle is closed either way); true when first of
/// its map index at this daemon.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_pushCommit<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    push: jlong,
    connection: jlong,
) -> jboolean {
    guard(&mut env, 0, |_| {
        let p = PUSHERS.take(push)?;
        let rt = runtime()?;
        CLIENTS.with(connection, |c| Ok(jboolean::from(rt.block_on(p.commit(c))?)))
    })
}

/// `static native void pushDrop(long push, long connection)`: closes a push
/// that will not commit and has the daemon drop what it staged of it.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_pushDrop<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    push: jlong,
    connection: jlong,
) {
    guard(&mut env, (), |_| {
        let p = PUSHERS.take(push)?;
        let rt = runtime()?;
        CLIENTS.with(connection, |c| {
            Ok(rt.block_on(c.drop_attempt(p.shuffle, p.generation, p.map, p.attempt))?)
        })
    })
}

/// `static native void dropAttempt(long connection, int shuffle, int generation, int map, long attempt)`:
/// has the daemon drop what map attempt `attempt` staged or committed there
/// (its push handle closed already: a commit taken back after the attempt's
/// push to another daemon failed).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_dropAttempt<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    connection: jlong,
    shuffle: jint,
    generation: jint,
    map: jint,
    attempt: jlong,
) {
    guard(&mut env, (), |_| {
        let shuffle = u32_arg(shuffle.into(), "shuffle")?;
        let generation = u32_arg(generation.into(), "generation")?;
        let map = u32_arg(map.into(), "map")?;
        let attempt = non_negative(attempt, "attempt")?;
        let rt = runtime()?;
        CLIENTS.with(connection, |c| {
            Ok(rt.block_on(c.drop_attempt(shuffle, generation, map, attempt))?)
        })
    })
}

/// `static native void pushAbandon(long push)`: drops a push that will not
/// commit (the daemon frees its staged chunks with the shuffle).
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_pushAbandon<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    push: jlong,
) {
    guard(&mut env, (), |_| {
        drop(PUSHERS.take(push)?);
        Ok(())
    })
}

/// `static native void readStart(long connection, int shuffle, int generation, int start, int end, int[] maps, long[] attempts, EngineOp reduce, long skip)`:
/// with `reduce` not null, the daemon runs that reduce-side operator over
/// each partition first (each comes as one segment of map -1); with `skip`
/// above 0, a plain read resumed after that many blocks (a read the daemons
/// reduce is not resumed).
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_readStart<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    connection: jlong,
    shuffle: jint,
    generation: jint,
    start: jint,
    end: jint,
    maps: JIntArray<'l>,
    attempts: JLongArray<'l>,
    reduce: JObject<'l>,
    skip: jlong,
) {
    guard(&mut env, (), |env| {
        let skip = non_negative(skip, "skip")?;
        if skip > 0 && !reduce.is_null() {
            return Err(BridgeError::Argument("a read the daemons reduce is not resumed".into()));
        }
        let mode = if reduce.is_null() {
            ReadMode::Plain { skip }
        } else {
            let op = HostOp::read(env, &reduce)?;
            // Checked here, so a code the daemon would refuse fails the task
            // as an argument error, not as a fetch failure.
            op.reduce_spec()?;
            ReadMode::Reduced(ReduceOp { function: op.function, value_type: op.value_type })
        };
        let n = env.get_array_length(&maps)?;
        if n != env.get_array_length(&attempts)? {
            return Err(BridgeError::Argument("maps and attempts differ in length".into()));
        }
        let mut m = vec![0i32; n as usize];
        let mut a = vec![0i64; n as usize];
        env.get_int_array_region(&maps, 0, &mut m)?;
        env.get_long_array_region(&attempts, 0, &mut a)?;
        let winners = m
            .iter()
            .zip(&a)
            .map(|(&map, &attempt)| {
                Ok(Winner {
                    map: u32_arg(map.into(), "map")?,
                    attempt: non_negative(attempt, "attempt")?,
                })
            })
            .collect::<BridgeResult<Vec<Winner>>>()?;
        let (shuffle, generation) =
            (u32_arg(shuffle.into(), "shuffle")?, u32_arg(generation.into(), "generation")?);
        let (start, end) = (u32_arg(start.into(), "start")?, u32_arg(end.into(), "end")?);
        let rt = runtime()?;
        CLIENTS.with(connection, |c| {
            Ok(rt.block_on(c.read_start((shuffle, generation), start, end, winners, mode))?)
        })
    })
}

/// `static native byte[] readNext(long connection, long[] meta)`: the next
/// block's bytes (its partition, map index and records in `meta[0..3]`), or
/// null at the stream's end, once its totals matched.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_readNext<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    connection: jlong,
    meta: JLongArray<'l>,
) -> jbyteArray {
    guard(&mut env, std::ptr::null_mut(), |env| {
        let rt = runtime()?;
        let block = CLIENTS.with(connection, |c| Ok(rt.block_on(c.read_next())?))?;
        let Some(b) = block else { return Ok(std::ptr::null_mut()) };
        env.set_long_array_region(
            &meta,
            0,
            &[i64::from(b.partition), i64::from(b.map), b.records as i64],
        )?;
        Ok(env.byte_array_from_slice(&b.data)?.into_raw())
    })
}

/// `static native int nodeOf(int partition, int partitions, int nodes)`:
/// the daemon that owns a reduce partition (the engine's `node_of`), for
/// the test that the Java side computes the same.
#[no_mangle]
pub extern "system" fn Java_dev_sluice_spark_jni_ServiceNative_nodeOf<'l>(
    mut env: JNIEnv<'l>,
    _class: JClass<'l>,
    partition: jint,
    partitions: jint,
    nodes: jint,
) -> jint {
    guard(&mut env, -1, |_| {
        let (r, p, n) = (
            u32_arg(partition.into(), "partition")?,
            u32_arg(partitions.into(), "partitions")?,
            u32_arg(nodes.into(), "nodes")?,
        );
        Ok(sluice_service::node_of(r, p, n) as jint)
    })
}
