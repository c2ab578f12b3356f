//! A model of one shuffle on 100 to 1,000 nodes: what each node serves
//! under Spark's sort shuffle (every map output's blocks fetched one by one
//! by every reduce task) against what each Sluice daemon does (two levels:
//! a map task's output cut by node into chunks, a node's partitions served
//! as one stream per reduce task). It uses the service's own limits and
//! ownership function (`PUSH_CHUNK_BYTES`, `reduce_ids`, `DEFAULT_MAX_CONNECTIONS`,
//! `MAX_WINNERS_PER_READ`), its push order and Spark's defaults for the fetch side, and
//! assumes evenly spread data (every block non-empty, every partition the
//! same size). Run:
//!
//! ```sh
//! cargo run -q --release -p sluice-service --example scale_model -- \
//!     [--nodes 100,300,1000] [--maps-per-node 50] [--reduces-per-node 50] \
//!     [--gib-per-node 64] [--slots-per-node 32] [--executors-per-node 4] \
//!     [--memory-gib 8]
//! ```
//!
//! The defaults are SmartShuffle's example (1,000 nodes, 50 map and 50
//! reduce tasks per node: about 2.5 M map-side partitions per node).
//! docs/service.md ("A model of 100 to 1,000 nodes") shows its output.

use sluice_service::daemon::{DEFAULT_MAX_CONNECTIONS, LEASE_CONNECTIONS, RESERVED_FDS};
use sluice_service::protocol::limits::{MAX_WINNERS_PER_READ, PUSH_CHUNK_BYTES};
use sluice_service::reduce_ids;

/// Spark's `spark.reducer.maxSizeInFlight` default (48 MiB): a reduce task
/// asks one executor for at most a fifth of it per request.
const SPARK_MAX_BYTES_IN_FLIGHT: f64 = 48.0 * 1024.0 * 1024.0;
/// Spark's `spark.shuffle.io.numConnectionsPerPeer` default.
const SPARK_CONNECTIONS_PER_PEER: f64 = 1.0;

struct Setup {
    nodes: Vec<u64>,
    maps_per_node: u64,
    reduces_per_node: u64,
    bytes_per_node: f64,
    slots_per_node: u64,
    executors_per_node: u64,
    memory: f64,
}

fn parse() -> Result<Setup, String> {
    let mut s = Setup {
        nodes: vec![100, 300, 1000],
        maps_per_node: 50,
        reduces_per_node: 50,
        bytes_per_node: 64.0 * GIB,
        slots_per_node: 32,
        executors_per_node: 4,
        memory: 8.0 * GIB,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    for pair in args.chunks(2) {
        let [flag, v] = pair else { return Err(format!("{pair:?} has no value")) };
        let num = |v: &str| v.parse::<u64>().map_err(|e| format!("{flag} {v}: {e}"));
        match flag.as_str() {
            "--nodes" => s.nodes = v.split(',').map(num).collect::<Result<_, _>>()?,
            "--maps-per-node" => s.maps_per_node = num(v)?,
            "--reduces-per-node" => s.reduces_per_node = num(v)?,
            "--gib-per-node" => s.bytes_per_node = num(v)? as f64 * GIB,
            "--slots-per-node" => s.slots_per_node = num(v)?,
            "--executors-per-node" => s.executors_per_node = num(v)?,
            "--memory-gib" => s.memory = num(v)? as f64 * GIB,
            _ => return Err(format!("unknown option {flag}")),
        }
    }
    if s.nodes.is_empty() || s.nodes.contains(&0) || s.maps_per_node == 0 {
        return Err("nodes and maps per node must be positive".into());
    }
    Ok(s)
}

const GIB: f64 = 1024.0 * 1024.0 * 1024.0;

fn human(x: f64) -> String {
    match x {
        x if x >= 1e9 => format!("{:.1} G", x / 1e9),
        x if x >= 1e6 => format!("{:.1} M", x / 1e6),
        x if x >= 1e4 => format!("{:.0} k", x / 1e3),
        x => format!("{x:.0}"),
    }
}

fn bytes(x: f64) -> String {
    match x {
        x if x >= GIB => format!("{:.1} GiB", x / GIB),
        x if x >= 1024.0 * 1024.0 => format!("{:.1} MiB", x / 1024.0 / 1024.0),
        x if x >= 1024.0 => format!("{:.1} KiB", x / 1024.0),
        x => format!("{x:.0} B"),
    }
}

fn main() {
    let s = match parse() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("scale_model: {e}");
            std::process::exit(2);
        }
    };
    println!(
        "one shuffle, per node: {} map and {} reduce tasks, {} of map output, {} task slots in \
         {} executors; daemon memory {}",
        s.maps_per_node,
        s.reduces_per_node,
        bytes(s.bytes_per_node),
        s.slots_per_node,
        s.executors_per_node,
        bytes(s.memory)
    );
    println!();
    println!(
        "| nodes | Spark: blocks served (random reads) | block size | fetch requests in | \
         connections in | Sluice: push frames in | commits in | reads in (one per reduce \
         task) | sections per read | spill writes = sequential reads | connections in, peak |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    for &n in &s.nodes {
        let maps = (n * s.maps_per_node) as f64;
        let reduces = n * s.reduces_per_node;
        let (e, d) = (s.executors_per_node as f64, s.bytes_per_node);
        // Spark: each of the node's maps has one block per reduce partition,
        // read from disk on its own; each reduce task asks each executor for
        // its blocks in requests of at most a fifth of maxSizeInFlight.
        let blocks = s.maps_per_node as f64 * reduces as f64;
        let block_bytes = d / blocks;
        let per_reducer_per_executor = d / e / reduces as f64;
        let requests = reduces as f64
            * e
            * (per_reducer_per_executor / (SPARK_MAX_BYTES_IN_FLIGHT / 5.0)).ceil();
        let spark_conns = (n as f64) * e * e * SPARK_CONNECTIONS_PER_PEER;
        // Sluice: each map cuts its output by node (the first level) and
        // pushes each node's part in chunks; it commits at every daemon.
        let owned = reduce_ids(0, reduces as u32, n as u32).len() as f64;
        let to_daemon = d / s.maps_per_node as f64 / n as f64;
        let pushes = maps * (to_daemon / PUSH_CHUNK_BYTES as f64).ceil().max(1.0);
        // A daemon over its memory spills the owner with the most bytes:
        // with its partitions growing evenly, about memory/owned per write;
        // each run is read back in one sequential read.
        let spills = if d > s.memory { owned * (d - s.memory) / s.memory } else { 0.0 };
        // A map task pushes to one daemon at a time, starting at the daemon
        // its map index picks, and reduce tasks read from their partitions'
        // daemon: an executor's tasks seldom meet at one daemon, so each
        // executor keeps about one pooled connection per daemon (more while
        // its tasks meet at one, closed 30 s after their last use).
        let conns = (n * s.executors_per_node) as f64;
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {}{} |",
            human(blocks),
            bytes(block_bytes),
            human(requests),
            human(spark_conns),
            human(pushes),
            human(maps),
            human(owned),
            human(maps),
            human(spills.ceil()),
            human(conns),
            if conns > DEFAULT_MAX_CONNECTIONS as f64 {
                format!(
                    " (over the default: `--max-connections {conns}`, `ulimit -n` at least {})",
                    conns as u64 + RESERVED_FDS + LEASE_CONNECTIONS as u64
                )
            } else {
                String::new()
            },
        );
        if maps > f64::from(MAX_WINNERS_PER_READ) {
            println!("  ! {maps} maps: a read names more winners than MAX_WINNERS_PER_READ");
        }
    }
}
