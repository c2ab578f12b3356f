//! Memory accounting: one pool per engine with a byte budget, and
//! reservations that give their bytes back when dropped.
//!
//! ```text
//!  MemoryPool (budget B) ── try_reserve / try_grow ──► Reservation (bytes b)
//!        ▲                                                  │ drop / shrink
//!        └──────────────────── b returned ──────────────────┘
//! ```
//! Operators hold one [`Reservation`] for their state and grow it *before*
//! they grow the state. A refused growth is the signal to spill (emit the
//! state downstream, or write it to disk) and shrink; nothing is allocated
//! past the budget by accounted state.
//!
//! # What is accounted
//! Operator state: hash table slots and key arenas, aggregate states and
//! collected values, distinct sets, sort buffers with their two entry
//! arrays, and sorted runs the reduce-side sort keeps in memory. Each
//! operator reserves by capacity (what it will allocate), before allocating.
//!
//! # What is not
//! - input batches (owned by the caller) and output batches once emitted;
//! - a spill file's write buffer (up to 2 x 1 MiB per spilling operator) and,
//!   while runs are merged, one decoded block per run plus its scratch;
//! - the sorted copy of a final operator's table while it is written out as a
//!   run (the table itself is freed right after);
//! - small fixed bookkeeping (a few hundred bytes per operator, 24 bytes per
//!   spilled block in the index), thread stacks and allocator overhead.

mod pool;

pub use pool::{MemoryError, MemoryPool, Reservation};
