//! The instant work search and stealing: how an idle core finds work when looking costs nothing.
//! The probe-cost search (`search.rs`) takes over when configured, so each lives on its own.

use microsched_core::sched::{Next, Place};
use microsched_core::Nanos;

use super::cores::CoreMode;
use super::{Idle, Server};
use crate::events::{Event, EventQueue};
use crate::requests::Slab;

impl Server {
    /// Moves the oldest `steal_amount` of `victim`'s queue to `thief`, which runs it after the
    /// steal cost.
    pub(super) fn steal_from(&mut self, thief: u16, victim: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        let q = &mut self.q;
        let take = self.policy.steal(thief, victim, q.cores[victim as usize].queue.len());
        debug_assert!(take > 0 && q.cores[thief as usize].queue.is_empty());
        for _ in 0..take {
            let r = q.cores[victim as usize].queue.pop_front().expect("counted");
            q.cores[thief as usize].queue.push_back(r);
        }
        q.cores[victim as usize].dequeued_total += take as u64;
        if q.cores[victim as usize].queue.is_empty() {
            q.victims.remove(victim);
            q.nonempty.remove(victim);
        }
        q.nonempty.insert(thief);
        let t = &mut q.cores[thief as usize];
        t.save_tick(&q.ledger);
        t.enqueued_total += take as u64;
        t.epoch = t.epoch.wrapping_add(1);
        t.set_mode(CoreMode::Search, now, &mut q.ledger);
        t.stealing = true;
        q.victims.remove(thief);
        if self.cfg.steal_cost == 0 {
            self.end_steal(thief);
            self.stealable_again(thief, now, evq);
            if !self.run_own(thief, now, slab, evq) {
                let next = self.find_work(thief, now, slab, evq);
                self.idled.push((thief, next));
            }
        } else {
            evq.push(now + self.cfg.steal_cost, Event::StealDone { node: self.node, core: thief });
        }
    }

    /// Runs the head of the core's own queue; false if it is empty (or what it took left the
    /// core at once).
    fn run_own(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> bool {
        match self.q.pop(Place::Core(core)) {
            Some(r) => self.start(core, r, now, slab, evq),
            None => false,
        }
    }

    /// A core looks for work where its queueing policy says; with none, it spins (or parks, if
    /// a policy asked it to yield).
    #[inline(always)]
    pub fn find_work(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Idle {
        if self.q.cores[core as usize].yield_requested {
            self.park(core, now);
            return Idle::Yielded;
        }
        if self.probe.is_some() {
            return self.find_work_probed(core, now, slab, evq);
        }
        if self.per_request {
            self.policy.clock(now);
        }
        // A loop, not recursion: each request taken may block or yield at once.
        loop {
            match self.policy.next(core, &self.q) {
                Next::Run(place) => {
                    let r = self.q.pop(place).expect("the policy saw work there");
                    if self.start(core, r, now, slab, evq) {
                        if self.pushes {
                            self.push_shared(now, slab, evq);
                        }
                        return Idle::Working;
                    }
                }
                Next::Steal(victim) => {
                    self.steal_from(core, victim, now, slab, evq);
                    return Idle::Working;
                }
                Next::Idle => break,
            }
        }
        let c = &mut self.q.cores[core as usize];
        if c.mode != CoreMode::Search {
            c.set_mode(CoreMode::Search, now, &mut self.q.ledger);
        }
        self.q.spinners.insert(core);
        Idle::Spinning
    }

    /// A core took work, so a slot may have freed: the dispatcher pushes shared-queue work to
    /// the cores the policy names (JBSQ's `dispatch_requests`).
    fn push_shared(&mut self, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        while !self.q.shared.is_empty() {
            let Some(c) = self.policy.push_target(&self.q) else { break };
            let r = self.q.pop(Place::Shared).expect("non-empty");
            self.make_runnable(r, Place::Core(c), now, slab, evq);
        }
    }

    fn end_steal(&mut self, core: u16) {
        let c = &mut self.q.cores[core as usize];
        c.stealing = false;
        if !c.queue.is_empty() {
            self.q.victims.insert(core);
        }
    }

    /// A steal finished: run what was taken.
    pub fn steal_done(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Idle {
        self.end_steal(core);
        self.stealable_again(core, now, evq);
        if self.run_own(core, now, slab, evq) {
            Idle::Working
        } else {
            self.find_work(core, now, slab, evq)
        }
    }
}
