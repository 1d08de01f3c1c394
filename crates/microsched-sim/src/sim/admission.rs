//! Admission: the node-side credit glue (credit-based overload controllers) and SEDA's
//! client-side rate limiters. The only file of the driver that names overload policies.
//!
//! Invariants: a node without a credit controller does no credit work at all; the controller is
//! told every change of active cores, and every wake-up it produces becomes a credit message.

use microsched_core::overload::seda::{Admit, Seda};
use microsched_core::overload::Admission;
use microsched_core::scenario::{DelaySignal, OverloadCfg, Scenario};
use microsched_core::time::us;
use microsched_core::Nanos;

use super::Sim;
use crate::trace::Tracer;
use crate::app::App;
use crate::events::Event;
use crate::node::Node;
use crate::server::StartDrop;

/// SEDA's client-side rate limiters, sessions numbered across applications.
pub(super) type RateLimits = Seda;

/// Whether the clients hold requests for credits (a credit-based controller on the nodes).
pub(super) fn clients_take_credits(sc: &Scenario) -> bool {
    !matches!(sc.policy.overload, OverloadCfg::None | OverloadCfg::Seda(_))
}

/// SEDA's rate limiters, each session starting at its share of its application's rate.
pub(super) fn rate_limits(sc: &Scenario, apps: &[App], seed: u64) -> Option<RateLimits> {
    match &sc.policy.overload {
        OverloadCfg::Seda(c) => {
            let share = apps.iter().flat_map(|a| std::iter::repeat_n(a.initial_rps / a.sessions.max(1) as f64, a.sessions as usize));
            Some(Seda::new(c, share.collect(), seed))
        }
        _ => None,
    }
}

/// Breakwater's latency budget: requests that waited longer are dropped when they start.
pub(super) fn install_start_drop(sc: &Scenario, nodes: &mut [Node]) {
    if let OverloadCfg::Breakwater(b) = &sc.policy.overload {
        if let Some(budget) = b.latency_budget_us {
            let exact = sc.server.delay_signal == DelaySignal::Exact;
            for n in nodes {
                n.server.install_start_drop(StartDrop { budget: us(budget), exact, sampled: 0, drops: 0 });
            }
        }
    }
}

impl<T: Tracer> Sim<T> {
    /// The congestion signal a node's overload controller reads now: the cached sample, or
    /// measured.
    #[inline]
    pub(super) fn delay_signal(&self, node: u16) -> Nanos {
        let n = &self.nodes[node as usize];
        match &n.credit {
            Some(c) if !c.exact => c.delay,
            _ => n.server.max_delay(self.now, &self.slab),
        }
    }

    /// A request reaches a node with a credit controller: admitted into the queues, or dropped
    /// by AQM and answered with a failure reply after the packet cost.
    pub(super) fn credit_arrive(&mut self, req: u32, demand: u32) {
        let now = self.now;
        let node = self.slab[req].node;
        let delay = self.delay_signal(node);
        let flow = self.slab[req].flow;
        let n = &mut self.nodes[node as usize];
        let c = n.credit.as_mut().expect("credit path");
        match c.ctl.on_request(now, flow, demand, delay) {
            Admission::Admit => n.server.arrive(req, now, &mut self.slab, &mut self.evq),
            Admission::Drop => {
                if self.measuring {
                    c.aqm_drops += 1;
                }
                let pc = c.packet_cost;
                self.slab.stamp(req, |s| {
                    s.arrive = now;
                    s.start = now;
                });
                self.slab[req].dropped = true;
                if pc == 0 {
                    self.drop_reply(req);
                } else {
                    self.evq.push(now + pc, Event::DropReply { req });
                }
            }
        }
        self.send_wakeups(node);
    }

    /// The failure reply of an AQM-dropped request leaves, with credits.
    pub(super) fn drop_reply(&mut self, req: u32) {
        let now = self.now;
        self.slab.stamp(req, |s| s.done = now);
        self.tracer.respond(&self.slab, self.slab[req].node, req, false, now, true);
        let credits = self.credit_response(req, true);
        self.net.send(now, Event::ResponseArrive { req, credits }, &mut self.evq);
        self.send_wakeups(self.slab[req].node);
    }

    /// The controller's credits for the response to `req` leaving now.
    #[inline(always)]
    pub(super) fn credit_response(&mut self, req: u32, dropped: bool) -> u32 {
        let node = self.slab[req].node;
        let delay = self.delay_signal(node);
        let flow = self.slab[req].flow;
        let c = self.nodes[node as usize].credit.as_mut().expect("credit path");
        c.ctl.on_response(self.now, flow, dropped, delay)
    }

    /// Sends the explicit credit messages of the sessions a node's controller woke.
    #[inline(always)]
    pub(super) fn send_wakeups(&mut self, node: u16) {
        match &self.nodes[node as usize].credit {
            Some(c) if c.ctl.has_wakeups() => self.send_woken(node),
            _ => {}
        }
    }

    pub(super) fn send_woken(&mut self, node: u16) {
        let Some(c) = &mut self.nodes[node as usize].credit else { return };
        c.ctl.take_wakeups(&mut c.wakeups);
        if self.measuring {
            c.credit_messages += c.wakeups.len() as u64;
        }
        for (session, credits) in c.wakeups.drain(..) {
            self.net.send(self.now, Event::CreditArrive { node, session, credits }, &mut self.evq);
        }
    }

    /// Tells a node's credit controller when its number of active cores changed.
    pub(super) fn cores_changed(&mut self, node: u16) {
        let n = &mut self.nodes[node as usize];
        if let Some(c) = &mut n.credit {
            let active = n.server.active_count() as u32;
            if active != c.active_reported {
                c.active_reported = active;
                c.ctl.on_cores_changed(self.now, active);
            }
        }
    }

    /// SEDA's session `flow` sends the requests that waited for a token and drops those that
    /// waited too long.
    #[cold]
    pub(super) fn seda_release(&mut self, flow: u32) {
        let (mut sent, mut dropped) = (Vec::new(), Vec::new());
        let s = self.seda.as_mut().expect("SEDA events need SEDA");
        s.release(flow, self.now, &mut sent, &mut dropped);
        if let Some(at) = s.next_release(flow) {
            self.evq.push(at, Event::SedaRelease { session: flow });
        }
        for slot in dropped {
            self.reject(slot as u32);
        }
        for slot in sent {
            let slot = slot as u32;
            let r = self.slab[slot];
            self.send_admitted(slot, r.app as usize, r.node, r.session);
        }
    }

    /// A session's credit request reaches its node's controller.
    pub(super) fn credit_request(&mut self, node: u16, session: u32, demand: u32) {
        let now = self.now;
        let c = self.nodes[node as usize].credit.as_mut().expect("credit events need a credit controller");
        if let Some(credits) = c.ctl.on_credit_request(now, session, demand) {
            if self.measuring {
                c.credit_messages += 1;
            }
            self.net.send(now, Event::CreditArrive { node, session, credits }, &mut self.evq);
        }
        self.send_wakeups(node);
    }

    /// The controller's own timer.
    pub(super) fn credit_timer(&mut self, node: u16) {
        let now = self.now;
        let delay = self.delay_signal(node);
        let c = self.nodes[node as usize].credit.as_mut().expect("credit events need a credit controller");
        c.ctl.on_timer(now, delay);
        if let Some(iv) = c.ctl.timer_interval() {
            self.evq.push(now + iv, Event::CreditTimer { node });
        }
        self.send_wakeups(node);
    }

    /// The congestion signal sampled at its own pace (an allocator without an interval).
    pub(super) fn delay_poll(&mut self, node: u16) {
        let now = self.now;
        let n = &mut self.nodes[node as usize];
        let d = n.server.max_delay(now, &self.slab);
        let c = n.credit.as_mut().expect("credit events need a credit controller");
        c.delay = d;
        n.server.sample_delay_signal(d);
        if let Some(p) = c.poll {
            self.evq.push(now + p, Event::DelayPoll { node });
        }
    }

    /// A request leaving its client passes SEDA's rate limit of its session: true if it may go
    /// now; otherwise it waits for a token (a release is scheduled) or is dropped.
    #[inline(always)]
    pub(super) fn rate_limit_admits(&mut self, slot: u32) -> bool {
        let Some(s) = &mut self.seda else { return true };
        let flow = self.slab[slot].flow;
        match s.admit(flow, slot as u64, self.now) {
            Admit::Send => true,
            Admit::Drop => {
                self.reject(slot);
                false
            }
            Admit::Wait => {
                if let Some(at) = s.next_release(flow) {
                    self.evq.push(at, Event::SedaRelease { session: flow });
                }
                false
            }
        }
    }

    /// A completed request's latency reaches its session's rate limiter (SEDA).
    #[inline(always)]
    pub(super) fn rate_limit_observe(&mut self, slot: u32, now: Nanos) {
        if let Some(s) = &mut self.seda {
            let r = &self.slab[slot];
            if !r.dropped {
                s.observe(r.flow, slot as u64, r.created, now);
            }
        }
    }
}
