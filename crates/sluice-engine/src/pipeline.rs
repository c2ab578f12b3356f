//! One map-side worker's data path: partition a batch, then run the
//! shuffle's operator on each destination's records.
//!
//! ```text
//!  batch ──► partition (LocalPagesAndMerge, 1 thread) ──► pages of p ──► op[p] ──► out[p]
//! ```
//! With no operator the pages themselves become `out[p]`'s batches (no
//! copy); shipped batches handed back return to the page pool. For
//! variable-width records the pipeline then keeps one open page chain per
//! destination across batches, so a page is handed on only when full (or at
//! a flush): partitioning each input batch into pages of its own would
//! leave every page holding only that batch's share (a 100 KB segment over
//! 24 destinations: 4 KB in a 16 KiB page), so the output would take
//! several times its bytes in memory and reach the writer as many small
//! batches.
//! Partitioned pages are staged per destination until [`STAGE_BYTES`] have
//! gathered (an aggregate's share of the threshold, up to
//! [`AGGREGATE_STAGE_BYTES_MAX`]), then the destination's operator runs
//! over all of them at once.
//! Each destination has its own operator instance and output, so state
//! stays small per destination (a table per destination fits the caches
//! where one big table would not) and output is already grouped for
//! sending. The operator's threshold is split evenly across destinations,
//! as if there were at most [`THRESHOLD_SPLIT_MAX`] of them: past that, each
//! destination keeps a hundredth of it and the engine's memory pool, not
//! the split, bounds what the pipeline holds in all.

use std::sync::Arc;

use sluice_core::format::{BatchView, Layout, RecordBatch};
use sluice_core::memory::MemoryPool;
use sluice_core::partition::page::PageChain;
use sluice_core::partition::strategy::{for_each_raw, LocalPagesAndMerge};
use sluice_core::partition::{
    Page, PagePool, PartitionError, PartitionJob, PartitionStrategy, Partitioned, Partitioner,
};
use sluice_core::reorg::aggregate::PartialAggregate;
use sluice_core::reorg::distinct::PartialDistinct;
use sluice_core::reorg::filter::Filter;
use sluice_core::reorg::sort::SortRuns;
use sluice_core::reorg::Emitter;
use sluice_core::reorg::{ReorgError, StageSpec};

/// Bytes of partitioned records a destination collects before its operator
/// runs over them (256 KiB): the operator's table is then pulled into the
/// cache once per 256 KiB of its records rather than once per input batch's
/// share (1 MiB / destinations). Staged pages are pool pages, not accounted
/// in the memory pool: any two consecutive ones of a destination hold more
/// than a page (`stage_page`), so at most destinations x (twice the stage
/// + one page).
pub const STAGE_BYTES: usize = 256 << 10;

/// Largest stage of an aggregating destination (1 MiB). An aggregate's
/// stage is its share of the threshold (its table's size), at least
/// [`STAGE_BYTES`] and at most this: a probe touches a random line of the
/// table, so the whole table passes through the cache once per stage, and
/// a stage smaller than the table pays more of that traffic per record.
/// Measured with `sluice bench operators --ops aggregate` (8-byte keys, 1M
/// keys, 16 MB over 16 destinations, one worker), two sets of three
/// interleaved runs: 3.49-3.78 and 3.50-3.65 Gbit/s with 256 KiB stages,
/// 3.79-4.48 and 3.85-4.02 with 1 MiB, the aggregation rate unchanged
/// (0.28); sort and distinct gained nothing from larger stages and keep
/// [`STAGE_BYTES`].
pub const AGGREGATE_STAGE_BYTES_MAX: usize = 1 << 20;

/// Most destinations a pipeline's threshold is split across (100): with
/// more, each destination's operator still gets a hundredth of it. An even
/// split of the default 16 MiB over Spark's 200 shuffle partitions (84 KB
/// each) was too small for many-group aggregates such as TPC-H q17's (see
/// `docs/benchmarks.md`, "Map-side operator state split over at most 100
/// destinations"). The engine's map-side memory pool bounds the sum: more
/// tasks or destinations share it, and a refused reservation makes a table
/// evict instead of growing.
pub const THRESHOLD_SPLIT_MAX: usize = 100;

/// One destination's operator.
#[derive(Debug)]
enum Stage {
    None,
    Aggregate(Box<PartialAggregate>),
    Sort(SortRuns),
    Distinct(PartialDistinct),
    Filter(Filter),
}

/// Totals of a pipeline.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PipelineStats {
    /// Records taken in.
    pub input_records: u64,
    /// Payload bytes taken in.
    pub input_bytes: u64,
    /// Records emitted across destinations.
    pub output_records: u64,
    /// Payload bytes emitted across destinations.
    pub output_bytes: u64,
    /// Spills (state spills and pass-throughs) across destinations.
    pub spills: u64,
}

impl PipelineStats {
    /// Adds another pipeline's totals to these.
    pub fn add(&mut self, o: &PipelineStats) {
        self.input_records += o.input_records;
        self.input_bytes += o.input_bytes;
        self.output_records += o.output_records;
        self.output_bytes += o.output_bytes;
        self.spills += o.spills;
    }
}

/// A map-side worker: partitioner, per-destination operators and outputs.
#[derive(Debug)]
pub struct MapPipeline {
    layout: Layout,
    partitioner: Arc<dyn Partitioner>,
    pages: Arc<PagePool>,
    stages: Vec<Stage>,
    outs: Vec<Emitter>,
    /// Partitioned pages waiting for their destination's operator.
    staged: Vec<Vec<Page>>,
    staged_bytes: Vec<usize>,
    stage_bytes: usize,
    /// Open page chains per destination, for a partition-only pipeline over
    /// variable-width records (empty otherwise).
    open: Vec<PageChain>,
    stats: PipelineStats,
}

/// One destination's share of a pipeline's `threshold` over `parts`
/// destinations: an even split over at most [`THRESHOLD_SPLIT_MAX`].
pub(crate) fn destination_share(threshold: usize, parts: usize) -> usize {
    threshold / parts.clamp(1, THRESHOLD_SPLIT_MAX)
}

impl MapPipeline {
    /// A pipeline over records in `layout`; `threshold` bytes of operator
    /// state split across the partitioner's destinations (at most
    /// [`THRESHOLD_SPLIT_MAX`] ways).
    pub fn new(
        layout: Layout,
        partitioner: Arc<dyn Partitioner>,
        pages: Arc<PagePool>,
        spec: &StageSpec,
        threshold: usize,
        memory: &MemoryPool,
    ) -> Self {
        let parts = partitioner.partitions() as usize;
        let each = destination_share(threshold, parts);
        let mut outs = Vec::with_capacity(parts);
        let stages = (0..parts)
            .map(|_| {
                let (stage, out_layout) = match spec {
                    StageSpec::None => (Stage::None, layout),
                    StageSpec::Aggregate(agg, strategy) => {
                        let op = PartialAggregate::new(*agg, layout, each, *strategy, memory);
                        let l = op.output_layout();
                        (Stage::Aggregate(Box::new(op)), l)
                    }
                    StageSpec::Sort => (Stage::Sort(SortRuns::new(layout, each, memory)), layout),
                    StageSpec::Distinct(by, strategy) => {
                        let op = PartialDistinct::new(*by, layout, each, *strategy, memory);
                        let l = op.output_layout();
                        (Stage::Distinct(op), l)
                    }
                    StageSpec::Filter(p) => (Stage::Filter(Filter::new(p.clone())), layout),
                };
                outs.push(Emitter::new(out_layout));
                stage
            })
            .collect();
        let stage_bytes = match spec {
            StageSpec::None => 0,
            StageSpec::Aggregate(..) => each.clamp(STAGE_BYTES, AGGREGATE_STAGE_BYTES_MAX),
            _ => STAGE_BYTES,
        };
        let open = if matches!(spec, StageSpec::None) && layout == Layout::Variable {
            (0..parts).map(|_| PageChain::default()).collect()
        } else {
            Vec::new()
        };
        MapPipeline {
            layout,
            partitioner,
            pages,
            stages,
            outs,
            staged: (0..parts).map(|_| Vec::new()).collect(),
            staged_bytes: vec![0; parts],
            stage_bytes,
            open,
            stats: PipelineStats::default(),
        }
    }

    /// Partitions one batch and runs each destination's operator on it.
    pub fn push(&mut self, view: &BatchView<'_>) -> Result<(), ReorgError> {
        if !self.open.is_empty() {
            return self.push_open(view);
        }
        let job = PartitionJob {
            layout: self.layout,
            input: std::slice::from_ref(view),
            partitioner: &*self.partitioner,
            threads: 1,
            pool: &self.pages,
        };
        let parted = LocalPagesAndMerge.run(&job)?;
        self.stats.input_records += view.len() as u64;
        self.stats.input_bytes += view.payload().len() as u64;
        let Partitioned::Pages(parted) = parted else {
            // Thread-local pages always produce pages.
            return Ok(());
        };
        for (p, pages) in parted.into_partitions().into_iter().enumerate() {
            for page in pages {
                self.staged_bytes[p] += page.bytes();
                stage_page(&mut self.staged[p], page, &self.pages);
            }
            if self.staged_bytes[p] >= self.stage_bytes {
                self.run_stage(p)?;
            }
        }
        Ok(())
    }

    /// Partition only, variable-width records: each record goes to the
    /// open page of its destination; pages that filled become output.
    fn push_open(&mut self, view: &BatchView<'_>) -> Result<(), ReorgError> {
        if view.layout() != self.layout {
            return Err(PartitionError::MixedLayouts.into());
        }
        let (open, partitioner, pages) = (&mut self.open, &*self.partitioner, &*self.pages);
        let mut out_of_range = None;
        for_each_raw(view, |r| {
            let p = partitioner.partition(r.key);
            match open.get_mut(p as usize) {
                Some(chain) => chain.push(r.bytes, pages),
                None => out_of_range = Some(p),
            }
        });
        if let Some(got) = out_of_range {
            let partitions = partitioner.partitions();
            return Err(PartitionError::PartitionOutOfRange { got, partitions }.into());
        }
        self.stats.input_records += view.len() as u64;
        self.stats.input_bytes += view.payload().len() as u64;
        for (chain, out) in self.open.iter_mut().zip(&mut self.outs) {
            for page in chain.drain_full() {
                out.push_batch(page.into_batch(self.layout));
            }
        }
        Ok(())
    }

    /// Hands every open page on as output, full or not.
    fn close_open_pages(&mut self) {
        for (chain, out) in self.open.iter_mut().zip(&mut self.outs) {
            let chain = std::mem::take(chain);
            for page in chain.into_pages() {
                out.push_batch(page.into_batch(self.layout));
            }
        }
    }

    /// Runs destination `p`'s operator over its staged pages and recycles
    /// them.
    fn run_stage(&mut self, p: usize) -> Result<(), ReorgError> {
        let pages = std::mem::take(&mut self.staged[p]);
        self.staged_bytes[p] = 0;
        let (stage, out) = (&mut self.stages[p], &mut self.outs[p]);
        if let Stage::None = stage {
            // Partition only: the pages are the output.
            for page in pages {
                out.push_batch(page.into_batch(self.layout));
            }
            return Ok(());
        }
        let mut result = Ok(());
        for page in &pages {
            let v = page.view(self.layout);
            result = match stage {
                // Handled above.
                Stage::None => Ok(()),
                Stage::Aggregate(op) => op.push(&v, out),
                Stage::Sort(op) => op.push(&v, out),
                Stage::Distinct(op) => op.push(&v, out),
                Stage::Filter(op) => op.push(&v, out),
            };
            if result.is_err() {
                break;
            }
        }
        self.pages.recycle_all(pages);
        result
    }

    /// Runs every destination's staged pages through its operator and seals
    /// its partly filled output batch, so that [`MapPipeline::take_output`]
    /// returns everything emitted so far; the operators keep their state
    /// and take more input afterwards (a host that spills map output part
    /// way, and frees all its accounting of it: nothing emitted may stay
    /// behind).
    pub fn flush_stages(&mut self) -> Result<(), ReorgError> {
        self.close_open_pages();
        for p in 0..self.stages.len() {
            if !self.staged[p].is_empty() {
                self.run_stage(p)?;
            }
        }
        self.outs.iter_mut().for_each(Emitter::flush);
        Ok(())
    }

    /// Output batches of destination `p` finished so far (for a sender).
    pub fn take_output(&mut self, p: usize) -> Vec<RecordBatch> {
        self.outs.get_mut(p).map(Emitter::take_batches).unwrap_or_default()
    }

    /// Output of destination `p` as its sorted runs (for the sort stage;
    /// one run per spill), after [`MapPipeline::finish`]; other stages
    /// give one run holding everything.
    pub fn take_runs(&mut self, p: usize) -> Vec<Vec<RecordBatch>> {
        self.outs.get_mut(p).map(Emitter::take_runs).unwrap_or_default()
    }

    /// Returns shipped batches of destination `p` for reuse (partition
    /// only: their buffers are pages, back to the page pool).
    pub fn recycle_output(&mut self, p: usize, batches: Vec<RecordBatch>) {
        if matches!(self.stages.get(p), Some(Stage::None)) {
            self.pages.recycle_all(batches.into_iter().map(|b| Page::from_buffer(b.into_buffer())));
            return;
        }
        if let Some(o) = self.outs.get_mut(p) {
            o.recycle(batches);
        }
    }

    /// Number of destinations.
    pub fn destinations(&self) -> usize {
        self.stages.len()
    }

    /// End of input: flushes every operator and seals every output, so
    /// [`MapPipeline::take_output`] then returns all of it; returns the
    /// totals.
    pub fn finish(&mut self) -> Result<PipelineStats, ReorgError> {
        self.close_open_pages();
        for p in 0..self.stages.len() {
            self.run_stage(p)?;
        }
        let mut spills = 0;
        for (stage, out) in self.stages.iter_mut().zip(&mut self.outs) {
            match stage {
                Stage::None | Stage::Filter(_) => {}
                Stage::Aggregate(op) => {
                    op.finish(out)?;
                    spills += op.stats().spill_count();
                }
                Stage::Sort(op) => {
                    op.finish(out)?;
                    spills += op.stats().runs.saturating_sub(1);
                }
                Stage::Distinct(op) => {
                    op.finish();
                    spills += op.stats().spill_count();
                }
            }
        }
        let mut stats = self.stats;
        for out in &mut self.outs {
            out.flush();
            stats.output_records += out.records();
            stats.output_bytes += out.bytes();
        }
        stats.spills = spills;
        Ok(stats)
    }
}

/// Adds `page` to a destination's staged pages. A page that fits in the
/// room left on the last staged one is copied there and goes back to the
/// pool: with many destinations each gets a few records of every input
/// batch (200 destinations: about 5 KB of a 1 MiB batch), and without the
/// copy it would stage one mostly empty pool page per batch, about 50 of
/// them before its 256 KiB stage runs, more pages in flight than the
/// pool keeps free (each batch's then allocated and freed).
fn stage_page(staged: &mut Vec<Page>, page: Page, pool: &PagePool) {
    if let Some(last) = staged.last_mut() {
        if last.bytes() + page.bytes() <= pool.page_bytes() {
            last.push_many(page.payload(), page.len() as u32);
            pool.recycle(page);
            return;
        }
    }
    staged.push(page);
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::partition::FoldHash;
    use sluice_core::reorg::aggregate::{AggFn, AggSpec, SpillStrategy, ValueType};

    /// A flush part way hands over every record the operators emitted so
    /// far, the partly filled batches included: the host frees its
    /// accounting of the output when it spills, so nothing may stay behind.
    #[test]
    fn a_flush_hands_over_everything_emitted_so_far() {
        let layout = Layout::fixed(8, 4).expect("layout");
        let f: Arc<dyn Partitioner> = Arc::new(FoldHash::new(64).expect("fold"));
        let memory = MemoryPool::new(1 << 30);
        let spec = AggSpec::new(AggFn::Sum, ValueType::I32);
        let stage = StageSpec::Aggregate(spec, SpillStrategy::Evict);
        let pages = Arc::new(PagePool::new(4096));
        let mut p = MapPipeline::new(layout, f, pages, &stage, 64 << 10, &memory);
        let mut b = RecordBatch::new(layout);
        for k in 0..200_000u64 {
            b.push(&k.to_be_bytes(), &1i32.to_le_bytes()).expect("push");
        }
        p.push(&b.view()).expect("push");
        p.flush_stages().expect("flush");
        let emitted: u64 = p.outs.iter().map(Emitter::bytes).sum();
        assert!(emitted > 0, "the tables evicted nothing");
        let taken: usize = (0..64).flat_map(|d| p.take_output(d)).map(|b| b.payload_len()).sum();
        assert_eq!(taken as u64, emitted, "emitted records left behind");
    }

    #[test]
    fn the_threshold_splits_evenly_up_to_its_most_destinations() {
        assert_eq!(destination_share(16 << 20, 16), 1 << 20);
        assert_eq!(destination_share(16 << 20, 0), 16 << 20);
        assert_eq!(destination_share(64 << 10, 4), 16 << 10);
        assert_eq!(destination_share(100 << 20, THRESHOLD_SPLIT_MAX), 1 << 20);
        // Spark's 200 shuffle partitions: a hundredth each, not 84 KB.
        assert_eq!(destination_share(16 << 20, 200), (16 << 20) / 100);
        assert_eq!(destination_share(16 << 20, 2000), (16 << 20) / 100);
    }

    /// A destination that gets a few records of every batch stages about
    /// one page per page of records, in order, not one page per batch.
    #[test]
    fn small_pages_are_staged_into_the_last_one() {
        const PAGE: usize = 16 << 10;
        let pool = PagePool::new(PAGE);
        let mut staged = Vec::new();
        let mut expected = Vec::new();
        for batch in 0..200u32 {
            // 5,000 to 5,999 bytes of 8-byte records.
            let records = 625 + batch % 125;
            let raw: Vec<u8> =
                (0..records).flat_map(|r| u64::from(batch << 16 | r).to_le_bytes()).collect();
            expected.extend_from_slice(&raw);
            let mut page = pool.page();
            page.push_many(&raw, records);
            stage_page(&mut staged, page, &pool);
        }
        let bytes: usize = staged.iter().map(Page::bytes).sum();
        assert_eq!(bytes, expected.len());
        // Any two consecutive pages hold more than a page.
        assert!(staged.len() <= 2 * bytes.div_ceil(PAGE) + 1, "{} pages", staged.len());
        assert!(staged.windows(2).all(|w| w[0].bytes() + w[1].bytes() > PAGE));
        let records: usize = staged.iter().map(Page::len).sum();
        assert_eq!(records, expected.len() / 8);
        let joined: Vec<u8> = staged.iter().flat_map(|p| p.payload().to_vec()).collect();
        assert_eq!(joined, expected, "records out of order");
    }
}
