//! The process-wide engine a JVM embeds, and the map attempts it runs for
//! the JVM, in plain Rust (the JNI entry points in `lib.rs` only convert).
//!
//! One [`Engine`] per process (a Spark executor): its offload threads and
//! buffer pool are shared by every task and shuffle of the executor, which
//! is SmartShuffle's per-node agent. It is created by the first
//! [`open_engine`] and lives until the process ends. A later call (a later
//! host context in the same JVM) gets the same engine: the task slot count
//! it passes takes effect, and any other setting that differs from the
//! engine's is an error naming it ([`BridgeError::SettingsChanged`]), never
//! silently the old value. Engine shuffle ids come from a
//! process-wide counter, so the shuffles of successive host contexts in
//! one JVM (whose ids restart at 0) never collide.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use sluice_core::format::{Codec, Layout};
use sluice_core::reorg::StageSpec;
use sluice_engine::host_keys::PartitionIdPartitioner;
use sluice_engine::output::{Algorithm, Written};
use sluice_engine::{Engine, EngineConfig, FileMapTask, ReduceOwner, ShuffleSpec};

use crate::error::{BridgeError, BridgeResult};
use crate::row_checksum::RowChecksums;

static ENGINE: OnceLock<(Engine, HostSettings)> = OnceLock::new();
static ENGINE_INIT: Mutex<()> = Mutex::new(());
static NEXT_SHUFFLE: AtomicU32 = AtomicU32::new(1);
/// Map attempts opened and not yet dropped (committed, aborted or freed).
static LIVE_ATTEMPTS: AtomicU64 = AtomicU64::new(0);

/// Map attempts this process holds: opened and not yet committed or
/// dropped. A host that frees every attempt at task end sees 0 between
/// tasks; anything else is a leak.
pub fn live_map_attempts() -> u64 {
    LIVE_ATTEMPTS.load(Ordering::Relaxed)
}

/// Settings the host passes when it opens the engine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostSettings {
    /// Offload worker threads (the engine's own core budget).
    pub offload_threads: usize,
    /// Bytes of map buffers in flight before producers wait.
    pub buffer_pool_bytes: usize,
    /// Engine memory budget in bytes.
    pub memory_budget: usize,
    /// Map-side operator state per map attempt before it spills, in bytes
    /// (the engine's spilling threshold; 0: the engine's default).
    pub operator_state_bytes: usize,
    /// Directory for the engine's spill files.
    pub spill_dir: PathBuf,
    /// Run map work on the task threads while this many map tasks are open
    /// (the executor's task slots: every core busy); 0: never.
    pub inline_at_tasks: usize,
    /// Pin offload worker `i` to core `i` (modulo the cores there are).
    pub pin_offload_threads: bool,
    /// Bytes of a scheduling segment (a map buffer is cut into segments).
    pub segment_bytes: usize,
    /// Liquid offloading: host threads take a share of the map work while
    /// the offload threads fall behind.
    pub liquid_offload: bool,
}

/// The process's engine, created with `settings` on the first call; a
/// later call with other settings than the engine's fails naming them
/// (only `inline_at_tasks` may change: it is applied).
pub fn open_engine(settings: &HostSettings) -> BridgeResult<&'static Engine> {
    let opened = match ENGINE.get() {
        Some(e) => e,
        None => {
            let _guard = ENGINE_INIT.lock().unwrap_or_else(|p| p.into_inner());
            match ENGINE.get() {
                Some(e) => e,
                None => {
                    let engine = Engine::new(engine_config(settings))?;
                    ENGINE.get_or_init(|| (engine, settings.clone()))
                }
            }
        }
    };
    let (engine, first) = opened;
    let changed = settings_changed(first, settings);
    if !changed.is_empty() {
        return Err(BridgeError::SettingsChanged(changed.join("; ")));
    }
    if engine.inline_at_tasks() != settings.inline_at_tasks {
        engine.set_inline_at_tasks(settings.inline_at_tasks);
    }
    Ok(engine)
}

/// The engine's configuration for a host's settings.
fn engine_config(settings: &HostSettings) -> EngineConfig {
    let config = EngineConfig {
        offload_threads: settings.offload_threads.max(1),
        buffer_pool_bytes: settings.buffer_pool_bytes,
        memory_budget: settings.memory_budget,
        spill_dir: settings.spill_dir.clone(),
        inline_at_tasks: settings.inline_at_tasks,
        pin_offload_threads: settings.pin_offload_threads,
        segment_bytes: settings.segment_bytes,
        liquid_offload: settings.liquid_offload,
        ..EngineConfig::default()
    };
    match settings.operator_state_bytes {
        0 => config,
        bytes => EngineConfig { operator_state_bytes: bytes, ..config },
    }
}

/// Each setting of `now` that differs from the engine's (`was`), as "what:
/// the engine has X, asked for Y", by the host's names for them.
fn settings_changed(was: &HostSettings, now: &HostSettings) -> Vec<String> {
    let mut out = Vec::new();
    let mut check = |name: &str, a: String, b: String| {
        if a != b {
            out.push(format!("{name}: the engine has {a}, asked for {b}"));
        }
    };
    check(
        SETTING_OFFLOAD_THREADS,
        was.offload_threads.to_string(),
        now.offload_threads.to_string(),
    );
    check(
        SETTING_BUFFER_POOL,
        was.buffer_pool_bytes.to_string(),
        now.buffer_pool_bytes.to_string(),
    );
    check(SETTING_MEMORY_BUDGET, was.memory_budget.to_string(), now.memory_budget.to_string());
    check(
        SETTING_OPERATOR_STATE,
        was.operator_state_bytes.to_string(),
        now.operator_state_bytes.to_string(),
    );
    check(SETTING_PIN, was.pin_offload_threads.to_string(), now.pin_offload_threads.to_string());
    check(SETTING_SEGMENT, was.segment_bytes.to_string(), now.segment_bytes.to_string());
    check(SETTING_LIQUID, was.liquid_offload.to_string(), now.liquid_offload.to_string());
    check(
        "spill directory",
        was.spill_dir.display().to_string(),
        now.spill_dir.display().to_string(),
    );
    out
}

/// The engine's memory budget under a host by default (256 MiB): the
/// embedded engine's [`sluice_engine::MEMORY_BUDGET_DEFAULT`] is a whole
/// machine's, while a host's executor shares its memory with the host's
/// own heap and must leave this much outside it.
pub const HOST_MEMORY_BUDGET_DEFAULT: usize = 256 << 20;

/// The settings a host gets when it sets none: the engine's defaults,
/// except the memory budget ([`HOST_MEMORY_BUDGET_DEFAULT`]). The host's
/// own defaults must agree (Spark: a JUnit test reads these through JNI).
pub fn host_defaults() -> HostSettings {
    let engine = EngineConfig::default();
    HostSettings {
        offload_threads: engine.offload_threads,
        buffer_pool_bytes: engine.buffer_pool_bytes,
        memory_budget: HOST_MEMORY_BUDGET_DEFAULT,
        operator_state_bytes: engine.operator_state_bytes,
        spill_dir: engine.spill_dir,
        inline_at_tasks: 0,
        pin_offload_threads: engine.pin_offload_threads,
        segment_bytes: engine.segment_bytes,
        liquid_offload: engine.liquid_offload,
    }
}

/// The host's name of [`HostSettings::offload_threads`].
pub const SETTING_OFFLOAD_THREADS: &str = "spark.sluice.offloadThreads";
/// The host's name of [`HostSettings::buffer_pool_bytes`] (bytes).
pub const SETTING_BUFFER_POOL: &str = "spark.sluice.bufferPoolBytes";
/// The host's name of [`HostSettings::memory_budget`] (bytes).
pub const SETTING_MEMORY_BUDGET: &str = "spark.sluice.memoryBudget";
/// The host's name of [`HostSettings::operator_state_bytes`] (bytes).
pub const SETTING_OPERATOR_STATE: &str = "spark.sluice.operatorStateBytes";
/// The host's name of [`HostSettings::pin_offload_threads`].
pub const SETTING_PIN: &str = "spark.sluice.pinOffloadThreads";
/// The host's name of [`HostSettings::segment_bytes`] (bytes).
pub const SETTING_SEGMENT: &str = "spark.sluice.segmentBytes";
/// The host's name of [`HostSettings::liquid_offload`].
pub const SETTING_LIQUID: &str = "spark.sluice.liquidOffload";

/// Bytes of native memory the engine may hold outside the host's memory
/// manager, by its settings: map buffers in flight (the buffer pool), free
/// partition pages kept for reuse (one pool per page size, 16 to 64 KiB),
/// and the engine's memory budget (offloaded operators' map-side state).
/// The host should leave this much beside its own heap (Spark:
/// `spark.executor.memoryOverhead`), plus [`unaccounted_task_bytes`] per
/// concurrent reduce task. Map output and reduce-side runs and tables the
/// host accounts (Spark's execution memory) are not included.
pub fn unaccounted_bytes(settings: &HostSettings) -> u64 {
    let page_sizes = (sluice_core::partition::PAGE_BYTES_DEFAULT.ilog2()
        ..=sluice_engine::PAGE_BYTES_MAX.ilog2())
        .count();
    // Saturating: two settings near their type's maximum must not wrap to
    // a small (or, as a Java long, negative) answer.
    (settings.buffer_pool_bytes)
        .saturating_add(page_sizes.saturating_mul(sluice_engine::PAGE_POOL_FREE_BYTES))
        .saturating_add(settings.memory_budget) as u64
}

/// Bytes one reduce task's native operator may hold beyond what the host
/// granted it: an aggregate's state floor
/// ([`sluice_engine::REDUCE_STATE_FLOOR_BYTES`]), at the end the read
/// buffers of one merge of the most spilled runs it opens at once
/// ([`sluice_core::reorg::MERGE_FAN_IN_MAX`] runs, and a sort's runs in
/// memory sent to disk midway as one more, of
/// [`sluice_core::reorg::MERGE_RUN_READ_BYTES`] each), the two buffers
/// its thread keeps between fetched blocks (the inflate buffer and the
/// copy of a block fed to the operator, at most
/// [`sluice_engine::reduce::THREAD_BUFFER_KEEP_BYTES`] each; a larger
/// block's are freed once it is read), and a sort's run being cut
/// ([`sluice_engine::reduce::SORT_CUT_RUN_BYTES`]).
pub fn unaccounted_task_bytes() -> u64 {
    let runs = sluice_core::reorg::MERGE_FAN_IN_MAX + 1;
    let merge = runs * sluice_core::reorg::MERGE_RUN_READ_BYTES;
    let kept = 2 * sluice_engine::reduce::THREAD_BUFFER_KEEP_BYTES;
    let cut = sluice_engine::reduce::SORT_CUT_RUN_BYTES;
    (sluice_engine::REDUCE_STATE_FLOOR_BYTES + merge + kept + cut) as u64
}

/// The engine, if it was opened.
pub fn engine() -> BridgeResult<&'static Engine> {
    ENGINE
        .get()
        .map(|(e, _)| e)
        .ok_or_else(|| BridgeError::Argument("the Sluice engine was not opened".into()))
}

/// Registers a host-partitioned shuffle of `partitions` reduce partitions
/// and `maps` map tasks, with the engine operator `op`: none, an offloaded
/// aggregation or a sort (whose records carry host keys after the
/// partition id); its reduce side is the host's
/// ([`ReduceOwner::Host`]: the engine allocates no reduce partitions);
/// returns its engine id.
pub fn register_shuffle(partitions: u32, maps: u32, op: StageSpec) -> BridgeResult<u32> {
    if partitions == 0 || maps == 0 {
        return Err(BridgeError::Argument(format!(
            "a shuffle needs at least one partition and one map task (got {partitions}, {maps})"
        )));
    }
    let id = NEXT_SHUFFLE.fetch_add(1, Ordering::Relaxed);
    engine()?.register_shuffle(ShuffleSpec {
        id,
        maps,
        layout: Layout::Variable,
        partitioner: Arc::new(PartitionIdPartitioner::new(partitions)),
        op,
        nodes: None,
        reduce: ReduceOwner::Host,
    })?;
    Ok(id)
}

/// Drops an engine shuffle (its map attempts still running fail).
pub fn unregister_shuffle(id: u32) -> BridgeResult<()> {
    Ok(engine()?.unregister_shuffle(id)?)
}

/// One map attempt running for the host: the engine's [`FileMapTask`] on
/// the process's engine, counted in [`live_map_attempts`] until dropped.
#[derive(Debug)]
pub struct HostMapTask {
    task: FileMapTask<'static>,
    /// Spark's row checksums of the records handed over, where the host
    /// asked for them (see [`RowChecksums`]).
    rows: Option<RowChecksums>,
    _live: LiveAttempt,
}

impl HostMapTask {
    /// Starts attempt `attempt` of map `map` of engine shuffle `shuffle`
    /// (see [`FileMapTask::open`]); with `row_checksums`, Spark's row
    /// checksums of every record handed over are kept (the records are
    /// Spark SQL rows; see [`RowChecksums`]).
    pub fn open(
        shuffle: u32,
        map: u32,
        attempt: u32,
        partitions: u32,
        host_keys: bool,
        row_checksums: bool,
    ) -> BridgeResult<Self> {
        let task = FileMapTask::open(engine()?, shuffle, map, attempt, partitions, host_keys)?;
        let rows = row_checksums.then(|| RowChecksums::new(partitions));
        Ok(HostMapTask { task, rows, _live: LiveAttempt::count() })
    }

    /// See [`FileMapTask::produce`]; adds the records to the row checksums
    /// first, if kept.
    pub fn produce(&mut self, data: &[u8], count: u32) -> BridgeResult<()> {
        if let Some(rows) = &mut self.rows {
            rows.add_records(data, count)?;
        }
        Ok(self.task.produce(data, count)?)
    }

    /// The row checksums of the records handed over so far (see
    /// [`RowChecksums::xor_then_sum`]), if kept.
    pub fn row_checksums(&self) -> Option<Vec<u64>> {
        self.rows.as_ref().map(RowChecksums::xor_then_sum)
    }

    /// See [`FileMapTask::spill`].
    pub fn spill(&mut self, path: &std::path::Path, codec: Codec) -> BridgeResult<Vec<u64>> {
        Ok(self.task.spill(path, codec)?)
    }

    /// Spills so far.
    pub fn spills(&self) -> usize {
        self.task.spills()
    }

    /// See [`FileMapTask::commit_to_file`].
    pub fn commit_to_file(
        self,
        path: &std::path::Path,
        codec: Codec,
        checksum: Option<Algorithm>,
    ) -> BridgeResult<Written> {
        Ok(self.task.commit_to_file(path, codec, checksum)?)
    }
}

/// One count in [`LIVE_ATTEMPTS`], held by a [`HostMapTask`] until it is
/// dropped, however it ends.
#[derive(Debug)]
struct LiveAttempt;

impl LiveAttempt {
    fn count() -> LiveAttempt {
        LIVE_ATTEMPTS.fetch_add(1, Ordering::Relaxed);
        LiveAttempt
    }
}

impl Drop for LiveAttempt {
    fn drop(&mut self) {
        LIVE_ATTEMPTS.fetch_sub(1, Ordering::Relaxed);
    }
}
