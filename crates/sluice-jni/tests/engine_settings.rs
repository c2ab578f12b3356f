//! The process's engine under successive host contexts: a later open with
//! the same settings gets the engine, one with another task slot count
//! changes it, one with any other setting changed fails naming each
//! setting. A test binary of its own: the engine is once per process.

use sluice_jni::bridge::{host_defaults, open_engine, HostSettings, HOST_MEMORY_BUDGET_DEFAULT};
use sluice_jni::error::BridgeError;

fn first() -> HostSettings {
    HostSettings {
        offload_threads: 1,
        buffer_pool_bytes: 8 << 20,
        memory_budget: 64 << 20,
        operator_state_bytes: 1 << 20,
        spill_dir: std::env::temp_dir(),
        inline_at_tasks: 2,
        pin_offload_threads: false,
        segment_bytes: 50_000,
        liquid_offload: true,
    }
}

#[test]
fn a_later_context_gets_the_engine_or_an_error_naming_what_changed() {
    let engine = open_engine(&first()).expect("engine");
    assert_eq!(engine.config().memory_budget, 64 << 20);
    assert_eq!(engine.config().operator_state_bytes, 1 << 20);
    assert_eq!(engine.config().segment_bytes, 50_000);
    assert!(engine.config().liquid_offload);
    assert!(!engine.config().pin_offload_threads);
    assert_eq!(engine.inline_at_tasks(), 2);

    let again = open_engine(&first()).expect("same settings");
    assert!(std::ptr::eq(engine, again));

    // Another task slot count is applied.
    let more_slots = HostSettings { inline_at_tasks: 4, ..first() };
    open_engine(&more_slots).expect("task slots may change");
    assert_eq!(engine.inline_at_tasks(), 4);

    // Anything else fails, naming each setting, the engine's value and the
    // one asked for; the engine keeps its settings.
    let other = HostSettings {
        memory_budget: 128 << 20,
        offload_threads: 2,
        liquid_offload: false,
        ..first()
    };
    let err = open_engine(&other).expect_err("other settings");
    assert!(matches!(err, BridgeError::SettingsChanged(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains("spark.sluice.memoryBudget: the engine has 67108864, asked for 134217728"),
        "{text}"
    );
    assert!(text.contains("spark.sluice.offloadThreads: the engine has 1, asked for 2"), "{text}");
    assert!(
        text.contains("spark.sluice.liquidOffload: the engine has true, asked for false"),
        "{text}"
    );
    assert!(!text.contains("bufferPoolBytes"), "{text}");
    assert_eq!(engine.config().memory_budget, 64 << 20);
    assert_eq!(engine.inline_at_tasks(), 4, "a refused open changes nothing");
    let dir = HostSettings { spill_dir: std::env::temp_dir().join("elsewhere"), ..first() };
    assert!(open_engine(&dir).expect_err("spill dir").to_string().contains("spill directory"));
}

#[test]
fn host_defaults_are_the_engines_but_a_host_sized_budget() {
    let d = host_defaults();
    let e = sluice_engine::EngineConfig::default();
    assert_eq!(d.offload_threads, e.offload_threads);
    assert_eq!(d.buffer_pool_bytes, sluice_engine::BUFFER_POOL_BYTES_DEFAULT);
    assert_eq!(d.operator_state_bytes, sluice_engine::OPERATOR_STATE_BYTES_DEFAULT);
    assert_eq!(d.memory_budget, HOST_MEMORY_BUDGET_DEFAULT);
    assert_eq!(d.segment_bytes, sluice_engine::SEGMENT_BYTES_DEFAULT);
    assert_eq!(d.pin_offload_threads, e.pin_offload_threads);
    assert_eq!(d.liquid_offload, e.liquid_offload);
    const { assert!(HOST_MEMORY_BUDGET_DEFAULT < sluice_engine::MEMORY_BUDGET_DEFAULT) };
}
