//! The probe-cost work search ([`microsched_core::sched::search`], `server.search.kind =
//! "probe"`) carried out on the server's cores: each idle core sweeps the other queues probe by
//! probe, sweep after sweep. Sweeps are back to back and their orders are a function of (core,
//! search, sweep number), so where a core is at any time is arithmetic and a probe of an empty
//! queue changes nothing: only the probes that can find work are events. For each queue holding
//! stealable work, the earliest probe of it by a searching core (re-evaluated when that probe
//! comes too late to matter, when a core starts searching, and after a steal leaves work
//! behind); for each searching core whose own queue got work, its next own-queue check (every
//! `own_check` within a sweep and at each sweep's start); and, under the study's park rule, the
//! sweep ends from the poll period on. A core idle for a second costs no event for its sweeps.
//! Nothing here runs with the instant search.

use microsched_core::sched::search::WorkSearch;
use microsched_core::sched::Place;
use microsched_core::Nanos;

use super::walks::{SweepWalk, WalkGeometry, Walks, ON_AT};
use super::{CoreMode, CoreSet, Idle, Server, NONE};
use crate::events::{Event, EventQueue};
use crate::requests::Slab;

#[derive(Debug, Clone, Copy)]
struct CoreSearch {
    /// Bumped at every search start: events of an older search are stale.
    search: u32,
    /// Start of the current fruitless search (its first sweep).
    search_start: Nanos,
    /// The own-queue check scheduled in this search (`Nanos::MAX`: none).
    own_at: Nanos,
    /// The sweep `next_probe` last looked at (its number, start, and probe times), and the one
    /// after it: most lookups fall in a sweep already seen, so the division and the hashes that
    /// place a sweep are paid once per sweep, not once per lookup.
    sweep: u64,
    sweep_start: Nanos,
    times: [SweepTimes; 2],
}

/// A sweep's probe times as three instants, from which the probe of any cycle place is an
/// addition and two conditional subtractions: the scan asks every searching core at every
/// stealable arrival (most of the probe search's cost), so the walk's arithmetic (place to
/// step to position to time) is folded in once per sweep instead.
#[derive(Debug, Clone, Copy, Default)]
struct SweepTimes {
    /// The probe of cycle place 0 were the walk not to wrap nor skip: start + (shift + 1)·probe.
    base: Nanos,
    /// Where the walk wraps past the cycle's end: start + probe + n·probe.
    wrap: Nanos,
    /// The core's own queue's step as a time (start + (own_step + 1)·probe): places after it
    /// come a probe earlier.
    own: Nanos,
}

impl SweepTimes {
    /// The times of a sweep starting at `start` that walks `walk` (`ring`: n·probe).
    fn new(walk: SweepWalk, start: Nanos, probe: Nanos, ring: Nanos) -> Self {
        SweepTimes {
            base: start + (walk.shift as Nanos + 1) * probe,
            wrap: start + probe + ring,
            own: start + (walk.own_step as Nanos + 1) * probe,
        }
    }

    /// `start + SweepWalk::position(place)·probe` for `at` = place·probe: with i = place +
    /// shift, the step is i − n once i ≥ n (the time reaches `wrap`), and the position is the
    /// step + 1, less one past the own queue's step.
    #[inline(always)]
    fn probe(self, at: Nanos, probe: Nanos, ring: Nanos) -> Nanos {
        let t = self.base + at;
        // Both conditions are coin flips per walk: selected, not branched on.
        let t = t - std::hint::select_unpredictable(t >= self.wrap, ring, 0);
        t - std::hint::select_unpredictable(t > self.own, probe, 0)
    }

    /// The first probe at or after `now` of the place at `at` by a core whose sweep `times[0]`
    /// holds `now` (`times[1]`: the next sweep): in this sweep if not yet past, else in the next.
    #[inline(always)]
    fn first(times: &[SweepTimes; 2], at: Nanos, now: Nanos, probe: Nanos, ring: Nanos) -> Nanos {
        let this = times[0].probe(at, probe, ring);
        let next = times[1].probe(at, probe, ring);
        // Whether the probe is still ahead in this sweep is a coin flip per searching core.
        std::hint::select_unpredictable(this >= now, this, next)
    }
}

/// A search's sweep before its first placement: past any time, so the first lookup places it.
const UNPLACED: Nanos = Nanos::MAX / 2;

pub struct ProbeState {
    search: Box<dyn WorkSearch>,
    probe: Nanos,
    own_check: Nanos,
    sweep_len: Nanos,
    /// A walk round the whole cycle: n·probe (orders with one cycle).
    ring: Nanos,
    cores: Vec<CoreSearch>,
    /// Until when every searching core's cached sweep holds the time (at most the earliest of
    /// their ends; 0 after a search start, whose sweep is not placed yet): the scan skips
    /// checking each core's sweep before it, most scans fall between two sweep ends.
    placed_until: Nanos,
    /// Per core: its search's `WorkSearch::search_key`, from which each sweep's origin follows,
    /// computed at the search's first sweep placement (many searches end before any). Apart from
    /// `cores`, whose entries the scan reads (a larger entry made the scan dearer).
    keys: Vec<u64>,
    /// Per queue: the earliest probe of it scheduled so far (`Nanos::MAX`: none).
    hit_at: Vec<Nanos>,
    /// Under an order with one cycle: each queue's place in it (else empty), so that a probe's
    /// position is arithmetic on the cached sweep walk instead of a call into the search.
    cycle: Vec<u32>,
    /// The searching cores ordered by where their walks are (orders with one cycle); None:
    /// `schedule_probe` asks every searching core. Boxed: it is taken out and put back around
    /// each use (the geometry borrows the rest of the state), which must not copy it.
    walks: Option<Box<Walks>>,
}

/// What the walk index reads of the search state and the searching-core set.
struct Geometry<'a> {
    p: &'a mut ProbeState,
    spinners: &'a CoreSet,
}

impl WalkGeometry for Geometry<'_> {
    fn live(&self, c: u16, search: u32) -> bool {
        self.spinners.contains(c) && self.p.cores[c as usize].search == search
    }
    fn sweep_at(&self, c: u16, now: Nanos) -> (u64, Nanos) {
        self.p.sweep_at(c, now)
    }
    fn search(&self, c: u16) -> u32 {
        self.p.cores[c as usize].search
    }
    fn origin(&self, c: u16, search: u32, sweep: u64) -> u32 {
        self.p.search.origin_of(c, search, sweep)
    }
    fn next_probe(&mut self, c: u16, v: u16, now: Nanos) -> Nanos {
        // The index asks about each core about once per sweep: the sweep cache would miss.
        self.p.next_probe_uncached(c, v, now)
    }
    fn order(&self, c: u16) -> u32 {
        self.spinners.pos[c as usize]
    }
    fn cycle_place(&self, c: u16) -> u32 {
        self.p.cycle[c as usize]
    }
}

impl ProbeState {
    fn new(search: Box<dyn WorkSearch>, n: usize) -> Self {
        let (probe, own_check) = (search.probe_ns(), search.own_check_ns());
        let sweep_len = probe * search.probes_per_sweep() as Nanos;
        // `sweep_start` past any time: the first lookup places the sweep.
        let idle = CoreSearch { search: 0, search_start: 0, own_at: Nanos::MAX, sweep: 0, sweep_start: UNPLACED, times: [SweepTimes::default(); 2] };
        let walks = search.cycle_place(0).map(|_| Box::new(Walks::new(n, probe)));
        let cycle = match search.cycle_place(0) {
            Some(_) => (0..n as u16).map(|q| search.cycle_place(q).expect("a cycle order places every queue")).collect(),
            None => Vec::new(),
        };
        let ring = probe * cycle.len() as Nanos;
        Self { search, probe, own_check, sweep_len, ring, cores: vec![idle; n], placed_until: 0, keys: vec![0; n], hit_at: vec![Nanos::MAX; n], cycle, walks }
    }

    /// The sweep `core` is in at `now` (0-based within its search) and that sweep's start.
    fn sweep_at(&self, core: u16, now: Nanos) -> (u64, Nanos) {
        let start = self.cores[core as usize].search_start;
        let k = (now - start) / self.sweep_len;
        (k, start + k * self.sweep_len)
    }

    /// The first probe of queue `v` by searching core `c` at or after `now`: in its current
    /// sweep if not yet past, else in the next one (every sweep probes every other queue).
    #[inline(always)]
    fn next_probe(&mut self, c: u16, v: u16, now: Nanos) -> Nanos {
        if self.cycle.is_empty() {
            return self.next_probe_uncached(c, v, now);
        }
        self.next_probe_in_cycle(c, self.cycle[v as usize], now)
    }

    /// `next_probe` under an order with one cycle, of the queue at cycle place `place`.
    #[inline(always)]
    fn next_probe_in_cycle(&mut self, c: u16, place: u32, now: Nanos) -> Nanos {
        self.seek_sweep(c, now);
        SweepTimes::first(&self.cores[c as usize].times, place as Nanos * self.probe, now, self.probe, self.ring)
    }

    /// The earliest probe of queue `v` by any of `searching` but `v`'s own core (at `v_at` in
    /// it, if searching; ties: the first in that order), asking each: `(Nanos::MAX, NONE)` if
    /// none.
    fn scan_first_probe(&mut self, searching: &[u16], v_at: Option<usize>, v: u16, now: Nanos) -> (Nanos, u16) {
        let mut best = (Nanos::MAX, NONE as u16);
        let Some(&place) = self.cycle.get(v as usize) else {
            for &c in searching {
                let t = if c == v { Nanos::MAX } else { self.next_probe_uncached(c, v, now) };
                if t < best.0 {
                    best = (t, c);
                }
            }
            return best;
        };
        // Sweeps placed first, in a loop of their own: the minimum's loop then makes no call,
        // and keeps the geometry and the best so far in registers.
        if now >= self.placed_until {
            let mut until = Nanos::MAX;
            for &c in searching {
                self.seek_sweep(c, now);
                until = until.min(self.cores[c as usize].sweep_start + self.sweep_len);
            }
            self.placed_until = until;
        }
        let (probe, ring, cores) = (self.probe, self.ring, &self.cores);
        let at = place as Nanos * probe;
        // The cores before `v`'s own and those after it: no test of each against `v`.
        let (before, after) = match v_at {
            Some(i) => (&searching[..i], &searching[i + 1..]),
            None => (searching, &searching[..0]),
        };
        for part in [before, after] {
            for &c in part {
                let t = SweepTimes::first(&cores[c as usize].times, at, now, probe, ring);
                if t < best.0 {
                    best = (t, c);
                }
            }
        }
        best
    }

    /// `next_probe` without the sweep cache: for orders without a cycle, and for callers that
    /// look at a core about once per sweep.
    fn next_probe_uncached(&mut self, c: u16, v: u16, now: Nanos) -> Nanos {
        let (k, start) = self.sweep_at(c, now);
        let search = self.cores[c as usize].search;
        let t = start + self.search.position(c, search, k, v) as Nanos * self.probe;
        if t >= now {
            return t;
        }
        start + self.sweep_len + self.search.position(c, search, k + 1, v) as Nanos * self.probe
    }

    /// Moves core `c`'s cached sweep to the one holding `now` (cycle order only).
    #[inline(always)]
    fn seek_sweep(&mut self, c: u16, now: Nanos) {
        let cs = &self.cores[c as usize];
        if now.wrapping_sub(cs.sweep_start) >= self.sweep_len {
            self.place_sweep(c, now);
        }
    }

    #[cold]
    #[inline(never)]
    fn place_sweep(&mut self, c: u16, now: Nanos) {
        let (k, start) = self.sweep_at(c, now);
        if self.cores[c as usize].sweep_start == UNPLACED {
            self.keys[c as usize] = self.search.search_key(c, self.cores[c as usize].search);
        }
        let cs = &self.cores[c as usize];
        let this = if k == cs.sweep + 1 && start == cs.sweep_start + self.sweep_len {
            cs.times[1]
        } else {
            self.sweep_times(c, k, start)
        };
        let next = self.sweep_times(c, k + 1, start + self.sweep_len);
        let cs = &mut self.cores[c as usize];
        (cs.sweep, cs.sweep_start, cs.times) = (k, start, [this, next]);
    }

    /// The probe times of sweep `sweep` (starting at `start`) of `c`'s current search.
    fn sweep_times(&self, c: u16, sweep: u64, start: Nanos) -> SweepTimes {
        let walk = SweepWalk::new(self.search.origin(self.keys[c as usize], sweep), self.cycle[c as usize], self.cycle.len() as u32);
        SweepTimes::new(walk, start, self.probe, self.ring)
    }

    /// The next own-queue check of searching core `c` at or after `now`: every `own_check`
    /// within a sweep, and at each sweep's start.
    fn next_own_check(&self, c: u16, now: Nanos) -> Nanos {
        let (_, start) = self.sweep_at(c, now);
        let t = start + (now - start).div_ceil(self.own_check) * self.own_check;
        t.min(start + self.sweep_len)
    }
}

impl Server {
    /// Switches the server to a probe-by-probe search (before the run starts).
    pub fn set_search(&mut self, search: Box<dyn WorkSearch>) {
        self.probe = Some(Box::new(ProbeState::new(search, self.q.cores.len())));
    }

    /// Whether a fruitless search parks only at a sweep's end (the study's rule).
    pub fn parks_after_sweep(&self) -> bool {
        self.probe.as_ref().is_some_and(|p| p.search.parks_after_sweep())
    }

    /// When `core`'s current fruitless search began.
    pub fn search_started_at(&self, core: u16) -> Nanos {
        self.probe.as_ref().map_or(0, |p| p.cores[core as usize].search_start)
    }

    /// The study's park rule: schedules the end of `core`'s first sweep that ends at or after
    /// `not_before` (the core must be searching).
    pub fn schedule_sweep_end(&self, core: u16, not_before: Nanos, evq: &mut EventQueue) {
        let p = self.probe.as_ref().expect("sweep ends need the probe search");
        let cs = &p.cores[core as usize];
        let k = not_before.saturating_sub(cs.search_start).div_ceil(p.sweep_len).max(1);
        evq.push(cs.search_start + k * p.sweep_len, Event::SweepEnd { node: self.node, core, search: cs.search });
    }

    /// The cores idle at the start of the run begin searching; returns them.
    pub fn begin_searches(&mut self, now: Nanos, evq: &mut EventQueue) -> Vec<u16> {
        if self.probe.is_none() {
            return Vec::new();
        }
        let idle = self.q.spinners.items.clone();
        for &c in &idle {
            self.begin_search(c, now, evq);
        }
        idle
    }

    fn begin_search(&mut self, core: u16, now: Nanos, evq: &mut EventQueue) {
        let p = self.probe.as_mut().expect("probe search");
        let cs = &mut p.cores[core as usize];
        cs.search = cs.search.wrapping_add(1);
        cs.search_start = now;
        cs.own_at = Nanos::MAX;
        cs.sweep_start = UNPLACED;
        let search = cs.search;
        p.placed_until = 0;
        if p.walks.as_ref().is_some_and(|w| w.is_on()) {
            let mut walks = p.walks.take().expect("checked");
            walks.begin(core, search, now, &Geometry { p, spinners: &self.q.spinners });
            p.walks = Some(walks);
        }
        // Queues already holding stealable work: this core's probe of each, if it comes first.
        // Each has the earliest probe by the other searchers pending, if there are any (see
        // `queue_probed`), so only this core can bring it forward.
        for &v in &self.q.victims.items {
            if v == core {
                continue;
            }
            let t = p.next_probe(core, v, now);
            let h = &mut p.hit_at[v as usize];
            if t < *h || *h < now {
                *h = t;
                evq.push(t, Event::Probe { node: self.node, core, victim: v, search });
            }
        }
    }

    /// `find_work` under the probe search: the own queue first (free), else a new search.
    pub(super) fn find_work_probed(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Idle {
        while let Some(r) = self.q.pop(Place::Core(core)) {
            if self.start(core, r, now, slab, evq) {
                return Idle::Working;
            }
        }
        let c = &mut self.q.cores[core as usize];
        if c.mode != CoreMode::Search {
            c.set_mode(CoreMode::Search, now, &mut self.q.ledger);
        }
        self.q.spinners.insert(core);
        self.begin_search(core, now, evq);
        Idle::Spinning
    }

    /// `make_runnable` at a core's queue under the probe search: nobody takes it at once.
    pub(super) fn queue_probed(&mut self, req: u32, core: u16, now: Nanos, evq: &mut EventQueue) {
        let was_victim = self.q.victims.contains(core);
        self.q.push(Place::Core(core), req);
        if self.q.cores[core as usize].lazy_from != Nanos::MAX {
            self.arm_expiry(core, now, evq);
        }
        if self.q.spinners.contains(core) {
            let p = self.probe.as_mut().expect("probe search");
            let t = p.next_own_check(core, now);
            let cs = &mut p.cores[core as usize];
            if !(cs.own_at >= now && cs.own_at <= t) {
                cs.own_at = t;
                evq.push(t, Event::Probe { node: self.node, core, victim: core, search: cs.search });
            }
        }
        // A queue that stayed stealable keeps its pending earliest probe (new searchers were
        // weighed at their start): only a queue that just became stealable, or whose probe
        // fired, needs the search over every searching core.
        let pending = self.probe.as_ref().expect("probe search").hit_at[core as usize];
        if self.q.victims.contains(core) && !(was_victim && pending != Nanos::MAX && pending >= now) {
            self.schedule_probe(core, now, evq);
        }
    }

    /// Schedules the earliest probe of queue `v` by a searching core, unless one at least as
    /// early is scheduled already.
    pub(super) fn schedule_probe(&mut self, v: u16, now: Nanos, evq: &mut EventQueue) {
        let p = self.probe.as_mut().expect("probe search");
        let mut best = (Nanos::MAX, NONE as u16);
        let consult = p.walks.as_ref().is_some_and(|w| w.is_on() || self.q.spinners.len() >= ON_AT);
        let mut walks = if consult { p.walks.take() } else { None };
        if let Some(w) = walks.as_mut() {
            w.follow(&self.q.spinners.items, now, &Geometry { p, spinners: &self.q.spinners });
        }
        if let Some(w) = walks.as_mut().filter(|w| w.is_on()) {
            let place = p.search.cycle_place(v).expect("walks exist only for orders with a cycle");
            if let Some(b) = w.first_probe(v, place, now, &mut Geometry { p, spinners: &self.q.spinners }) {
                best = b;
            }
        } else {
            let v_at = self.q.spinners.contains(v).then(|| self.q.spinners.pos[v as usize] as usize);
            best = p.scan_first_probe(&self.q.spinners.items, v_at, v, now);
        }
        if consult {
            p.walks = walks;
        }
        let h = &mut p.hit_at[v as usize];
        if best.0 != Nanos::MAX && (best.0 < *h || *h < now) {
            *h = best.0;
            let core = best.1;
            evq.push(best.0, Event::Probe { node: self.node, core, victim: v, search: p.cores[core as usize].search });
        }
    }

    /// A scheduled probe: `core` looks at `victim`'s queue (its own: an own-queue check). Some
    /// if the core found work (what it did next).
    pub fn probe_event(&mut self, core: u16, victim: u16, search: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Option<Idle> {
        let p = self.probe.as_mut().expect("probe events need the probe search");
        let live = self.q.spinners.contains(core) && p.cores[core as usize].search == search;
        if victim == core {
            if live {
                p.cores[core as usize].own_at = Nanos::MAX;
                return self.take_own_work(core, now, slab, evq);
            }
            return None;
        }
        if p.hit_at[victim as usize] == now {
            p.hit_at[victim as usize] = Nanos::MAX;
        }
        if !self.q.victims.contains(victim) {
            return None;
        }
        if live {
            // Its own queue's work (not yet noticed) comes first, as after a steal into it.
            if let Some(idle) = self.take_own_work(core, now, slab, evq) {
                self.schedule_probe(victim, now, evq);
                return Some(idle);
            }
            self.q.spinners.remove(core);
            self.steal_from(core, victim, now, slab, evq);
            // What the thief left (a steal takes half) waits for the next searcher's probe.
            if self.q.victims.contains(victim) {
                self.schedule_probe(victim, now, evq);
            }
            return Some(Idle::Working);
        }
        self.schedule_probe(victim, now, evq);
        None
    }

    /// A scheduled sweep end of `core` (the study's park rule): the next sweep begins with an
    /// own-queue check. Some: the core found work there (what it did next) or is still
    /// searching (`Idle::Spinning`: the driver may park it); None if the event is stale.
    pub fn sweep_end(&mut self, core: u16, search: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Option<Idle> {
        let p = self.probe.as_ref().expect("sweep events need the probe search");
        if !self.q.spinners.contains(core) || p.cores[core as usize].search != search {
            return None;
        }
        self.take_own_work(core, now, slab, evq).or(Some(Idle::Spinning))
    }

    /// Whether `core` is still in its search number `search`.
    pub fn still_searching(&self, core: u16, search: u32) -> bool {
        self.q.spinners.contains(core) && self.probe.as_ref().is_some_and(|p| p.cores[core as usize].search == search)
    }

    /// A searching core whose own queue holds work leaves the search and runs it (None if the
    /// queue is empty or the search is instant).
    pub fn take_own_work(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Option<Idle> {
        if self.probe.is_none() || self.q.cores[core as usize].queue.is_empty() || !self.q.spinners.contains(core) {
            return None;
        }
        self.q.spinners.remove(core);
        Some(self.find_work(core, now, slab, evq))
    }

    /// Work put back on `core`'s queue (after a steal, a yield or a preemption) can be stolen.
    pub(super) fn stealable_again(&mut self, core: u16, now: Nanos, evq: &mut EventQueue) {
        if self.probe.is_some() && self.q.victims.contains(core) {
            self.schedule_probe(core, now, evq);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use microsched_core::rng::{hash, stream};
    use microsched_core::sched::search::{ProbeCfg, ProbeSearch};

    use crate::server::walks::tests::time_step;

    /// The cached walks' arithmetic (what the scan computes) against the search's own
    /// `position` for every searching core and queue, while cores start searches and time runs
    /// on by fractions of a probe to several sweeps; and the scan's answer against the minimum
    /// of those, ties to the first in the searching order.
    #[test]
    fn the_scan_agrees_with_the_searchs_own_positions() {
        for (n, seed) in [(2usize, 1u64), (3, 2), (17, 3), (32, 4)] {
            let search = ProbeSearch::new(&ProbeCfg::default(), n, stream(seed, "search"));
            let mut p = ProbeState::new(Box::new(search), n);
            assert!(!p.cycle.is_empty(), "the default order has one cycle");
            let (probe, sweep_len) = (p.probe, p.sweep_len);
            let mut searching: Vec<u16> = Vec::new();
            let mut now: Nanos = 1_000;
            let (mut lookups, mut ties) = (0usize, 0usize);
            for step in 0..3_000u64 {
                let r = hash(seed << 32 ^ step);
                now += time_step(r, probe, sweep_len);
                let c = ((r >> 20) % n as u64) as u16;
                if r >> 40 & 3 != 0 {
                    // A search starts, often on the probe grid (ties), its sweep not yet placed.
                    let start = if r >> 44 & 1 == 0 { now - now % probe } else { now };
                    let cs = &mut p.cores[c as usize];
                    (cs.search, cs.search_start, cs.sweep_start) = (cs.search + 1, start, UNPLACED);
                    p.placed_until = 0;
                    searching.retain(|&x| x != c);
                    let at = (r >> 48) as usize % (searching.len() + 1);
                    searching.insert(at, c);
                } else {
                    searching.retain(|&x| x != c);
                }
                for v in 0..n as u16 {
                    let mut expected = (Nanos::MAX, NONE as u16);
                    for &c in &searching {
                        let exact = p.next_probe_uncached(c, v, now);
                        assert_eq!(p.next_probe(c, v, now), exact, "n {n} step {step} core {c} queue {v}");
                        lookups += 1;
                        if c != v && exact < expected.0 {
                            expected = (exact, c);
                        } else if c != v && exact == expected.0 {
                            ties += 1;
                        }
                    }
                    let v_at = searching.iter().position(|&c| c == v);
                    assert_eq!(p.scan_first_probe(&searching, v_at, v, now), expected, "n {n} step {step} queue {v}");
                }
            }
            assert!(lookups > 1_000 * n, "n {n}: {lookups} lookups");
            if n >= 17 {
                assert!(ties > 0, "n {n}: some scans had a tie");
            }
        }
    }
}
