//! Client sessions of a credit-based overload controller, as Breakwater's client
//! (`breakwater/src/bw_client.c`; reference §1.7), the load generator's side of the protocol.
//!
//! Per session: `granted` (the absolute credit count of the last response or credit message),
//! `outstanding` (sent, not answered), a FIFO queue of requests waiting for a credit (capacity
//! `clients.queue_capacity`; a full queue drops its *oldest* entry), one timer.
//!
//! * A new request is sent at once with a spare credit and an empty queue; otherwise it is
//!   queued and the queue drained: expired head entries (older than `clients.timeout_us`) are
//!   dropped, then entries are sent while `outstanding < granted`, each carrying the demand (the
//!   requests still queued after it).
//! * A session holding no credit at all with requests queued sends one explicit credit request
//!   (Breakwater's first WINUPDATE); it asks again only after an answer, or after
//!   [`CREDIT_RETRY_NS`] without one (a lost datagram must not stall a session forever).
//! * Responses and credit messages set `granted` and drain the queue.
//! * Without a credit controller every request is sent at once.
//!
//! The functions decide; the load generator carries the decisions ([`Out`]) out.

use std::collections::VecDeque;

use microsched_core::Nanos;

/// Re-ask for credits after this long without an answer.
pub const CREDIT_RETRY_NS: Nanos = 5_000_000;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientDrop {
    Timeout,
    Overflow,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Out {
    Send { req: u64, demand: u32 },
    Drop { req: u64, why: ClientDrop },
    CreditRequest { session: u32, demand: u32 },
    Timer { session: u32, at: Nanos },
}

#[derive(Debug, Clone, Default)]
struct Session {
    granted: u32,
    outstanding: u32,
    /// (request, creation time)
    queue: VecDeque<(u64, Nanos)>,
    asked_at: Option<Nanos>,
    timer_armed: bool,
}

#[derive(Debug)]
pub struct Clients {
    sessions: Vec<Session>,
    capacity: usize,
    timeout: Nanos,
    credit_based: bool,
    /// Requests waiting for credits, over all sessions.
    pub queued: u64,
}

impl Clients {
    pub fn new(sessions: u32, capacity: u32, timeout: Nanos, credit_based: bool) -> Self {
        Self {
            sessions: vec![Session::default(); sessions as usize],
            capacity: capacity.max(1) as usize,
            timeout,
            credit_based,
            queued: 0,
        }
    }

    /// Credits a session got at connect.
    pub fn set_granted(&mut self, session: u32, credits: u32) {
        self.sessions[session as usize].granted = credits;
    }

    pub fn submit(&mut self, session: u32, req: u64, now: Nanos, out: &mut Vec<Out>) {
        let credit_based = self.credit_based;
        let s = &mut self.sessions[session as usize];
        if !credit_based || (s.outstanding < s.granted && s.queue.is_empty()) {
            s.outstanding += 1;
            out.push(Out::Send { req, demand: 0 });
            return;
        }
        if s.queue.len() >= self.capacity {
            let (old, _) = s.queue.pop_front().expect("full queue");
            self.queued -= 1;
            out.push(Out::Drop { req: old, why: ClientDrop::Overflow });
        }
        s.queue.push_back((req, now));
        self.queued += 1;
        self.drain(session, now, out);
        let s = &mut self.sessions[session as usize];
        let may_ask = s.asked_at.is_none_or(|t| now.saturating_sub(t) >= CREDIT_RETRY_NS);
        if !s.queue.is_empty() && s.granted == 0 && s.outstanding == 0 && may_ask {
            s.asked_at = Some(now);
            out.push(Out::CreditRequest { session, demand: s.queue.len() as u32 });
        }
    }

    /// A response (`response`: frees a slot) or a credit message with the absolute `credits`.
    pub fn on_credits(&mut self, session: u32, credits: u32, response: bool, now: Nanos, out: &mut Vec<Out>) {
        let s = &mut self.sessions[session as usize];
        if response {
            s.outstanding = s.outstanding.saturating_sub(1);
        }
        if !self.credit_based {
            return;
        }
        s.granted = credits;
        s.asked_at = None;
        if credits > 0 {
            self.drain(session, now, out);
        }
    }

    /// A sent request will never be answered (timed out in flight): its slot is freed.
    pub fn forget(&mut self, session: u32) {
        let s = &mut self.sessions[session as usize];
        s.outstanding = s.outstanding.saturating_sub(1);
    }

    pub fn on_timer(&mut self, session: u32, now: Nanos, out: &mut Vec<Out>) {
        self.sessions[session as usize].timer_armed = false;
        self.drain(session, now, out);
    }

    fn drain(&mut self, session: u32, now: Nanos, out: &mut Vec<Out>) {
        let timeout = self.timeout;
        let s = &mut self.sessions[session as usize];
        while let Some(&(head, created)) = s.queue.front() {
            if now.saturating_sub(created) <= timeout {
                break;
            }
            s.queue.pop_front();
            self.queued -= 1;
            out.push(Out::Drop { req: head, why: ClientDrop::Timeout });
        }
        while s.outstanding < s.granted {
            let Some((req, _)) = s.queue.pop_front() else { break };
            self.queued -= 1;
            s.outstanding += 1;
            out.push(Out::Send { req, demand: s.queue.len() as u32 });
        }
        if let Some(&(_, created)) = s.queue.front() {
            if !s.timer_armed {
                s.timer_armed = true;
                out.push(Out::Timer { session, at: created + timeout + 1 });
            }
        }
    }

    /// Takes every queued request out (end of the run).
    pub fn take_queued(&mut self) -> Vec<u64> {
        let mut v = Vec::new();
        for s in &mut self.sessions {
            v.extend(s.queue.drain(..).map(|(r, _)| r));
        }
        self.queued = 0;
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_request_asks_for_credits_then_credits_drain_the_queue() {
        let mut c = Clients::new(2, 16, 10_000, true);
        let mut out = vec![];
        c.submit(0, 0, 0, &mut out);
        assert_eq!(out, vec![Out::Timer { session: 0, at: 10_001 }, Out::CreditRequest { session: 0, demand: 1 }]);
        out.clear();
        c.submit(0, 1, 1, &mut out);
        assert!(out.is_empty(), "{out:?}");
        c.on_credits(0, 1, false, 5, &mut out);
        assert_eq!(out, vec![Out::Send { req: 0, demand: 1 }]);
        out.clear();
        c.on_credits(0, 2, true, 6, &mut out);
        assert_eq!(out, vec![Out::Send { req: 1, demand: 0 }]);
        out.clear();
        c.submit(0, 2, 7, &mut out);
        assert_eq!(out, vec![Out::Send { req: 2, demand: 0 }]);
        assert_eq!(c.queued, 0);
    }

    #[test]
    fn overflow_and_timeout_drop_the_oldest_and_no_credits_means_send_at_once() {
        let mut c = Clients::new(1, 2, 10, true);
        let mut out = vec![];
        c.submit(0, 0, 0, &mut out);
        c.submit(0, 1, 5, &mut out);
        out.clear();
        c.submit(0, 2, 6, &mut out);
        assert_eq!(out, vec![Out::Drop { req: 0, why: ClientDrop::Overflow }]);
        out.clear();
        c.on_timer(0, 16, &mut out);
        assert_eq!(out[0], Out::Drop { req: 1, why: ClientDrop::Timeout });
        let mut none = Clients::new(1, 2, 10, false);
        out.clear();
        for r in 0..5 {
            none.submit(0, r, 0, &mut out);
        }
        assert!(out.iter().all(|o| matches!(o, Out::Send { .. })) && out.len() == 5);
    }
}
