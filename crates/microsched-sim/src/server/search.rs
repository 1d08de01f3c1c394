//! The probe-cost work search ([`microsched_core::sched::search`], `server.search.kind =
//! "probe"`) carried out on the server's cores: each idle core sweeps the other queues probe by
//! probe. A probe of an empty queue changes nothing, so only the probes that can find work are
//! events: for each queue holding stealable work, the earliest probe of it by a searching core
//! (re-evaluated when that probe comes too late to matter, when a core starts a sweep, and after
//! a steal leaves work behind); for each searching core whose own queue got work, its next
//! own-queue check; and the end of each sweep (the next sweep's random start, and the study's
//! park rule). Nothing here runs with the instant search.

use microsched_core::sched::search::WorkSearch;
use microsched_core::sched::Place;
use microsched_core::Nanos;

use super::{CoreMode, Idle, Server, NONE};
use crate::events::{Event, EventQueue};
use crate::requests::Slab;

#[derive(Debug, Clone, Copy)]
struct CoreSearch {
    /// Bumped at every sweep start: events of an older sweep are stale.
    sweep: u32,
    sweep_start: Nanos,
    /// Start of the current fruitless search (its first sweep).
    search_start: Nanos,
    /// The own-queue check scheduled in this sweep (`Nanos::MAX`: none).
    own_at: Nanos,
}

pub struct ProbeState {
    search: Box<dyn WorkSearch>,
    probe: Nanos,
    own_check: Nanos,
    sweep_len: Nanos,
    cores: Vec<CoreSearch>,
    /// Per queue: the earliest probe of it scheduled so far (`Nanos::MAX`: none).
    hit_at: Vec<Nanos>,
}

impl Server {
    /// Switches the server to a probe-by-probe search (before the run starts).
    pub fn set_search(&mut self, search: Box<dyn WorkSearch>) {
        let n = self.q.cores.len();
        let (probe, own_check) = (search.probe_ns(), search.own_check_ns());
        let sweep_len = probe * search.probes_per_sweep() as Nanos;
        let idle = CoreSearch { sweep: 0, sweep_start: 0, search_start: 0, own_at: Nanos::MAX };
        self.probe = Some(Box::new(ProbeState { search, probe, own_check, sweep_len, cores: vec![idle; n], hit_at: vec![Nanos::MAX; n] }));
    }

    /// Whether a fruitless search parks only at a sweep's end (the study's rule).
    pub fn parks_after_sweep(&self) -> bool {
        self.probe.as_ref().is_some_and(|p| p.search.parks_after_sweep())
    }

    /// When `core`'s current fruitless search began.
    pub fn search_started_at(&self, core: u16) -> Nanos {
        self.probe.as_ref().map_or(0, |p| p.cores[core as usize].search_start)
    }

    /// The cores idle at the start of the run begin searching.
    pub fn begin_searches(&mut self, now: Nanos, evq: &mut EventQueue) {
        if self.probe.is_none() {
            return;
        }
        let idle = self.q.spinners.items.clone();
        for c in idle {
            self.begin_search(c, now, evq);
        }
    }

    fn begin_search(&mut self, core: u16, now: Nanos, evq: &mut EventQueue) {
        self.probe.as_mut().expect("probe search").cores[core as usize].search_start = now;
        self.begin_sweep(core, now, evq);
    }

    fn begin_sweep(&mut self, core: u16, now: Nanos, evq: &mut EventQueue) {
        let p = self.probe.as_mut().expect("probe search");
        let cs = &mut p.cores[core as usize];
        cs.sweep = cs.sweep.wrapping_add(1);
        cs.sweep_start = now;
        cs.own_at = Nanos::MAX;
        let sweep = cs.sweep;
        p.search.begin_sweep(core);
        evq.push(now + p.sweep_len, Event::SweepEnd { node: self.node, core, sweep });
        // Queues already holding stealable work: this sweep's probe of each, if it comes first.
        for &v in &self.q.victims.items {
            if v == core {
                continue;
            }
            let t = now + p.search.position(core, v) as Nanos * p.probe;
            let h = &mut p.hit_at[v as usize];
            if t < *h || *h < now {
                *h = t;
                evq.push(t, Event::Probe { node: self.node, core, victim: v, sweep });
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
        self.q.push(Place::Core(core), req);
        if self.q.cores[core as usize].lazy_from != Nanos::MAX {
            self.arm_expiry(core, now, evq);
        }
        if self.q.spinners.contains(core) {
            let p = self.probe.as_mut().expect("probe search");
            let cs = &mut p.cores[core as usize];
            // The next own-queue check of this sweep (its end checks the own queue too).
            let k = (now - cs.sweep_start).div_ceil(p.own_check).max(1);
            let t = cs.sweep_start + k * p.own_check;
            if t < cs.sweep_start + p.sweep_len && !(cs.own_at >= now && cs.own_at <= t) {
                cs.own_at = t;
                evq.push(t, Event::Probe { node: self.node, core, victim: core, sweep: cs.sweep });
            }
        }
        if self.q.victims.contains(core) {
            self.schedule_probe(core, now, evq);
        }
    }

    /// Schedules the earliest probe of queue `v` by a searching core, unless one at least as
    /// early is scheduled already.
    pub(super) fn schedule_probe(&mut self, v: u16, now: Nanos, evq: &mut EventQueue) {
        let p = self.probe.as_mut().expect("probe search");
        let mut best = (Nanos::MAX, NONE as u16);
        for &c in &self.q.spinners.items {
            if c == v {
                continue;
            }
            let cs = &p.cores[c as usize];
            let t = cs.sweep_start + p.search.position(c, v) as Nanos * p.probe;
            if t >= now && t < best.0 {
                best = (t, c);
            }
        }
        let h = &mut p.hit_at[v as usize];
        if best.0 != Nanos::MAX && (best.0 < *h || *h < now) {
            *h = best.0;
            let core = best.1;
            evq.push(best.0, Event::Probe { node: self.node, core, victim: v, sweep: p.cores[core as usize].sweep });
        }
    }

    /// A scheduled probe: `core` looks at `victim`'s queue (its own: an own-queue check). Some
    /// if the core found work (what it did next).
    pub fn probe_event(&mut self, core: u16, victim: u16, sweep: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Option<Idle> {
        let p = self.probe.as_mut().expect("probe events need the probe search");
        let live = self.q.spinners.contains(core) && p.cores[core as usize].sweep == sweep;
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
            return Some(Idle::Working);
        }
        self.schedule_probe(victim, now, evq);
        None
    }

    /// The end of one of `core`'s sweeps: the next sweep begins with an own-queue check. Some:
    /// the core found work there (what it did next) or stays idle (`Idle::Spinning`: the driver
    /// may park it, then calls [`Server::next_sweep`]).
    pub fn sweep_end(&mut self, core: u16, sweep: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Option<Idle> {
        let p = self.probe.as_ref().expect("sweep events need the probe search");
        if !self.q.spinners.contains(core) || p.cores[core as usize].sweep != sweep {
            return None;
        }
        self.take_own_work(core, now, slab, evq).or(Some(Idle::Spinning))
    }

    /// Starts the next sweep of a core still searching.
    pub fn next_sweep(&mut self, core: u16, now: Nanos, evq: &mut EventQueue) {
        if self.q.spinners.contains(core) {
            self.begin_sweep(core, now, evq);
        }
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

    /// After a steal: what the thief left in its queue can be stolen in turn.
    pub(super) fn stealable_again(&mut self, core: u16, now: Nanos, evq: &mut EventQueue) {
        if self.probe.is_some() && self.q.victims.contains(core) {
            self.schedule_probe(core, now, evq);
        }
    }
}
