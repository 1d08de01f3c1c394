//! The loop and event dispatch: pops events in time order, hands each to the concern that owns
//! it, then drains what the servers left for the driver (park aborts, idled cores).
//!
//! Invariants: events are handled in (time, insertion) order and never before `now`; an event at
//! or after `end` is not handled; `check` is called every [`CHECK_EVERY`] events; the tracer sees
//! each event before and after it is handled and changes nothing the run computes.

use microsched_core::Nanos;

use super::{Sim, CHECK_EVERY};
use crate::events::Event;
use crate::trace::Tracer;

impl<T: Tracer> Sim<T> {
    /// Handles events up to the end of the run; returns the event at which `check` stopped it.
    /// The one loop of every run: monomorphised per tracer, the untraced run's [`NoTrace`](crate::trace::NoTrace) adds
    /// nothing to it.
    #[inline(always)]
    pub(super) fn event_loop(&mut self, check: &mut dyn FnMut(Nanos, Nanos) -> bool) -> Option<(Nanos, Event)> {
        while let Some((t, ev)) = self.evq.pop() {
            if t >= self.end {
                break;
            }
            self.now = t;
            self.events += 1;
            if self.events.is_multiple_of(CHECK_EVERY) && !check(t, self.end) {
                return Some((t, ev));
            }
            self.traced_step(ev);
        }
        None
    }

    /// One event, seen by the tracer before and after it is handled.
    #[inline(always)]
    fn traced_step(&mut self, ev: Event) {
        self.tracer.before(self.now, &self.nodes, &self.slab, ev);
        self.step(ev);
        self.tracer.after(self.now, &self.nodes, &self.slab, ev);
    }

    /// A run stopped at `t`, before handling `ev`. Responses already booked at their completion
    /// land up to a network trip after the stop: the window runs on for the longest trip, so
    /// that it holds every response it counts (microseconds of simulated time; the window is
    /// half-open), and is empty if the run stopped in warm-up.
    #[cold]
    #[inline(never)]
    pub(super) fn end_after_stop(&mut self, t: Nanos, ev: Event) {
        self.end = self.end.min(t + self.net.one_way + self.net.jitter + 1);
        self.traced_step(ev); // t < self.end
        self.event_loop(&mut |_, _| true);
        self.end = self.end.max(self.warmup);
    }

    #[inline(always)]
    pub(super) fn step(&mut self, ev: Event) {
        self.handle(ev);
        if self.nodes.iter().any(|n| n.server.has_followups()) {
            self.followups();
        }
    }

    /// What the nodes' servers left for the driver while handling an event: park attempts that
    /// found work, and cores that ran out of it (kept out of line: most events leave none).
    #[cold]
    #[inline(never)]
    pub(super) fn followups(&mut self) {
        for node in 0..self.nodes.len() as u16 {
            while let Some(core) = self.nodes[node as usize].server.take_aborted_park() {
                self.park_aborted(node, core);
            }
            while let Some((core, idle)) = self.nodes[node as usize].server.take_idled() {
                self.after_idle(node, core, idle);
            }
        }
    }

    /// A request reaches a node whose policies act on its arrival (`Node::arrival_hooks`): the
    /// IRQ work its packet brings (`server.irq.per_request`), then its credit controller's
    /// admission. Out of line: the default arrival path tests one flag and goes to the server.
    #[inline(never)]
    fn hooked_arrival(&mut self, req: u32, demand: u32) {
        let now = self.now;
        let node = self.slab[req].node as usize;
        if self.nodes[node].packet_irq {
            self.nodes[node].server.request_packet_irq(now, &mut self.slab, &mut self.evq);
        }
        if self.nodes[node].credit.is_none() {
            self.nodes[node].server.arrive(req, now, &mut self.slab, &mut self.evq);
        } else {
            self.credit_arrive(req, demand);
        }
    }

    /// Inlined into the loop: called once per event, its prologue and epilogue (the registers a
    /// function this size saves and restores) were 53 of `mmc`'s instructions per request.
    #[inline(always)]
    pub(super) fn handle(&mut self, ev: Event) {
        let now = self.now;
        match ev {
            Event::Generate { app } => self.generate(app),
            Event::ServerArrive { req, demand } => {
                let n = &mut self.nodes[self.slab[req].node as usize];
                if !n.arrival_hooks {
                    n.server.arrive(req, now, &mut self.slab, &mut self.evq);
                } else {
                    self.hooked_arrival(req, demand);
                }
            }
            Event::CoreDone { node, core, gen } => {
                let end = self.nodes[node as usize].server.slice_end(core, gen, now, &mut self.slab, &mut self.evq);
                self.after_slice(node, core, end);
            }
            Event::OverheadDone { node, core, gen } => {
                let end = self.nodes[node as usize].server.overhead_done(core, gen, now, &mut self.slab, &mut self.evq);
                self.after_slice(node, core, end);
            }
            Event::LockGranted { node, core, gen } => {
                let end = self.nodes[node as usize].server.lock_granted(core, gen, now, &mut self.slab, &mut self.evq);
                self.after_slice(node, core, end);
            }
            Event::DispatchDone { node } => self.nodes[node as usize].server.dispatch_done(now, &mut self.slab, &mut self.evq),
            Event::DispatcherWork { node, gen } => {
                if let Some(req) = self.nodes[node as usize].server.dispatcher_work(gen, now, &mut self.slab, &mut self.evq) {
                    self.respond(node, req);
                }
            }
            Event::StealDone { node, core } => {
                let idle = self.nodes[node as usize].server.steal_done(core, now, &mut self.slab, &mut self.evq);
                self.after_idle(node, core, idle);
            }
            Event::WakeDone { node, core } => {
                self.nodes[node as usize].parking.wakeups += 1;
                self.park_aborted(node, core);
                let idle = self.nodes[node as usize].server.wake_done(core, now, &mut self.slab, &mut self.evq);
                self.cores_changed(node);
                self.after_idle(node, core, idle);
            }
            Event::ParkCheck { node, core, epoch } => self.park_check(node, core, epoch),
            Event::Probe { node, core, victim, search } => {
                if let Some(idle) = self.nodes[node as usize].server.probe_event(core, victim, search, now, &mut self.slab, &mut self.evq) {
                    self.after_idle(node, core, idle);
                }
            }
            Event::SweepEnd { node, core, search } => self.sweep_end(node, core, search),
            Event::ResponseArrive { req, credits } => self.response(req, credits, now),
            Event::AllocTick { node } => self.alloc_tick(node),
            Event::Sample => self.sample(),
            Event::WarmupEnd => self.window_start(),
            Event::DropReply { req } => self.drop_reply(req),
            Event::Handler { node } => {
                let server = &mut self.nodes[node as usize].server;
                server.handler_lands(now, &mut self.slab, &mut self.evq);
                if let Some(gap) = server.next_irq_gap() {
                    self.evq.push(now + gap, Event::Handler { node });
                }
            }
            Event::CreditRequest { node, session, demand } => self.credit_request(node, session, demand),
            Event::CreditArrive { node, session, credits } => self.credits_reach_client(node, session, credits),
            Event::SedaRelease { session } => self.seda_release(session),
            Event::ClientTimeout { node, session } => self.client_timeout(node, session),
            Event::CreditTimer { node } => self.credit_timer(node),
            Event::DelayPoll { node } => self.delay_poll(node),
        }
    }
}
