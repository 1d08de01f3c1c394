//! A small in-memory key-value store handler with Memcached's locking (Protego §5.3): item
//! locks hashed by key, a global slab lock every SET takes to allocate its item's chunk, and a
//! dropped SET's cleanup that frees the chunk under the slab lock again.
//!
//! It runs the scenario's request programs (experiments/protego/memcached-*.toml), whose lock
//! steps say which lock a request takes and for how long: the handler does the store's real work
//! inside each critical section (pop a chunk from the slab's free list, write or read the value,
//! link it into its bucket) and spins for the rest of the step's time, so that the locks stay the
//! bottleneck the scenario describes. The key is the item lock its program drew (the programs
//! draw keys from the scenario's skewed popularity and hash them onto the item family): one item
//! per bucket. Every lock is taken with `lock_if_uncongested` except the cleanup's.

use std::sync::atomic::{AtomicU64, Ordering};

use microsched_core::program::Op;
use microsched_core::scenario::Scenario;
use microsched_core::sched::asqm::Config;
use microsched_core::Nanos;

use crate::asqm::AsqmMutex;
use crate::clock::spin_for;
use crate::config::ConfigError;
use crate::coro::Cx;
use crate::handler::{Handler, Outcome, Request};

/// Bytes of one item's value.
pub const VALUE_LEN: usize = 64;
type Chunk = Box<[u8; VALUE_LEN]>;

/// The slab: free chunks.
#[derive(Debug, Default)]
pub struct Slab {
    free: Vec<Chunk>,
}

/// Chunk counts, for leak checks: allocated = free + retired + linked + held by running requests.
#[derive(Debug, Default)]
pub struct ChunkCounts {
    pub allocated: AtomicU64,
    pub free: AtomicU64,
    pub linked: AtomicU64,
    /// Chunks dropped SETs returned under the slab lock.
    pub cleanups: AtomicU64,
}

#[derive(Debug)]
pub struct KvStore {
    slab_id: u32,
    item_first: u32,
    slab: AsqmMutex<Slab>,
    /// Chunks of replaced items, returned to the slab at its next allocation (one slab lock per
    /// SET, as the scenario's program has it).
    retired: parking_lot::Mutex<Vec<Chunk>>,
    pub counts: ChunkCounts,
    buckets: Vec<AsqmMutex<Option<Chunk>>>,
    /// Per request type: it is a SET.
    is_set: Vec<bool>,
    drop_cost_ns: Nanos,
    cleanup_ns: Nanos,
}

impl KvStore {
    /// For a scenario with lock families `slab` and `item` and types named `set*` / `get*`
    /// (experiments/protego/memcached-*.toml); the drop and cleanup costs are
    /// `server.lock_control`'s.
    pub fn new(sc: &Scenario) -> Result<Self, ConfigError> {
        let mut first = 0u32;
        let (mut slab, mut item) = (None, None);
        for l in &sc.workload.locks {
            match l.name.as_str() {
                "slab" if l.count == 1 => slab = Some(first),
                "item" => item = Some((first, l.count)),
                _ => {}
            }
            first += l.count;
        }
        let (Some(slab_id), Some((item_first, items))) = (slab, item) else {
            return Err(ConfigError(
                "workload.locks: the key-value handler needs a lock `slab` (count 1) and a family `item`".into(),
            ));
        };
        if !sc.workload.condvars.is_empty() {
            return Err(ConfigError(
                "workload.condvars: the key-value handler runs Memcached's lock steps only; remove the condvars or use runtime.handler = \"program\"".into(),
            ));
        }
        let is_set: Vec<bool> = sc.workload.types.iter().map(|t| t.name.starts_with("set")).collect();
        let rule = sc.server.lock_control.as_ref().map(Config::build);
        Ok(Self {
            slab_id,
            item_first,
            slab: AsqmMutex::new(slab_id, Slab::default()),
            retired: parking_lot::Mutex::new(Vec::new()),
            counts: ChunkCounts::default(),
            buckets: (0..items).map(|i| AsqmMutex::new(item_first + i, None)).collect(),
            is_set,
            drop_cost_ns: rule.map_or(0, |r| r.drop_cost_ns),
            cleanup_ns: rule.map_or(0, |r| r.cleanup_ns),
        })
    }

    /// Chunks of replaced items not yet back in the free list.
    pub fn retired(&self) -> u64 {
        self.retired.lock().len() as u64
    }

    fn drop_request(&self, cx: &mut Cx, chunk: Option<Chunk>) -> Outcome {
        spin_for(self.drop_cost_ns);
        cx.reply_dropped();
        if let Some(c) = chunk {
            // The chunk must go back whatever the delays: a plain lock.
            self.slab.with(cx, |s| {
                s.free.push(c);
                self.counts.free.fetch_add(1, Ordering::Relaxed);
                self.counts.cleanups.fetch_add(1, Ordering::Relaxed);
                spin_for(self.cleanup_ns);
            });
        }
        Outcome::Dropped
    }
}

impl Handler for KvStore {
    fn handle(&self, req: &Request, cx: &mut Cx) -> Outcome {
        let set = self.is_set.get(req.rtype as usize).copied().unwrap_or(false);
        let mut chunk: Option<Chunk> = None;
        let mut ops = req.program.iter().peekable();
        while let Some(&op) = ops.next() {
            let Op::Acquire(id) = op else {
                if let Op::Compute(ns) = op {
                    spin_for(ns);
                }
                continue;
            };
            // The step's hold time, then its release.
            let mut hold = 0;
            while let Some(&&next) = ops.peek() {
                ops.next();
                match next {
                    Op::Compute(ns) => hold += ns,
                    Op::Release(r) if r == id => break,
                    _ => {}
                }
            }
            if id == self.slab_id {
                // SET: allocate the item's chunk.
                let got = self.slab.with_if_uncongested(cx, |s| {
                    spin_for(hold);
                    if s.free.is_empty() {
                        let mut r = self.retired.lock();
                        self.counts.free.fetch_add(r.len() as u64, Ordering::Relaxed);
                        s.free.append(&mut r);
                    }
                    match s.free.pop() {
                        Some(c) => {
                            self.counts.free.fetch_sub(1, Ordering::Relaxed);
                            c
                        }
                        None => {
                            self.counts.allocated.fetch_add(1, Ordering::Relaxed);
                            Box::new([0u8; VALUE_LEN])
                        }
                    }
                });
                match got {
                    Some(c) => chunk = Some(c),
                    None => return self.drop_request(cx, chunk.take()),
                }
            } else if let Some(bucket) = id.checked_sub(self.item_first).and_then(|i| self.buckets.get(i as usize)) {
                let new = if set { chunk.take().map(|mut c| {
                    c[..8].copy_from_slice(&req.req_id.to_le_bytes());
                    c
                }) } else { None };
                let mut new = new;
                let done = bucket.with_if_uncongested(cx, |item| {
                    spin_for(hold);
                    match new.take() {
                        // Link the new item; the one it replaces goes back to the slab below.
                        Some(c) => {
                            let old = item.replace(c);
                            if old.is_none() {
                                self.counts.linked.fetch_add(1, Ordering::Relaxed);
                            }
                            old
                        }
                        // GET: read the value.
                        None => {
                            std::hint::black_box(item.as_ref().map(|c| c[0]));
                            None
                        }
                    }
                });
                match done {
                    Some(Some(old)) => self.retired.lock().push(old),
                    Some(None) => {}
                    None => return self.drop_request(cx, new),
                }
            } else {
                // Another lock of the scenario: take it as the program says.
                if !cx.lock_if_uncongested(id) {
                    return self.drop_request(cx, chunk.take());
                }
                spin_for(hold);
                cx.unlock(id);
            }
        }
        if let Some(c) = chunk {
            // A SET whose program had no item step: nothing to link.
            self.retired.lock().push(c);
        }
        Outcome::Ok
    }
}
