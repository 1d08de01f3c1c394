//! Quantum preemption and its overhead stretches. Only a finite quantum reaches this code, so it
//! is kept out of the run path that every request takes.

use microsched_core::sched::{Place, Requeue};
use microsched_core::Nanos;

use super::cores::{AfterOverhead, CoreMode};
use super::{Server, SliceEnd, NONE};
use crate::dispatcher::Work;
use crate::events::{Event, EventQueue};
use crate::requests::{Req, Slab};

impl Server {
    /// Work queued at a core whose running request's expiries are lazy: its next expiry (the
    /// first at or after `now`: an expiry due now comes after the arrival that queued the work,
    /// as it would have with the expiry's event scheduled a quantum earlier and the arrival's
    /// half an RTT earlier) is scheduled, unless the request ends first.
    pub(super) fn arm_expiry(&mut self, core: u16, now: Nanos, evq: &mut EventQueue) {
        let c = &mut self.q.cores[core as usize];
        let period = c.quantum + self.cfg.preemption.propagation;
        let k = now.saturating_sub(c.lazy_from).div_ceil(period);
        let at = c.lazy_from + k * period;
        if at >= c.slice_start + c.slice_len {
            return;
        }
        self.counters.avoided_preemptions += k;
        c.lazy_from = Nanos::MAX;
        c.slice_len = at - c.slice_start;
        c.gen = c.gen.wrapping_add(1);
        evq.push(at, Event::CoreDone { node: self.node, core, gen: c.gen });
    }

    /// Takes the running request off `core` at its quantum: the receive cost, then it goes back
    /// to a runqueue.
    pub(super) fn preempt(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> SliceEnd {
        let p = self.cfg.preemption;
        self.counters.preemptions += 1;
        self.counters.preempt_send_ns += p.send;
        if self.dispatcher.is_some() {
            // The dispatcher sends the interrupt now and takes the request back once the
            // worker has let go of it; both are its work, queued behind what it is doing.
            self.dispatcher_note(Work::Signal, now, evq);
            self.dispatcher_note(Work::Requeue, now, evq);
        }
        let c = &mut self.q.cores[core as usize];
        let req = c.current;
        slab[req].set(Req::PREEMPTED, true);
        if p.receive > 0 {
            c.set_mode(CoreMode::Overhead, now, &mut self.q.ledger);
            c.after_overhead = AfterOverhead::Requeue;
            c.gen = c.gen.wrapping_add(1);
            evq.push(now + p.receive, Event::OverheadDone { node: self.node, core, gen: c.gen });
            return SliceEnd::Running;
        }
        self.requeue_preempted(core, now, slab, evq);
        SliceEnd::Freed
    }

    fn requeue_preempted(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        let c = &mut self.q.cores[core as usize];
        let req = c.current;
        c.current = NONE;
        slab[req].enqueued_at = now;
        if self.per_request {
            self.policy.clock(now);
        }
        let place = self.policy.requeue(core, Requeue::Preempted, &self.q);
        // Onto a queue, not straight to a spinner: the freed core itself looks for work next.
        self.q.push(place, req);
        if let Place::Core(c) = place {
            self.stealable_again(c, now, evq);
        }
        // A shared queue that idle cores poll (Synergy's wait queue): one of them takes it.
        if place == Place::Shared {
            if let Some(idle) = self.policy.notify(place, &self.q) {
                self.q.spinners.remove(idle);
                let r = self.q.pop(Place::Shared).expect("just queued");
                if !self.start(idle, r, now, slab, evq) {
                    let next = self.find_work(idle, now, slab, evq);
                    self.idled.push((idle, next));
                }
            }
        }
    }

    /// The end of a core's overhead stretch (preemption receive or return cost).
    pub fn overhead_done(&mut self, core: u16, gen: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> SliceEnd {
        let c = &mut self.q.cores[core as usize];
        if c.gen != gen {
            return SliceEnd::Stale;
        }
        c.set_mode(CoreMode::Busy, now, &mut self.q.ledger);
        match c.after_overhead {
            AfterOverhead::Requeue => {
                self.requeue_preempted(core, now, slab, evq);
                SliceEnd::Freed
            }
            AfterOverhead::Resume => self.after_run(core, now, slab, evq),
        }
    }

    /// Cancels the core's pending slice end, crediting the request with the part of the slice
    /// it ran, and preempts it now (a dispatcher's or a policy's early preemption).
    #[allow(dead_code)] // the mechanism for dispatcher-driven (Concord-style) preemption
    pub fn preempt_now(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> SliceEnd {
        let c = &mut self.q.cores[core as usize];
        if c.current == NONE || c.mode != CoreMode::Busy || slab[c.current].has(Req::WAITING_LOCK) || now < c.slice_start {
            return SliceEnd::Stale;
        }
        let ran = now - c.slice_start;
        c.gen = c.gen.wrapping_add(1);
        if c.lazy_from != Nanos::MAX {
            let period = c.quantum + self.cfg.preemption.propagation;
            self.counters.avoided_preemptions += now.saturating_sub(c.lazy_from).div_ceil(period);
            c.lazy_from = Nanos::MAX;
        }
        let r = &mut slab[c.current];
        r.left -= ran.min(r.left);
        if r.left == 0 {
            r.in_op = false;
            r.pc += 1;
        }
        self.preempt(core, now, slab, evq)
    }
}
