//! The searching cores ordered by where their walks are, so that "which searching core probes
//! queue v first" costs O(1) expected instead of asking every searching core (1024 static cores
//! at load 0.1 asked ~900 of them at every arrival: 100× slower than the instant search).
//!
//! Under the `sweep` order every sweep walks one fixed cycle of the n queues from its own
//! origin, one place per probe, all walks at the same pace. So within a sweep a core's walk is
//! a *phase* φ on a ring of circumference W = n·probe: it reaches cycle place j at the times
//! ≡ φ + (j+1)·probe (mod W), one probe earlier once past its own queue. The first core to
//! reach place j after `now` is then the successor of `now − (j+1)·probe` on the ring, unless
//! its sweep ends first (the next sweep has a fresh origin). Hence two calendars of n one-probe
//! slots over the cores (intrusive lists, O(1) insert and removal):
//!
//! * `ring`: each searching core's phase in its current sweep;
//! * `ends`: each one's current sweep end, when its phase changes. Its slots go round in a sweep
//!   (n − 1 probes), not in W: sweeps are back to back, so a core keeps its slot there for its
//!   whole search, and only its phase moves at each sweep.
//!
//! A query refreshes the cores whose sweep ended (each at most once per sweep, to the sweep
//! holding `now`), then asks the exact `next_probe` of the ring's successors in phase order and
//! of the cores whose sweep ends in time to matter, until neither can beat the best found: every
//! core whose exact probe is at or before the best is asked (its phase bound is at most a probe
//! early, its next sweep starts after its end), so the answer, ties broken by the searching-core
//! set's order, is the full scan's.
//!
//! Entries of cores that stopped searching are dropped when met (`live`).
//!
//! Keeping phases costs a refresh per searching core per sweep; with few searching cores the
//! plain scan is cheaper (16-core scenarios ran at 0.5–0.7× with the index always on). So the
//! index is on only while many cores search: built from the searching set when it reaches
//! [`ON_AT`] cores, dropped when it falls to [`OFF_AT`] (hysteresis: a set that hovers does not
//! rebuild it at every arrival). Either way the answer is the scan's.

use microsched_core::Nanos;

const NIL: u16 = u16::MAX;
/// Searching cores from which the index is kept (and below which it is dropped).
pub const ON_AT: usize = 64;
pub const OFF_AT: usize = 32;

/// n calendar slots of one probe each, holding cores in intrusive doubly linked lists, with a
/// bitmap of the occupied ones: few searching cores on many queues (Caladan parks most of them)
/// must not cost a walk over empty slots.
#[derive(Debug, Clone)]
struct Slots {
    head: Vec<u16>,
    next: Vec<u16>,
    prev: Vec<u16>,
    /// The slot a core is in (`u32::MAX`: none).
    slot: Vec<u32>,
    occupied: Vec<u64>,
}

impl Slots {
    fn new(slots: usize, cores: usize) -> Self {
        Self {
            head: vec![NIL; slots],
            next: vec![NIL; cores],
            prev: vec![NIL; cores],
            slot: vec![u32::MAX; cores],
            occupied: vec![0; slots.div_ceil(64)],
        }
    }

    /// How many slots after `s` (0: `s` itself), going round, the next occupied one is.
    fn distance_to_occupied(&self, s: u32) -> Option<u64> {
        let n = self.head.len() as u64;
        let (s64, words) = (s as u64, self.occupied.len() as u64);
        let first = |from: u64| -> Option<u64> {
            let mut w = from / 64;
            let mut bits = self.occupied[w as usize] & (!0u64 << (from % 64));
            loop {
                if bits != 0 {
                    return Some(w * 64 + bits.trailing_zeros() as u64);
                }
                w += 1;
                if w == words {
                    return None;
                }
                bits = self.occupied[w as usize];
            }
        };
        match first(s64) {
            Some(t) => Some(t - s64),
            None => first(0).map(|t| t + n - s64),
        }
    }

    fn insert(&mut self, c: u16, s: u32) {
        self.occupied[s as usize / 64] |= 1 << (s % 64);
        let h = self.head[s as usize];
        self.next[c as usize] = h;
        self.prev[c as usize] = NIL;
        if h != NIL {
            self.prev[h as usize] = c;
        }
        self.head[s as usize] = c;
        self.slot[c as usize] = s;
    }

    fn remove(&mut self, c: u16) {
        let s = self.slot[c as usize];
        if s == u32::MAX {
            return;
        }
        let (p, nx) = (self.prev[c as usize], self.next[c as usize]);
        if p != NIL {
            self.next[p as usize] = nx;
        } else {
            self.head[s as usize] = nx;
            if nx == NIL {
                self.occupied[s as usize / 64] &= !(1 << (s % 64));
            }
        }
        if nx != NIL {
            self.prev[nx as usize] = p;
        }
        self.slot[c as usize] = u32::MAX;
    }

    /// The cores in slot `s` (collected: the caller may move them).
    fn collect(&self, s: u32, out: &mut Vec<u16>) {
        out.clear();
        let mut c = self.head[s as usize];
        while c != NIL {
            out.push(c);
            c = self.next[c as usize];
        }
    }
}

/// Where a sweep of the cycle order starts, as the shift that takes a cycle place to its step
/// from the origin (n − 1 − origin, so that a step is an addition and at most one
/// subtraction of n), and the core's own queue's step (see `ProbeSearch::position`). Unused
/// under the random order.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct SweepWalk {
    pub(super) shift: u32,
    pub(super) own_step: u32,
}

impl SweepWalk {
    /// The walk of a sweep from cycle place `origin` by the core at cycle place `own`.
    pub(super) fn new(origin: u32, own: u32, n: u32) -> Self {
        let walk = SweepWalk { shift: n - 1 - origin, own_step: 0 };
        SweepWalk { own_step: walk.step(own, n), ..walk }
    }

    /// How many places after the origin cycle place `place` is, minus one (mod `n`).
    #[inline(always)]
    pub(super) fn step(self, place: u32, n: u32) -> u32 {
        let i = place + self.shift; // < 2n: no division
        // Which side of the wrap a place falls is a coin flip per walk.
        std::hint::select_unpredictable(i >= n, i.wrapping_sub(n), i)
    }

    /// `ProbeSearch::position` of the queue at cycle place `place` (the walk skips the core's
    /// own queue at no cost).
    #[inline(always)]
    pub(super) fn position(self, place: u32, n: u32) -> u32 {
        let d = self.step(place, n);
        d + 1 - u32::from(self.own_step < d)
    }
}

/// The first probe of cycle place `place` at or after `now` by a core in the sweep starting at
/// `sweep_start` (which holds `now`), walking `walk[0]` in it and `walk[1]` in the next: in this
/// sweep if not yet past, else in the next one.
#[inline(always)]
pub(super) fn probe_in_sweeps(walk: &[SweepWalk; 2], sweep_start: Nanos, place: u32, now: Nanos, n: u32, probe: Nanos, sweep_len: Nanos) -> Nanos {
    let this = sweep_start + walk[0].position(place, n) as Nanos * probe;
    let next = sweep_start + sweep_len + walk[1].position(place, n) as Nanos * probe;
    // Whether the probe is still ahead in this sweep is a coin flip per searching core: both
    // are computed and one selected, rather than a branch mispredicted half the time.
    std::hint::select_unpredictable(this >= now, this, next)
}

/// A core's entry: the search it belongs to, its current sweep (number and end), that sweep's
/// start in probes mod n, from which the next sweep's slots follow without a division (a
/// refresh moves every searching core once per sweep: 1024 cores at load 0.1 do ~9 refreshes
/// per request, and a 64-bit division costs more than the rest of one), and the walks of this
/// sweep and the next, from which a query's exact probe is arithmetic (each sweep's origin is
/// hashed once, at the refresh before it).
#[derive(Debug, Clone, Copy)]
struct Entry {
    search: u32,
    sweep: u64,
    end: Nanos,
    start_probe: u32,
    walk: [SweepWalk; 2],
}

/// The index (see the module docs).
#[derive(Debug, Clone)]
pub struct Walks {
    n: u64,
    probe: Nanos,
    /// Sweep length: n − 1 probes.
    sweep_len: Nanos,
    /// The slots of `ends`: a sweep's probes (n − 1, at least 1).
    sweep_probes: u64,
    ring: Slots,
    ends: Slots,
    entry: Vec<Option<Entry>>,
    /// Sweep ends at or before this were refreshed.
    refreshed_to: Nanos,
    scratch: Vec<u16>,
    /// Whether the index holds every searching core (see the module docs).
    on: bool,
}

/// What the index asks of the driver: a core's search and sweep geometry, and the exact probe.
pub trait WalkGeometry {
    /// Whether core `c` is searching in search number `search`.
    fn live(&self, c: u16, search: u32) -> bool;
    /// The sweep `c` is in at `now` (0-based within its search) and that sweep's start.
    fn sweep_at(&self, c: u16, now: Nanos) -> (u64, Nanos);
    /// `c`'s current search number.
    fn search(&self, c: u16) -> u32;
    /// The origin of sweep `sweep` of `c`'s search `search`.
    fn origin(&self, c: u16, search: u32, sweep: u64) -> u32;
    /// The exact first probe of queue `v` by `c` at or after `now`.
    fn next_probe(&mut self, c: u16, v: u16, now: Nanos) -> Nanos;
    /// `c`'s place in the searching-core set's order (ties go to the smallest).
    fn order(&self, c: u16) -> u32;
    /// The cycle place of `c`'s own queue.
    fn cycle_place(&self, c: u16) -> u32;
}

impl Walks {
    pub fn new(n: usize, probe: Nanos) -> Self {
        let n64 = n as u64;
        Self {
            n: n64,
            probe,
            sweep_len: n64.saturating_sub(1).max(1) * probe,
            sweep_probes: n64.saturating_sub(1).max(1),
            ring: Slots::new(n, n),
            ends: Slots::new(n.saturating_sub(1).max(1), n),
            entry: vec![None; n],
            refreshed_to: 0,
            scratch: Vec::new(),
            on: false,
        }
    }

    /// Whether `first_probe` may be asked (the index holds every searching core).
    pub fn is_on(&self) -> bool {
        self.on
    }

    /// Follows the searching set's size `searching`: builds the index from `cores` (the set) at
    /// [`ON_AT`], drops it at [`OFF_AT`].
    pub fn follow(&mut self, searching: &[u16], now: Nanos, g: &impl WalkGeometry) {
        if !self.on && searching.len() >= ON_AT {
            self.on = true;
            self.refreshed_to = now;
            for &c in searching {
                self.place(c, g.search(c), now, g);
            }
        } else if self.on && searching.len() <= OFF_AT {
            self.on = false;
            for c in 0..self.entry.len() as u16 {
                if self.entry[c as usize].take().is_some() {
                    self.ring.remove(c);
                    self.ends.remove(c);
                }
            }
        }
    }

    /// `i` mod n for `i` < 2n.
    #[inline(always)]
    fn wrap(&self, i: u64) -> u64 {
        i - if i >= self.n { self.n } else { 0 }
    }

    /// `i` mod the sweep's probes for `i` < twice that: a slot of `ends`.
    #[inline(always)]
    fn wrap_end(&self, i: u64) -> u64 {
        i - if i >= self.sweep_probes { self.sweep_probes } else { 0 }
    }

    fn drop_core(&mut self, c: u16) {
        self.ring.remove(c);
        self.ends.remove(c);
        self.entry[c as usize] = None;
    }

    /// Enters `c`'s sweep holding `now` of its search `search`, and files its sweep ends.
    fn place(&mut self, c: u16, search: u32, now: Nanos, g: &impl WalkGeometry) {
        let (k, start) = g.sweep_at(c, now);
        let start_probe = ((start / self.probe) % self.n) as u32;
        let end = start + self.sweep_len;
        self.ends.remove(c);
        self.ends.insert(c, ((end / self.probe) % self.sweep_probes) as u32);
        let walk = [self.sweep_walk(c, search, k, g), self.sweep_walk(c, search, k + 1, g)];
        self.enter(c, Entry { search, sweep: k, end, start_probe, walk });
    }

    fn sweep_walk(&self, c: u16, search: u32, sweep: u64, g: &impl WalkGeometry) -> SweepWalk {
        SweepWalk::new(g.origin(c, search, sweep), g.cycle_place(c), self.n as u32)
    }

    /// Enters `c`'s sweep after `e`, its current one (which ended). Its end moves on by a
    /// sweep: the same slot of `ends`.
    fn place_next(&mut self, c: u16, e: Entry, g: &impl WalkGeometry) {
        // A sweep is n − 1 probes: the next one starts one place earlier on the ring.
        let start_probe = self.wrap(e.start_probe as u64 + self.n - 1) as u32;
        let end = e.end + self.sweep_len;
        debug_assert_eq!(self.ends.slot[c as usize] as u64, (end / self.probe) % self.sweep_probes);
        let walk = [e.walk[1], self.sweep_walk(c, e.search, e.sweep + 2, g)];
        self.enter(c, Entry { search: e.search, sweep: e.sweep + 1, end, start_probe, walk });
    }

    /// Files `c` under its sweep `e` on the ring, at the phase its walk's origin puts it: cycle
    /// place j is reached j − origin probes after the start (mod n), so the phase is the start
    /// plus `shift` (n − 1 − origin) probes.
    fn enter(&mut self, c: u16, e: Entry) {
        self.ring.remove(c);
        let slot = self.wrap(e.start_probe as u64 + e.walk[0].shift as u64);
        self.ring.insert(c, slot as u32);
        self.entry[c as usize] = Some(e);
    }

    /// Core `c` began its search number `search` (at its `search_start`).
    pub fn begin(&mut self, c: u16, search: u32, now: Nanos, g: &impl WalkGeometry) {
        if !self.on {
            return;
        }
        self.refresh(now, g);
        self.place(c, search, now, g);
    }

    /// Moves every live core whose sweep ended at or before `now` to its sweep holding `now`.
    fn refresh(&mut self, now: Nanos, g: &impl WalkGeometry) {
        if now < self.refreshed_to {
            return;
        }
        let first = self.refreshed_to / self.probe;
        let last = now / self.probe;
        let slots = (last - first + 1).min(self.sweep_probes);
        let first_slot = first % self.sweep_probes;
        let mut cores = std::mem::take(&mut self.scratch);
        let mut i = 0;
        while let Some(d) = self.ends.distance_to_occupied(self.wrap_end(first_slot + i) as u32) {
            i += d;
            if i >= slots {
                break;
            }
            let s = self.wrap_end(first_slot + i) as u32;
            i += 1;
            self.ends.collect(s, &mut cores);
            for &c in &cores {
                let Some(e) = self.entry[c as usize] else { continue };
                if e.end > now {
                    continue;
                }
                if !g.live(c, e.search) {
                    self.drop_core(c);
                } else if now < e.end + self.sweep_len {
                    self.place_next(c, e, g);
                } else {
                    self.place(c, e.search, now, g);
                }
            }
        }
        self.scratch = cores;
        self.refreshed_to = now;
    }

    /// The searching core (not `v`) whose probe of queue `v`, at cycle place `place`, comes
    /// first at or after `now`, and when; ties go to the first in the searching-core order.
    pub fn first_probe<G: WalkGeometry>(&mut self, v: u16, place: u32, now: Nanos, g: &mut G) -> Option<(Nanos, u16)> {
        self.refresh(now, g);
        let p = self.probe;
        // (time, order, core) of the best so far.
        let mut best: Option<(Nanos, u32, u16)> = None;
        let (n, sweep_len) = (self.n as u32, self.sweep_len);
        let consider = |best: &mut Option<(Nanos, u32, u16)>, c: u16, e: &Entry, g: &mut G| {
            // The entry's sweep holds `now` (refreshed above).
            let t = probe_in_sweeps(&e.walk, e.end - sweep_len, place, now, n, p, sweep_len);
            debug_assert_eq!(t, g.next_probe(c, v, now));
            let ord = g.order(c);
            if best.is_none_or(|(bt, bo, _)| (t, ord) < (bt, bo)) {
                *best = Some((t, ord, c));
            }
        };
        let mut cores = std::mem::take(&mut self.scratch);
        // The ring: successors of x in phase order. The first slot holds phases at or after x
        // (δ small) and before it (δ near W): every entry there is asked.
        // now = (now_probe·n + now_slot)·p + into: x = now − (place + 1)·p mod W, in slot bx.
        let (now_probe, into) = (now / p, now % p);
        let now_slot = now_probe % self.n;
        let bx = self.wrap(now_slot + self.n - place as u64 - 1);
        let x = bx * p + into;
        let mut stale = Vec::new();
        let mut m = 0;
        while let Some(d) = self.ring.distance_to_occupied(self.wrap(bx + m) as u32) {
            m += d;
            let min_delta = if m == 0 { 0 } else { m * p - (x - bx * p) };
            if m >= self.n || best.is_some_and(|(bt, _, _)| now + min_delta > bt + p) {
                break;
            }
            self.ring.collect(self.wrap(bx + m) as u32, &mut cores);
            m += 1;
            for &c in &cores {
                let Some(e) = self.entry[c as usize] else { continue };
                if c == v {
                    continue;
                }
                if !g.live(c, e.search) {
                    stale.push(c);
                    continue;
                }
                consider(&mut best, c, &e, g);
            }
        }
        // The cores whose sweep ends before the best: their next sweep may come first.
        let first = now_probe;
        let end_slot = now_probe % self.sweep_probes;
        let mut m = 0;
        while let Some(d) = self.ends.distance_to_occupied(self.wrap_end(end_slot + m) as u32) {
            m += d;
            if m >= self.sweep_probes || best.is_some_and(|(bt, _, _)| (first + m) * p > bt) {
                break;
            }
            self.ends.collect(self.wrap_end(end_slot + m) as u32, &mut cores);
            m += 1;
            for &c in &cores {
                let Some(e) = self.entry[c as usize] else { continue };
                if c == v || e.end + p > best.map_or(Nanos::MAX, |b| b.0) {
                    continue;
                }
                if !g.live(c, e.search) {
                    stale.push(c);
                    continue;
                }
                consider(&mut best, c, &e, g);
            }
        }
        self.scratch = cores;
        for c in stale {
            self.drop_core(c);
        }
        best.map(|(t, _, c)| (t, c))
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use microsched_core::rng::{hash, stream};
    use microsched_core::sched::search::{ProbeCfg, ProbeSearch, WorkSearch};

    /// How far a randomized test moves time at a step drawn from `r`: not at all, by a fraction
    /// of a probe, by whole probes, or by up to three sweeps.
    pub(in crate::server) fn time_step(r: u64, probe: Nanos, sweep_len: Nanos) -> Nanos {
        match r % 4 {
            0 => 0,
            1 => r >> 8 & 63,
            2 => probe * (r >> 8 & 7),
            _ => (r >> 8) % (3 * sweep_len),
        }
    }

    /// Searching cores as the server keeps them, with the real probe order.
    struct Model {
        search: ProbeSearch,
        probe: Nanos,
        sweep_len: Nanos,
        /// Per core: (searching, search number, search start); `order` as a set's positions.
        cores: Vec<(bool, u32, Nanos)>,
        order: Vec<u32>,
    }

    impl WalkGeometry for Model {
        fn live(&self, c: u16, search: u32) -> bool {
            let (on, s, _) = self.cores[c as usize];
            on && s == search
        }
        fn sweep_at(&self, c: u16, now: Nanos) -> (u64, Nanos) {
            let start0 = self.cores[c as usize].2;
            let k = (now - start0) / self.sweep_len;
            (k, start0 + k * self.sweep_len)
        }
        fn search(&self, c: u16) -> u32 {
            self.cores[c as usize].1
        }
        fn origin(&self, c: u16, search: u32, sweep: u64) -> u32 {
            self.search.origin_of(c, search, sweep)
        }
        fn next_probe(&mut self, c: u16, v: u16, now: Nanos) -> Nanos {
            // As `ProbeState::next_probe`.
            let search = self.cores[c as usize].1;
            let (k, start) = self.sweep_at(c, now);
            let t = start + self.search.position(c, search, k, v) as Nanos * self.probe;
            if t >= now {
                return t;
            }
            start + self.sweep_len + self.search.position(c, search, k + 1, v) as Nanos * self.probe
        }
        fn order(&self, c: u16) -> u32 {
            self.order[c as usize]
        }
        fn cycle_place(&self, c: u16) -> u32 {
            self.search.cycle_place(c).expect("the sweep order has a cycle")
        }
    }

    /// Random starts, stops and queries; per query the index's answer (when on) against the
    /// scan's. `follow`: the index switches on and off with the searching set's size (starts
    /// outnumber stops for 4 000 steps, then only stops); else it is on from the start.
    fn against_the_scan(n: usize, seed: u64, follow: bool) -> (usize, usize, usize) {
        let probe = 100;
        let search = ProbeSearch::new(&ProbeCfg::default(), n, stream(seed, "search"));
        let sweep_len = (n as u64 - 1).max(1) * probe;
        let mut m = Model { search, probe, sweep_len, cores: vec![(false, 0, 0); n], order: (0..n as u32).collect() };
        let mut walks = Walks::new(n, probe);
        walks.on = !follow;
        let mut now: Nanos = 1_000;
        let (mut ties, mut asked, mut switches) = (0, 0, 0);
        for step in 0..20_000u64 {
            let r = hash(seed << 32 ^ step);
            now += time_step(r, probe, sweep_len);
            let c = ((r >> 20) % n as u64) as u16;
            let action = r >> 40 & 7;
            let (starts, stops) = if !follow { (2, 2) } else if step / 4_000 % 2 == 0 { (5, 1) } else { (0, 6) };
            if action < starts {
                // Search starts on the probe grid make ties common.
                let on_grid = r >> 44 & 1 == 0;
                let start = if on_grid { now - now % probe } else { now };
                let s = m.cores[c as usize].1 + 1;
                m.cores[c as usize] = (true, s, start);
                // The set's order changes as cores come and go (positions are distinct).
                m.order[c as usize] = (r >> 48) as u32 % 4 * n as u32 + c as u32;
                walks.begin(c, s, now, &m);
            } else if action < starts + stops {
                m.cores[c as usize].0 = false;
            }
            let searching: Vec<u16> = (0..n as u16).filter(|&c| m.cores[c as usize].0).collect();
            if follow {
                let was = walks.is_on();
                walks.follow(&searching, now, &m);
                switches += usize::from(was != walks.is_on());
            }
            if !walks.is_on() {
                continue;
            }
            let v = ((r >> 50) % n as u64) as u16;
            let place = m.search.cycle_place(v).unwrap();
            let got = walks.first_probe(v, place, now, &mut m);
            let others: Vec<u16> = searching.into_iter().filter(|&c| c != v).collect();
            let mut all: Vec<(Nanos, u32, u16)> = others.iter().map(|&c| (m.next_probe(c, v, now), m.order[c as usize], c)).collect();
            all.sort();
            ties += usize::from(all.len() >= 2 && all[0].0 == all[1].0);
            asked += all.len();
            assert_eq!(got, all.first().map(|&(t, _, c)| (t, c)), "n {n} step {step} now {now} v {v}");
        }
        (ties, asked, switches)
    }

    /// The index answers exactly what asking every searching core answers (time and core, ties
    /// to the first in order), while cores start and stop searching and time runs on by
    /// fractions of a probe to several sweeps.
    #[test]
    fn the_first_probe_is_the_full_scans() {
        for (n, seed) in [(2usize, 1u64), (3, 2), (16, 3), (64, 4), (257, 5)] {
            let (ties, asked, _) = against_the_scan(n, seed, false);
            assert!(asked > 5_000, "n {n}: the queries had searching cores to ask ({asked})");
            if n >= 16 {
                assert!(ties > 0, "n {n}: some queries had a tie");
            }
        }
    }

    /// Built from the searching set when it grows past `ON_AT`, dropped below `OFF_AT`, and
    /// exact whenever on.
    #[test]
    fn the_index_switches_with_the_searching_set_and_stays_exact() {
        for (n, seed) in [(200usize, 6u64), (512, 7)] {
            let (_, asked, switches) = against_the_scan(n, seed, true);
            assert!(switches >= 4, "n {n}: the index switched on and off ({switches} switches)");
            assert!(asked > 10_000, "n {n}: queries were answered by the index ({asked})");
        }
    }
}
