//! Two-level partitioning (SmartShuffle 4.2.1): the map side partitions by
//! destination *node*, the reduce side repartitions each node's chunks
//! into that node's reduce partitions.
//!
//! With `m` map tasks and `r` reduce tasks a map-side partition per reduce
//! task makes `m x r` small chunks; by node it makes `m x nodes` large ones,
//! and the fan-out to reduce tasks happens once per node, on the receiving
//! side. Node `n` of `N` owns the contiguous reduce ids
//! `[n P / N, (n + 1) P / N)`, so a range partitioner's order carries over:
//! node ids are in key order, and splitting a sorted run by reduce id keeps
//! each piece sorted.

use std::sync::Arc;

use sluice_core::format::{Layout, RecordBatch};
use sluice_core::partition::Partitioner;

use crate::error::EngineError;

/// The node of reduce partition `r` of `partitions`, with `nodes` nodes.
pub fn node_of(r: u32, partitions: u32, nodes: u32) -> u32 {
    (u64::from(r) * u64::from(nodes) / u64::from(partitions.max(1))) as u32
}

/// The reduce ids node `n` owns.
pub fn reduce_ids(n: u32, partitions: u32, nodes: u32) -> std::ops::Range<u32> {
    let first = |n: u32| {
        // The smallest r with node_of(r) >= n.
        ((u64::from(n) * u64::from(partitions)).div_ceil(u64::from(nodes.max(1)))) as u32
    };
    first(n)..first(n + 1).min(partitions)
}

/// A reduce partitioner seen at node granularity.
#[derive(Debug)]
pub(crate) struct NodePartitioner {
    inner: Arc<dyn Partitioner>,
    nodes: u32,
}

impl NodePartitioner {
    pub(crate) fn new(inner: Arc<dyn Partitioner>, nodes: u32) -> Self {
        NodePartitioner { inner, nodes }
    }
}

impl Partitioner for NodePartitioner {
    fn partitions(&self) -> u32 {
        self.nodes
    }

    fn partition(&self, key: &[u8]) -> u32 {
        node_of(self.inner.partition(key), self.inner.partitions(), self.nodes)
    }

    fn name(&self) -> &'static str {
        "node"
    }
}

/// Splits runs bound for one node into runs per reduce id of that node
/// (`ids`), keeping record order within each run.
pub(crate) fn split_runs(
    runs: Vec<Vec<RecordBatch>>,
    partitioner: &dyn Partitioner,
    ids: std::ops::Range<u32>,
) -> Result<Vec<Vec<Vec<RecordBatch>>>, EngineError> {
    let n = ids.len();
    let mut out: Vec<Vec<Vec<RecordBatch>>> = (0..n).map(|_| Vec::new()).collect();
    let mut pids = Vec::new();
    for run in runs {
        let Some(layout) = run.first().map(RecordBatch::layout) else { continue };
        let mut pieces: Vec<RecordBatch> = (0..n).map(|_| RecordBatch::new(layout)).collect();
        for batch in &run {
            pids.clear();
            let view = batch.view();
            partitioner.partition_batch(&view, &mut pids);
            match layout {
                Layout::Fixed { .. } => {
                    let width = layout.fixed_record_bytes().unwrap_or(1).max(1);
                    for (rec, &p) in view.payload().chunks_exact(width).zip(&pids) {
                        piece(&mut pieces, p, &ids)?.extend_fixed(rec)?;
                    }
                }
                Layout::Variable => {
                    for (rec, &p) in view.iter().zip(&pids) {
                        piece(&mut pieces, p, &ids)?.push(rec.key, rec.value)?;
                    }
                }
            }
        }
        for (i, b) in pieces.into_iter().enumerate() {
            if !b.is_empty() {
                out[i].push(vec![b]);
            }
        }
    }
    Ok(out)
}

fn piece<'a>(
    pieces: &'a mut [RecordBatch],
    p: u32,
    ids: &std::ops::Range<u32>,
) -> Result<&'a mut RecordBatch, EngineError> {
    let i = p.checked_sub(ids.start).filter(|_| ids.contains(&p));
    i.and_then(|i| pieces.get_mut(i as usize)).ok_or_else(|| {
        EngineError::Invariant(format!("reduce id {p} routed to the node owning {ids:?}"))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nodes_own_contiguous_ranges_that_cover_every_reduce_id() {
        for partitions in [1u32, 2, 7, 8, 100] {
            for nodes in 1..=partitions.min(9) {
                let mut next = 0;
                for n in 0..nodes {
                    let ids = reduce_ids(n, partitions, nodes);
                    assert_eq!(ids.start, next, "P={partitions} N={nodes} n={n}");
                    assert!(!ids.is_empty(), "P={partitions} N={nodes} n={n}");
                    for r in ids.clone() {
                        assert_eq!(node_of(r, partitions, nodes), n);
                    }
                    next = ids.end;
                }
                assert_eq!(next, partitions);
            }
        }
    }
}
