//! The map path a Spark map task drives, alone: 1 MiB buffers of engine
//! records (a 4-byte partition id key, a 40-byte value, as a narrow SQL
//! row) handed to `HostMapTask::produce`, partitioned on the producing
//! thread (`inline_at_tasks` 1, as when every core runs a task) into 200
//! partitions. Prints the produce rate per repetition; the map output is
//! given up (no file written), so the figure is the buffer check, the copy
//! into the engine's buffer, the cut into segments and the partitioning.
//! Each value is framed as Spark SQL's row serializer frames a row (a
//! big-endian size, then the row's 36 bytes), and each repetition runs
//! twice, interleaved: without, then with Spark's row checksums (Spark 4.1
//! and later; see `row_checksum`), so the second figure's cost over the
//! first is theirs.
//!
//! `cargo run --release -p sluice-jni --example map_path [MiB] [reps]`

use std::time::Instant;

use sluice_core::reorg::StageSpec;
use sluice_jni::bridge::{host_defaults, open_engine, register_shuffle, HostMapTask, HostSettings};

const PARTITIONS: u32 = 200;
const VALUE_BYTES: usize = 40;
const BUFFER_BYTES: usize = 1 << 20;

fn buffer(seed: &mut u64) -> (Vec<u8>, u32) {
    let mut out = Vec::with_capacity(BUFFER_BYTES);
    let mut n = 0u32;
    while out.len() + 8 + 4 + VALUE_BYTES <= BUFFER_BYTES {
        *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let p = ((*seed >> 33) % u64::from(PARTITIONS)) as u32;
        out.extend_from_slice(&4u32.to_le_bytes());
        out.extend_from_slice(&(VALUE_BYTES as u32).to_le_bytes());
        out.extend_from_slice(&p.to_le_bytes());
        out.extend_from_slice(&(VALUE_BYTES as u32 - 4).to_be_bytes());
        out.extend_from_slice(&seed.to_le_bytes().repeat(VALUE_BYTES / 8)[4..]);
        n += 1;
    }
    (out, n)
}

fn main() {
    let args: Vec<usize> = std::env::args().skip(1).filter_map(|a| a.parse().ok()).collect();
    let mib = args.first().copied().unwrap_or(512);
    let reps = args.get(1).copied().unwrap_or(5);
    let settings = HostSettings { inline_at_tasks: 1, ..host_defaults() };
    open_engine(&settings).expect("engine");
    let mut seed = 7u64;
    let buffers: Vec<(Vec<u8>, u32)> = (0..64).map(|_| buffer(&mut seed)).collect();
    let records_per_rep: u64 = (0..mib).map(|i| u64::from(buffers[i % 64].1)).sum();
    for rep in 0..reps {
        for row_checksums in [false, true] {
            let shuffle = register_shuffle(PARTITIONS, 1, StageSpec::None).expect("register");
            let mut task =
                HostMapTask::open(shuffle, 0, 0, PARTITIONS, false, row_checksums).expect("open");
            let t = Instant::now();
            for i in 0..mib {
                let (data, count) = &buffers[i % 64];
                task.produce(data, *count).expect("produce");
            }
            let took = t.elapsed().as_secs_f64();
            drop(task);
            sluice_jni::bridge::unregister_shuffle(shuffle).expect("unregister");
            let what = if row_checksums { "with row checksums" } else { "plain" };
            println!(
                "rep {rep} {what}: {mib} MiB in {took:.3} s = {:.2} GB/s, {:.1} ns/record",
                (mib << 20) as f64 / took / 1e9,
                took * 1e9 / records_per_rep as f64
            );
        }
    }
}
