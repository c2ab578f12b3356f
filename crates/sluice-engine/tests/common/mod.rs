//! Helpers shared by the engine's integration tests.

use sluice_engine::EngineConfig;

/// A small engine: two offload threads, a 1 MiB buffer pool and 8 KiB
/// segments (so a test's few records still make several segments),
/// spilling under `dir`.
pub(crate) fn small_config(dir: &std::path::Path) -> EngineConfig {
    EngineConfig {
        offload_threads: 2,
        buffer_pool_bytes: 1 << 20,
        segment_bytes: 8 << 10,
        spill_dir: dir.to_path_buf(),
        ..EngineConfig::default()
    }
}
