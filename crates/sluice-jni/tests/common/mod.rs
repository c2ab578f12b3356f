//! What the bridge's integration tests share: the engine settings they
//! open the process's engine with (the first test to run opens it; later
//! ones get the same engine).

use sluice_jni::bridge::HostSettings;

/// One offload thread, an 8 MiB buffer pool, a 64 MiB budget.
pub(crate) fn settings() -> HostSettings {
    HostSettings {
        offload_threads: 1,
        buffer_pool_bytes: 8 << 20,
        memory_budget: 64 << 20,
        operator_state_bytes: 0,
        spill_dir: std::env::temp_dir(),
    }
}
