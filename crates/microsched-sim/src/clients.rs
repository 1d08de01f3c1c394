//! Client sessions of a credit-based overload controller, as Breakwater's client
//! (`breakwater/src/bw_client.c`; `shared/reference/overload-control-and-core-allocation.md` §1.7).
//!
//! Per session: `granted` (the absolute credit count of the last response or credit message,
//! Breakwater's `win_avail`), `outstanding` (requests sent and not yet answered, `win_used`), a
//! FIFO queue of requests waiting for a credit (capacity `clients.queue_capacity`; a full queue
//! drops its *oldest* entry), and one client-side timer.
//!
//! * **Send path** (a new request): with a spare credit and an empty queue it is sent at once;
//!   otherwise it is queued and the queue is drained: expired head entries are dropped, then
//!   entries are sent while `outstanding < granted`. Every request carries the demand, the number
//!   of requests still queued after it.
//! * **Credit request**: a request that has to queue in a session holding no credit at all
//!   (`granted == 0`, nothing outstanding, so no response will bring any) triggers an explicit
//!   credit request carrying the demand, unless one is already awaiting an answer. That is the
//!   session's very first request (Breakwater's client sends its first WINUPDATE then), and at most
//!   one message per later drain episode (the server then knows the session is drained and
//!   answers through a wake-up; the request only refreshes its demand). Any credit information
//!   (response or credit message) ends the wait.
//! * **Responses and credit messages** set `granted` to the absolute count they carry (a response
//!   also frees its slot) and drain the queue.
//! * **Timeout**: a request that waited longer than `clients.timeout_us` for a credit is dropped at
//!   the client. One timer per session at most: it is armed for the head's expiry when the queue
//!   becomes non-empty and re-arms itself for the new head when it fires, so no timer is ever
//!   stale and nothing needs cancelling (a head sent before its expiry only makes the timer fire
//!   early and re-arm).
//! * Not modelled: Breakwater's `demand_sync` option (a zero-demand WINUPDATE when timeouts empty
//!   the queue; off by default in the code).
//!
//! The functions here decide; the simulator carries the decisions out ([`Out`]): it owns the
//! network, the slab and the counters.

use std::collections::VecDeque;

use microsched_core::Nanos;

use crate::requests::Slab;

/// Why a client dropped a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientDrop {
    /// Waited longer than the client timeout for a credit.
    Timeout,
    /// The oldest entry of a full queue.
    Overflow,
}

/// What a client does, for the simulator to carry out, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Out {
    /// Send request `req` to the server, reporting `demand`.
    Send { req: u32, demand: u32 },
    /// Request `req` is dropped at the client.
    Drop { req: u32, why: ClientDrop },
    /// Send an explicit credit request for `session`.
    CreditRequest { session: u32, demand: u32 },
    /// Arm `session`'s timer for `at`.
    Timer { session: u32, at: Nanos },
}

#[derive(Debug, Clone, Default)]
struct Session {
    granted: u32,
    outstanding: u32,
    queue: VecDeque<u32>,
    awaiting_credit: bool,
    timer_armed: bool,
}

#[derive(Debug)]
pub struct Clients {
    sessions: Vec<Session>,
    capacity: usize,
    timeout: Nanos,
    /// Requests waiting for credits, over all sessions.
    pub queued: u64,
}

impl Clients {
    pub fn new(sessions: u32, capacity: u32, timeout: Nanos) -> Self {
        // Queues grow to their working size once and keep it: no allocation per request.
        let reserve = (capacity as usize).min(16);
        let sessions = (0..sessions)
            .map(|_| Session { queue: VecDeque::with_capacity(reserve), ..Session::default() })
            .collect();
        Self { sessions, capacity: capacity.max(1) as usize, timeout, queued: 0 }
    }

    /// A new request `req` of `session` (already in the slab).
    pub fn submit(&mut self, session: u32, req: u32, now: Nanos, slab: &Slab, out: &mut Vec<Out>) {
        let s = &mut self.sessions[session as usize];
        if s.outstanding < s.granted && s.queue.is_empty() {
            s.outstanding += 1;
            out.push(Out::Send { req, demand: 0 });
            return;
        }
        if s.queue.len() >= self.capacity {
            let old = s.queue.pop_front().expect("full queue");
            self.queued -= 1;
            out.push(Out::Drop { req: old, why: ClientDrop::Overflow });
        }
        s.queue.push_back(req);
        self.queued += 1;
        self.drain(session, now, slab, out);
        let s = &mut self.sessions[session as usize];
        if !s.queue.is_empty() && s.granted == 0 && s.outstanding == 0 && !s.awaiting_credit {
            s.awaiting_credit = true;
            out.push(Out::CreditRequest { session, demand: s.queue.len() as u32 });
        }
    }

    /// A response (`response`: frees a slot) or an explicit credit message reaches `session`,
    /// carrying the absolute credit count `credits`.
    pub fn on_credits(&mut self, session: u32, credits: u32, response: bool, now: Nanos, slab: &Slab, out: &mut Vec<Out>) {
        let s = &mut self.sessions[session as usize];
        if response {
            debug_assert!(s.outstanding > 0, "a response for a session with nothing outstanding");
            s.outstanding = s.outstanding.saturating_sub(1);
        }
        s.granted = credits;
        s.awaiting_credit = false;
        if credits > 0 {
            self.drain(session, now, slab, out);
        }
    }

    /// `session`'s timer fires.
    pub fn on_timer(&mut self, session: u32, now: Nanos, slab: &Slab, out: &mut Vec<Out>) {
        self.sessions[session as usize].timer_armed = false;
        self.drain(session, now, slab, out);
    }

    /// Drops expired head entries, sends while credits remain, and keeps the timer armed for the
    /// head's expiry.
    fn drain(&mut self, session: u32, now: Nanos, slab: &Slab, out: &mut Vec<Out>) {
        let timeout = self.timeout;
        let s = &mut self.sessions[session as usize];
        while let Some(&head) = s.queue.front() {
            if now - slab[head].created <= timeout {
                break;
            }
            s.queue.pop_front();
            self.queued -= 1;
            out.push(Out::Drop { req: head, why: ClientDrop::Timeout });
        }
        while s.outstanding < s.granted {
            let Some(req) = s.queue.pop_front() else { break };
            self.queued -= 1;
            s.outstanding += 1;
            out.push(Out::Send { req, demand: s.queue.len() as u32 });
        }
        if let Some(&head) = s.queue.front() {
            if !s.timer_armed {
                s.timer_armed = true;
                out.push(Out::Timer { session, at: slab[head].created + timeout + 1 });
            }
        }
    }

    /// Requests waiting at `session`.
    #[cfg(test)]
    pub fn queued_at(&self, session: u32) -> usize {
        self.sessions[session as usize].queue.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::requests::Req;

    fn slab_with(created: &[Nanos]) -> (Slab, Vec<u32>) {
        let mut slab = Slab::default();
        let ids = created.iter().map(|&c| slab.insert(Req { created: c, ..Req::default() })).collect();
        (slab, ids)
    }

    #[test]
    fn first_request_asks_for_credits_then_credits_drain_the_queue() {
        let (slab, r) = slab_with(&[0, 1, 2]);
        let mut c = Clients::new(2, 16, 10_000);
        let mut out = vec![];
        c.submit(0, r[0], 0, &slab, &mut out);
        assert_eq!(out, vec![Out::Timer { session: 0, at: 10_001 }, Out::CreditRequest { session: 0, demand: 1 }]);
        out.clear();
        c.submit(0, r[1], 1, &slab, &mut out);
        assert!(out.is_empty(), "one credit request at a time, timer already armed: {out:?}");
        c.on_credits(0, 1, false, 5, &slab, &mut out);
        assert_eq!(out, vec![Out::Send { req: r[0], demand: 1 }]);
        out.clear();
        // The response brings two credits: the second queued request goes, then the third is
        // sent at once on submission.
        c.on_credits(0, 2, true, 6, &slab, &mut out);
        assert_eq!(out, vec![Out::Send { req: r[1], demand: 0 }]);
        out.clear();
        c.submit(0, r[2], 7, &slab, &mut out);
        assert_eq!(out, vec![Out::Send { req: r[2], demand: 0 }]);
        assert_eq!(c.queued, 0);
    }

    #[test]
    fn timeout_and_overflow_drop_the_oldest() {
        let (slab, r) = slab_with(&[0, 5, 6, 7]);
        let mut c = Clients::new(1, 2, 10);
        let mut out = vec![];
        c.submit(0, r[0], 0, &slab, &mut out);
        c.submit(0, r[1], 5, &slab, &mut out);
        out.clear();
        c.submit(0, r[2], 6, &slab, &mut out);
        assert_eq!(out, vec![Out::Drop { req: r[0], why: ClientDrop::Overflow }]);
        out.clear();
        // The timer armed for r[0] (at 11) fires: r[1] (created 5) is not yet expired at 11.
        c.on_timer(0, 11, &slab, &mut out);
        assert_eq!(out, vec![Out::Timer { session: 0, at: 16 }]);
        out.clear();
        c.on_timer(0, 16, &slab, &mut out);
        assert_eq!(out, vec![Out::Drop { req: r[1], why: ClientDrop::Timeout }, Out::Timer { session: 0, at: 17 }]);
        assert_eq!(c.queued_at(0), 1);
    }
}
