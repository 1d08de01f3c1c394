//! Parking: the core allocator's park rule and its timers (park checks, the probe search's
//! sweep-end rule), parks and their aborts, and the allocator's ticks (grants, yields).
//!
//! Invariants: a park check acts only on a core still spinning in the epoch it was armed for;
//! every park, abort and change of active cores is reported to the allocator and the credit
//! controller.

use microsched_core::alloc::{AllocAction, ParkMode, ParkRule, ParkVerdict};
use microsched_core::overload::CreditLink;
use microsched_core::Nanos;

use super::Sim;
use crate::trace::Tracer;
use crate::events::Event;
use crate::server::Idle;

impl<T: Tracer> Sim<T> {
    /// Schedules the park check of a core that just went idle, as its allocator's rule says.
    #[inline(always)]
    pub(super) fn after_idle(&mut self, node: u16, core: u16, idle: Idle) {
        match idle {
            Idle::Working => {}
            Idle::Yielded => self.after_park(node),
            Idle::Spinning => {
                let n = &self.nodes[node as usize];
                let rule = n.allocator.park_rule();
                let wait = match rule.mode {
                    ParkMode::Never => return,
                    // The probe search's sweep-end rule decides (see `sweep_end`).
                    ParkMode::AfterPoll if n.server.parks_after_sweep() => return self.arm_sweep_park(node, core),
                    ParkMode::AfterPoll => self.poll_wait(&rule),
                    ParkMode::OnlyLastCore if n.server.active_count() == 1 => self.search_pass,
                    ParkMode::OnlyLastCore => return,
                };
                let epoch = n.server.core(core).epoch;
                self.evq.push(self.now + wait, Event::ParkCheck { node, core, epoch });
            }
        }
    }

    /// The study's park rule (probe search, `park = "sweep"`): the first sweep end at least a
    /// poll period into a fruitless search is a park check.
    pub(super) fn arm_sweep_park(&mut self, node: u16, core: u16) {
        let n = &self.nodes[node as usize];
        let rule = n.allocator.park_rule();
        if !n.server.parks_after_sweep() || rule.mode != ParkMode::AfterPoll {
            return;
        }
        let wait = self.poll_wait(&rule);
        n.server.schedule_sweep_end(core, n.server.search_started_at(core) + wait.saturating_sub(1), &mut self.evq);
    }

    /// How long a fruitless search lasts before a park check under `AfterPoll`: the poll
    /// period, and at least `min_passes` search passes.
    pub(super) fn poll_wait(&self, rule: &ParkRule) -> Nanos {
        rule.min_poll_ns.max(rule.min_passes as Nanos * self.search_pass)
    }

    /// A sweep end under the study's park rule: the next sweep's own-queue check, then a park
    /// check; a core that keeps searching gets the same at its next sweep end.
    pub(super) fn sweep_end(&mut self, node: u16, core: u16, search: u32) {
        let now = self.now;
        let n = &mut self.nodes[node as usize];
        match n.server.sweep_end(core, search, now, &mut self.slab, &mut self.evq) {
            None => {}
            Some(Idle::Spinning) => {
                let epoch = n.server.core(core).epoch;
                self.park_check(node, core, epoch);
                let s = &self.nodes[node as usize].server;
                if s.still_searching(core, search) {
                    s.schedule_sweep_end(core, now + 1, &mut self.evq);
                }
            }
            Some(idle) => self.after_idle(node, core, idle),
        }
    }

    pub(super) fn park_check(&mut self, node: u16, core: u16, epoch: u32) {
        let measuring = self.measuring;
        let n = &mut self.nodes[node as usize];
        if n.server.core(core).epoch != epoch || !n.server.is_spinning(core) {
            return; // found work since, or already parked
        }
        // Probe search: the final own-queue check before parking.
        if let Some(idle) = n.server.take_own_work(core, self.now, &mut self.slab, &mut self.evq) {
            self.after_idle(node, core, idle);
            return;
        }
        let active = n.server.active_count();
        if active == 1 && n.allocator.park_rule().mode == ParkMode::Never {
            return;
        }
        let credits = n.credit.as_mut().map(|c| &mut *c.ctl as &mut dyn CreditLink);
        n.parking.attempts += 1;
        match n.allocator.on_park_attempt(self.now, core, active, credits) {
            ParkVerdict::Park => {
                n.parking.parks += 1;
                if let Some(c) = &mut n.credit {
                    if measuring && c.ctl.drained() > 0 {
                        c.parks_while_drained += 1;
                    }
                }
                n.server.park(core, self.now);
                self.after_park(node);
            }
            ParkVerdict::KeepPolling => {
                n.server.mark_park_attempt(core);
                self.evq.push(self.now + self.search_pass, Event::ParkCheck { node, core, epoch });
            }
        }
        if self.nodes[node as usize].credit.is_some() {
            self.send_wakeups(node);
        }
    }

    /// Tells a node's allocator that a core ended a park attempt: it found work, or it was
    /// woken after parking (CoreSync returns the credits it withheld).
    pub(super) fn park_aborted(&mut self, node: u16, core: u16) {
        let n = &mut self.nodes[node as usize];
        let credits = n.credit.as_mut().map(|c| &mut *c.ctl as &mut dyn CreditLink);
        n.allocator.on_park_abort(self.now, core, credits);
    }

    /// After any park: a lone remaining idle core under an only-the-last-core-parks rule gets
    /// its own park check.
    pub(super) fn after_park(&mut self, node: u16) {
        self.cores_changed(node);
        let s = &self.nodes[node as usize];
        if s.allocator.park_rule().mode == ParkMode::OnlyLastCore && s.server.active_count() == 1 {
            if let Some(c) = s.server.first_spinner() {
                self.after_idle(node, c, Idle::Spinning);
            }
        }
    }

    pub(super) fn alloc_tick(&mut self, node: u16) {
        let now = self.now;
        let n = &mut self.nodes[node as usize];
        if let Some(c) = &mut n.credit {
            if !c.exact {
                // The congestion signal is measured at the allocator's pace, as in Caladan.
                c.delay = n.server.max_delay(now, &self.slab);
                n.server.sample_delay_signal(c.delay);
            }
        }
        // A yield request not served within one interval is withdrawn, as Caladan's IOKernel
        // does: the signal that motivated it is stale by now.
        n.server.withdraw_yield_requests();
        let action = n.allocator.tick(&n.server.alloc_view(now, &self.slab));
        // Before carrying the action out: what the allocator just saw is its next `prev`.
        n.server.mark_tick(now);
        match action {
            AllocAction::Nothing => {}
            AllocAction::Grant => match n.allocator.grant_delay() {
                Some(evict) => {
                    // Work waiting on a lent core waits for the scheduler there, not the eviction.
                    let on_demand = n.allocator.grant_on_demand();
                    let d = match &mut n.lent_wake {
                        Some((w, rng)) if on_demand => w.sample(rng),
                        _ => evict,
                    };
                    let refill = n.allocator.refill_after_grant();
                    let granted = n.server.grant_after(now, d, refill, &mut self.evq);
                    if let (Some(core), true) = (granted, on_demand) {
                        // Its Secondary stays: the balancer evicts only to refill the buffer.
                        n.server.share_with_secondary(core);
                    }
                }
                None => match &mut n.wake {
                    Some((w, rng)) => {
                        let d = w.sample(rng);
                        n.server.grant_after(now, d, 0, &mut self.evq);
                    }
                    None => {
                        n.server.grant(now, &mut self.evq);
                    }
                },
            },
            AllocAction::Yield(core) => {
                n.server.request_yield(core, now);
                if !n.server.core(core).is_active() {
                    self.after_park(node);
                }
            }
        }
        if let Some(iv) = self.nodes[node as usize].allocator.interval() {
            self.evq.push(now + iv, Event::AllocTick { node });
        }
    }
}
