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
//! - `calls`: the entry points, one file per concern: the process's engine
//!   (`engine`), a map attempt (`map`), the fetch path's block checks
//!   (`fetch`), a reduce task's native operator (`reduce`), the service
//!   client: connections to daemons, pushes and reads (`service`).
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
pub mod calls;
pub mod error;
pub mod fields;
pub mod format;
pub mod handles;
pub mod ops;
pub mod row_checksum;
pub mod settings;
pub mod stop;
