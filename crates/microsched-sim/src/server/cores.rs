//! Core states and the exact accounting of core time. Every mode change goes through here, so
//! that a core's own times, the server-wide ledger and the allocator's tick snapshots cannot
//! drift apart.

use std::collections::VecDeque;

use microsched_core::alloc::CoreState;
use microsched_core::Nanos;

use super::NONE;

/// What a core is doing. Busy and Search make up the LC allocation; the best-effort co-tenant
/// gets Parked time; Waking is the allocation delay and Overhead the preemption mechanism's
/// receive and return costs, counted apart so that the five add up to cores × time exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoreMode {
    Busy,
    Search,
    Parked,
    Waking,
    Overhead,
}

/// What a core does when its overhead stretch ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum AfterOverhead {
    /// Put the preempted request back on a runqueue, then look for work.
    Requeue,
    /// Go on running the resumed request.
    Resume,
}

#[derive(Debug, Clone)]
pub struct Core {
    pub(super) id: u16,
    pub mode: CoreMode,
    since: Nanos,
    pub queue: VecDeque<u32>,
    pub enqueued_total: u64,
    pub dequeued_total: u64,
    times: [Nanos; 5],
    /// Request being run (or spinning for a lock, or being switched away from), or NONE.
    pub current: u32,
    /// Bumped whenever the core leaves the idle-spinning state, to invalidate its park timer.
    pub epoch: u32,
    /// Bumped whenever a pending slice end or overhead end is superseded (cancelled), so that
    /// a stale event never acts on the wrong request.
    pub(super) gen: u32,
    /// Start and length of the running compute slice.
    pub(super) slice_start: Nanos,
    pub(super) slice_len: Nanos,
    /// Run time left before the quantum expires (the request's, on this core).
    pub(super) budget: Nanos,
    /// The running request's quantum (a policy may give each request its own).
    pub(super) quantum: Nanos,
    /// Lazy expiries (conditional preemption, nothing queued here): the running slice goes to
    /// the request's end and its quantum expiries, every quantum + propagation from this first
    /// one, are only counted, until work queues here (`Nanos::MAX`: not lazy).
    pub(super) lazy_from: Nanos,
    pub(super) after_overhead: AfterOverhead,
    /// A proactive policy asked this core to park at its next idle point.
    pub yield_requested: bool,
    /// Mid-steal: what it took is in its queue but already claimed, so no one steals it back.
    pub(super) stealing: bool,
    /// Asked to park and told to keep polling (CoreSync): finding work must be reported.
    pub(super) park_attempting: bool,
    /// Extra run time of the next request started here (cache refill after the Secondary ran
    /// on the core); 0 almost always.
    pub(super) refill: Nanos,
    /// Shared with the Secondary (`mechanism.timeshare`): it was taken by Primary work waiting
    /// on a lent core, and is not lent again yet.
    pub(super) shared: bool,
    pub(super) turns: super::timeshare::Turns,
    /// An `idle_first` interference handler occupies the core until then (0: none).
    pub(super) handler_until: Nanos,
    /// What the allocator saw of this core at its last tick, saved before the first change
    /// after it (valid when `at_tick.tick` is the ledger's): an unchanged core is read from its
    /// current fields instead, so a tick need not copy every core.
    pub(super) at_tick: AtTick,
}

#[derive(Debug, Clone, Copy)]
pub(super) struct AtTick {
    pub(super) tick: u32,
    pub(super) mode: CoreMode,
    pub(super) enqueued_total: u64,
    pub(super) busy: Nanos,
    pub(super) search: Nanos,
}

impl Core {
    pub(super) fn new(id: u16, mode: CoreMode) -> Self {
        Self {
            id,
            mode,
            since: 0,
            queue: VecDeque::new(),
            enqueued_total: 0,
            dequeued_total: 0,
            times: [0; 5],
            current: NONE,
            epoch: 0,
            gen: 0,
            slice_start: 0,
            slice_len: 0,
            budget: Nanos::MAX,
            quantum: Nanos::MAX,
            lazy_from: Nanos::MAX,
            after_overhead: AfterOverhead::Resume,
            yield_requested: false,
            stealing: false,
            park_attempting: false,
            refill: 0,
            shared: false,
            turns: super::timeshare::Turns::default(),
            handler_until: 0,
            at_tick: AtTick { tick: 0, mode, enqueued_total: 0, busy: 0, search: 0 },
        }
    }

    #[inline(always)]
    pub(super) fn set_mode(&mut self, mode: CoreMode, now: Nanos, l: &mut Ledger) {
        self.save_tick(l);
        let (old, ran) = (self.mode as usize, now - self.since);
        self.times[old] += ran;
        l.closed[old] += ran;
        l.in_mode[old] -= 1;
        l.since_sum[old] -= self.since;
        l.in_mode[mode as usize] += 1;
        l.since_sum[mode as usize] += now;
        if (self.mode == CoreMode::Parked) != (mode == CoreMode::Parked) {
            l.parked[self.id as usize / 64] ^= 1 << (self.id % 64);
        }
        self.mode = mode;
        self.since = now;
    }

    /// Called before any change the allocator observes.
    #[inline]
    pub(super) fn save_tick(&mut self, l: &Ledger) {
        if self.at_tick.tick != l.tick {
            self.at_tick = self.seen_at_tick(l);
        }
    }

    /// This core as it was at the ledger's last tick, from fields unchanged since.
    pub(super) fn seen_at_tick(&self, l: &Ledger) -> AtTick {
        let t = self.times_at(l.tick_at);
        let (busy, search) = busy_search(&t);
        AtTick { tick: l.tick, mode: self.mode, enqueued_total: self.enqueued_total, busy, search }
    }

    /// (busy, search, parked, transition, overhead) up to `now`, the current stretch included.
    pub fn times_at(&self, now: Nanos) -> [Nanos; 5] {
        let mut t = self.times;
        t[self.mode as usize] += now - self.since;
        t
    }

    pub fn is_active(&self) -> bool {
        matches!(self.mode, CoreMode::Busy | CoreMode::Search | CoreMode::Overhead)
    }
}

/// The allocator's (busy, search) from a core's times per mode: overhead is busy time.
pub(super) fn busy_search(t: &[Nanos; 5]) -> (Nanos, Nanos) {
    (t[CoreMode::Busy as usize] + t[CoreMode::Overhead as usize], t[CoreMode::Search as usize])
}

pub(super) fn core_state(mode: CoreMode) -> CoreState {
    match mode {
        CoreMode::Busy | CoreMode::Search | CoreMode::Overhead => CoreState::Active,
        CoreMode::Parked => CoreState::Parked,
        CoreMode::Waking => CoreState::Waking,
    }
}

/// Whole-server aggregates of the cores, kept up to date as they change, so that an allocator
/// tick, a grant and the core-time totals cost O(1) (or O(cores with queued work)), not a pass
/// over every core: at a thousand cores those passes dominated the run.
#[derive(Debug, Clone)]
pub(super) struct Ledger {
    /// Per mode: Σ over cores of their finished stretches in it; the cores in it now; Σ of
    /// their `since`. The mode's total time up to `now` is `closed + in_mode · now − since_sum`.
    closed: [Nanos; 5],
    pub(super) in_mode: [u64; 5],
    since_sum: [Nanos; 5],
    /// Parked cores, one bit each: a grant takes the lowest.
    parked: Vec<u64>,
    /// Allocator ticks so far, and the time of the last.
    pub(super) tick: u32,
    pub(super) tick_at: Nanos,
}

impl Ledger {
    pub(super) fn new(cores: &[Core]) -> Self {
        let mut l = Self {
            closed: [0; 5],
            in_mode: [0; 5],
            since_sum: [0; 5],
            parked: vec![0; cores.len().div_ceil(64)],
            tick: 0,
            tick_at: 0,
        };
        for c in cores {
            l.in_mode[c.mode as usize] += 1;
            l.since_sum[c.mode as usize] += c.since;
            if c.mode == CoreMode::Parked {
                l.parked[c.id as usize / 64] |= 1 << (c.id % 64);
            }
        }
        l
    }

    pub(super) fn times_at(&self, now: Nanos) -> [Nanos; 5] {
        std::array::from_fn(|m| self.closed[m] + self.in_mode[m] * now - self.since_sum[m])
    }

    pub(super) fn lowest_parked(&self) -> Option<u16> {
        let (w, bits) = self.parked.iter().enumerate().find(|(_, b)| **b != 0)?;
        Some((w * 64) as u16 + bits.trailing_zeros() as u16)
    }
}

/// An index set with O(1) insert, remove and membership, iterated in insertion order until a
/// removal swaps the last element in.
#[derive(Debug, Clone)]
pub(super) struct CoreSet {
    pub(super) items: Vec<u16>,
    pub(super) pos: Vec<u32>,
}

impl CoreSet {
    pub(super) fn new(n: usize) -> Self {
        Self { items: Vec::with_capacity(n), pos: vec![NONE; n] }
    }
    #[inline(always)]
    pub(super) fn insert(&mut self, c: u16) {
        if self.pos[c as usize] == NONE {
            self.pos[c as usize] = self.items.len() as u32;
            self.items.push(c);
        }
    }
    #[inline(always)]
    pub(super) fn remove(&mut self, c: u16) -> bool {
        let p = self.pos[c as usize];
        if p == NONE {
            return false;
        }
        self.items.swap_remove(p as usize);
        if let Some(&moved) = self.items.get(p as usize) {
            self.pos[moved as usize] = p;
        }
        self.pos[c as usize] = NONE;
        true
    }
    #[inline]
    pub(super) fn contains(&self, c: u16) -> bool {
        self.pos[c as usize] != NONE
    }
    #[inline(always)]
    pub(super) fn pop(&mut self) -> Option<u16> {
        let c = self.items.pop()?;
        self.pos[c as usize] = NONE;
        Some(c)
    }
    pub(super) fn len(&self) -> usize {
        self.items.len()
    }
}
