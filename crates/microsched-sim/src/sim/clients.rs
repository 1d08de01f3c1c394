//! The clients: request generation, sending (straight to the network or through the session's
//! credit state), resending to the next replica, and responses reaching their clients.
//!
//! Invariants: every generated request is counted once as completed or dropped when its response
//! (or its client-side drop) reaches the client, and removed from the slab then; a single
//! application's arrivals take the queue's in-order lane.

use microsched_core::overload::client::{ClientDrop, Out};
use microsched_core::Nanos;

use super::Sim;
use crate::trace::Tracer;
use crate::app::PREFETCH_MIN_SESSIONS;
use crate::events::{Event, ARRIVAL_LANE};
use crate::requests::{Req, Stamps};

impl<T: Tracer> Sim<T> {
    /// The application a session numbered across applications belongs to, and its number
    /// within it.
    #[inline]
    pub(super) fn app_of(&self, session: u32) -> (usize, u32) {
        if self.apps.len() == 1 {
            // One application (most scenarios): its sessions are numbered from 0, no search.
            return (0, session);
        }
        let app = self.apps.iter().rposition(|a| a.session_base <= session).expect("session 0 is the first app's");
        (app, session - self.apps[app].session_base)
    }

    /// Carries out what an application's clients towards `node` decided.
    #[inline(always)]
    pub(super) fn client_outs(&mut self, app: usize, node: u16) {
        let now = self.now;
        let mut out = std::mem::take(&mut self.apps[app].out);
        let base = self.apps[app].session_base;
        for &o in &out {
            match o {
                Out::Send { req, demand } => {
                    // The server-side session state is needed one network trip from now.
                    if let Some(c) = &self.nodes[node as usize].credit {
                        if self.apps[app].sessions >= PREFETCH_MIN_SESSIONS {
                            c.ctl.prefetch(self.slab[req].flow);
                        }
                    }
                    self.net.send(now, Event::ServerArrive { req, demand }, &mut self.evq)
                }
                Out::Drop { req, why } => {
                    let r = self.slab[req];
                    let replicas = self.nodes.len() as u16;
                    if why == ClientDrop::Timeout && self.apps[app].retry_timeouts && r.tries < self.apps[app].retries && replicas > 1 {
                        // No credit in time: to the next replica, with the local failure.
                        if self.measuring {
                            self.apps[app].retried += 1;
                            if let Some(f) = &mut self.failure_reply {
                                f.delay.record(now - r.created).expect("auto-resizing histogram");
                                f.sum += u128::from(now - r.created);
                            }
                        }
                        self.resend(req);
                        continue;
                    }
                    let st = self.slab.stamps(req);
                    let mut r = self.slab.remove(req);
                    r.dropped = true;
                    let a = &mut self.apps[app];
                    a.dropped += 1;
                    self.interval.drops += 1;
                    if self.measuring {
                        a.recorder.dropped(r.rtype as usize);
                        match why {
                            ClientDrop::Timeout => a.client_timeouts += 1,
                            ClientDrop::Overflow => a.client_overflows += 1,
                        }
                    }
                    if let Some(log) = &mut self.log {
                        log.push(&r, &st, now);
                    }
                }
                Out::CreditRequest { session, demand } => {
                    if self.measuring {
                        self.apps[app].credit_requests += 1;
                    }
                    self.net.send(now, Event::CreditRequest { node, session: base + session, demand }, &mut self.evq);
                }
                Out::Timer { session, at } => self.evq.push(at, Event::ClientTimeout { node, session: base + session }),
            }
        }
        out.clear();
        self.apps[app].out = out;
    }

    pub(super) fn generate(&mut self, app: u16) {
        let a = &mut self.apps[app as usize];
        let (session, rtype, service, has_program) = a.draw(&mut self.ops);
        let node = a.home_node(session, self.nodes.len() as u16);
        if a.burst_cap != 0 {
            // `clients.burst = "credits"` (off by default) takes its own path, out of line, so
            // that this one is what it was before bursts: one test of a flag.
            self.generate_burst(app, session, node, rtype, service, has_program);
            return;
        }
        let (flow, id) = a.count_generated(session, rtype, self.measuring);
        self.emit(app, session, flow, id, node, rtype, service, has_program);
        self.schedule_next_arrival(app);
    }

    /// `clients.burst = "credits"`: this arrival and the next `burst - 1` of the application
    /// leave now, together, as one burst of the session's free credits (counted before the
    /// first of them is sent).
    #[cold]
    #[inline(never)]
    fn generate_burst(&mut self, app: u16, session: u32, node: u16, rtype: u16, service: Nanos, has_program: bool) {
        let a = &mut self.apps[app as usize];
        let burst = a.clients[node as usize].free_credits(session).clamp(1, a.burst_cap);
        let (flow, id) = a.count_generated(session, rtype, self.measuring);
        self.emit(app, session, flow, id, node, rtype, service, has_program);
        for _ in 1..burst {
            let a = &mut self.apps[app as usize];
            let (rtype, service, has_program) = a.draw_request(&mut self.ops);
            let (flow, id) = a.count_generated(session, rtype, self.measuring);
            self.emit(app, session, flow, id, node, rtype, service, has_program);
        }
        let a = &mut self.apps[app as usize];
        for _ in 1..burst {
            a.arrivals.next();
        }
        self.schedule_next_arrival(app);
    }

    /// The application's next arrival, if it falls before the end.
    #[inline(always)]
    fn schedule_next_arrival(&mut self, app: u16) {
        if let Some(next) = self.apps[app as usize].arrivals.next() {
            if next < self.end {
                self.schedule_arrival(app, next);
            }
        }
    }

    /// A new request of `session` (counted by its application: `App::count_generated`) leaves
    /// its client now, for `node`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn emit(&mut self, app: u16, session: u32, flow: u32, id: u64, node: u16, rtype: u16, service: Nanos, has_program: bool) {
        let req = Req { created: self.now, service, session, flow, rtype, app, node, has_program, ..Req::default() };
        self.interval.arrivals += 1;
        let slot = self.slab.insert(req, id);
        if has_program {
            for n in &mut self.nodes {
                n.server.set_program(slot, &self.ops);
            }
        }
        self.send(slot, app as usize, node, session);
    }

    /// A single application's arrivals come in time order: they take the queue's arrival lane.
    #[inline(always)]
    pub(super) fn schedule_arrival(&mut self, app: u16, t: Nanos) {
        if self.apps.len() == 1 {
            self.evq.push_in_order(ARRIVAL_LANE, t, Event::Generate { app });
        } else {
            self.evq.push(t, Event::Generate { app });
        }
    }

    /// A request leaves its client for its node: straight onto the network, or through the
    /// session's credit state.
    #[inline(always)]
    pub(super) fn send(&mut self, slot: u32, app: usize, node: u16, session: u32) {
        if !self.rate_limit_admits(slot) {
            return;
        }
        self.send_admitted(slot, app, node, session);
    }

    #[inline(always)]
    pub(super) fn send_admitted(&mut self, slot: u32, app: usize, node: u16, session: u32) {
        if self.nodes[node as usize].credit.is_none() {
            self.net.send(self.now, Event::ServerArrive { req: slot, demand: 0 }, &mut self.evq);
        } else {
            let a = &mut self.apps[app];
            a.clients[node as usize].submit(session, slot, self.now, &mut a.out);
            self.client_outs(app, node);
        }
    }

    /// A request its client's rate limit refused: dropped at the client (SEDA).
    pub(super) fn reject(&mut self, slot: u32) {
        let st = self.slab.stamps(slot);
        let mut r = self.slab.remove(slot);
        r.dropped = true;
        let a = &mut self.apps[r.app as usize];
        a.dropped += 1;
        self.interval.drops += 1;
        if self.measuring {
            a.recorder.dropped(r.rtype as usize);
        }
        if let Some(log) = &mut self.log {
            log.push(&r, &st, self.now);
        }
    }

    /// Sends a failed request again, to the next replica: a fresh attempt of the same request.
    pub(super) fn resend(&mut self, slot: u32) {
        let r = self.slab[slot];
        let replicas = self.nodes.len() as u16;
        self.slab.stamp(slot, |s| *s = Stamps { id: s.id, ..Stamps::default() });
        let again = Req { created: r.created, service: r.service, session: r.session, flow: r.flow, rtype: r.rtype, app: r.app, has_program: r.has_program, ..Req::default() };
        let node = (r.node + 1) % replicas;
        self.slab[slot] = Req { node, tries: r.tries + 1, ..again };
        self.send(slot, r.app as usize, node, r.session);
    }

    /// A response (or a failure reply) reaches its client. A failure with retries left is sent
    /// again, to the next replica. Inlined (at its completion, most responses are booked here):
    /// the call's register saves were 2.5 % of `mmc`'s instructions with `Slab::insert`'s.
    #[inline(always)]
    pub(super) fn response(&mut self, slot: u32, credits: u32, now: Nanos) {
        let (app, node, dropped, tries) = {
            let r = &self.slab[slot];
            (r.app as usize, r.node, r.dropped, r.tries)
        };
        let credited = self.nodes[node as usize].credit.is_some();
        let replicas = self.nodes.len() as u16;
        if dropped && self.measuring {
            if let Some(f) = &mut self.failure_reply {
                let created = self.slab[slot].created;
                f.delay.record(now - created).expect("auto-resizing histogram");
                f.sum += u128::from(now - created);
            }
        }
        if dropped && tries < self.apps[app].retries && replicas > 1 {
            let r = self.slab[slot];
            if credited {
                self.client_credits(app, r.node, r.session, credits);
            }
            if self.measuring {
                self.apps[app].retried += 1;
            }
            self.resend(slot);
            return;
        }
        self.rate_limit_observe(slot, now);
        let r = &self.slab[slot];
        let session = r.session;
        let a = &mut self.apps[app];
        if r.dropped {
            a.dropped += 1;
            self.interval.drops += 1;
            if self.measuring {
                a.recorder.dropped(r.rtype as usize);
            }
        } else {
            a.completed += 1;
            self.interval.completions += 1;
            if self.measuring {
                a.recorder.completed(r.rtype as usize, now - r.created, r.queued_ns, r.service);
            }
        }
        if let Some(log) = &mut self.log {
            log.push(r, &self.slab.stamps(slot), now);
        }
        self.slab.remove(slot);
        if credited {
            self.client_credits(app, node, session, credits);
        }
    }

    /// The credits a response carries reach its session's client state.
    pub(super) fn client_credits(&mut self, app: usize, node: u16, session: u32, credits: u32) {
        let a = &mut self.apps[app];
        a.clients[node as usize].on_credits(session, credits, true, self.now, &mut a.out);
        self.client_outs(app, node);
    }

    /// Credits sent by a node's controller reach their session's client state.
    pub(super) fn credits_reach_client(&mut self, node: u16, session: u32, credits: u32) {
        let (app, local) = self.app_of(session);
        let a = &mut self.apps[app];
        a.clients[node as usize].on_credits(local, credits, false, self.now, &mut a.out);
        self.client_outs(app, node);
    }

    /// A session's client-side timer (credit wait, timeout) fires.
    pub(super) fn client_timeout(&mut self, node: u16, session: u32) {
        let (app, local) = self.app_of(session);
        let a = &mut self.apps[app];
        a.clients[node as usize].on_timer(local, self.now, &mut a.out);
        self.client_outs(app, node);
    }
}
