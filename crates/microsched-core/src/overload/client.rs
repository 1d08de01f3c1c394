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
//! * **Lossy networks**: with `credit_retry = Some(t)` a session whose credit request got no
//!   answer within `t` may ask again (the real load generator over UDP); with `None` it waits
//!   (the simulator's network loses nothing).
//!
//! Pure state machine, shared by the simulator and the real load generator: it decides, the
//! driver carries the decisions out ([`Out`]); it owns the network, the requests and the
//! counters. `R` is the driver's request handle.

use crate::Nanos;

/// Why a client dropped a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientDrop {
    /// Waited longer than the client timeout for a credit.
    Timeout,
    /// The oldest entry of a full queue.
    Overflow,
}

/// What a client does, for the driver to carry out, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Out<R> {
    /// Send request `req` to the server, reporting `demand`.
    Send { req: R, demand: u32 },
    /// Request `req` is dropped at the client.
    Drop { req: R, why: ClientDrop },
    /// Send an explicit credit request for `session`.
    CreditRequest { session: u32, demand: u32 },
    /// Arm `session`'s timer for `at`.
    Timer { session: u32, at: Nanos },
}

/// End of the free list.
const NIL: u32 = u32::MAX;
/// `Session::flags` bits, above the queue length.
const TIMER_ARMED: u32 = 1 << 31;
/// A credit request is awaiting an answer.
const ASKED: u32 = 1 << 30;
/// A credit request was ever sent (for `first_request_only`).
const ASKED_EVER: u32 = 1 << 29;
/// The queue length's bits: a queue is capped below 2^29 entries (8 GiB of entries).
const LEN: u32 = ASKED_EVER - 1;

/// Kept to 16 bytes, all zero for a session that never sent anything: with 100 000 sessions the
/// simulator touches a random session per event, so what decides its speed is how many sessions
/// fit in the cache (four a cache line); and the table is allocated zeroed, so the memory of
/// sessions never used is never touched (the OS backs a page only when one of its sessions is
/// written).
#[derive(Debug, Clone, Copy, Default, bytemuck::Zeroable)]
struct Session {
    granted: u32,
    outstanding: u32,
    /// The queue: a circular chain through the shared node pool; this is its newest entry's
    /// index + 1 (0: empty), and the newest's `next` is the oldest.
    tail: u32,
    /// Queued entries (`LEN` bits), `TIMER_ARMED`, `ASKED` and `ASKED_EVER`.
    flags: u32,
}

const _: () = assert!(std::mem::size_of::<Session>() == 16);

impl Session {
    #[inline]
    fn len(&self) -> u32 {
        self.flags & LEN
    }
}

#[derive(Debug, Clone, Copy)]
struct Node<R> {
    req: R,
    created: Nanos,
    next: u32,
}

#[derive(Debug)]
pub struct Clients<R> {
    sessions: Vec<Session>,
    /// When each session's unanswered credit request was sent: kept only with `credit_retry`
    /// (the real load generator; the simulator only needs the `ASKED` flag).
    asked_at: Vec<Nanos>,
    /// Queue entries of every session; freed nodes are reused first, so the pool grows to the
    /// most requests ever queued at once, not with the number of sessions.
    nodes: Vec<Node<R>>,
    free: u32,
    capacity: usize,
    timeout: Nanos,
    /// Without a credit-based controller every request is sent at once.
    credit_based: bool,
    credit_retry: Option<Nanos>,
    /// Only a session's very first request may ask for credit explicitly (the CoreSync
    /// artifact's client); later drains wait for the server's wake-up.
    first_request_only: bool,
    /// Requests waiting for credits, over all sessions.
    pub queued: u64,
}

impl<R: Copy> Clients<R> {
    pub fn new(sessions: u32, capacity: u32, timeout: Nanos, credit_based: bool, credit_retry: Option<Nanos>) -> Self {
        Self {
            sessions: bytemuck::zeroed_vec(sessions as usize),
            asked_at: if credit_retry.is_some() { vec![0; sessions as usize] } else { Vec::new() },
            nodes: Vec::new(),
            free: NIL,
            capacity: capacity.clamp(1, LEN) as usize,
            timeout,
            credit_based,
            credit_retry,
            first_request_only: false,
            queued: 0,
        }
    }

    /// See `clients.credit_requests = "first_only"`.
    pub fn with_first_request_only(mut self, on: bool) -> Self {
        self.first_request_only = on;
        self
    }

    /// A hint: a request of `session` is coming (see [`super::CreditController::prefetch`]).
    pub fn prefetch(&self, session: u32) {
        if let Some(s) = self.sessions.get(session as usize) {
            super::prefetch(s);
        }
    }

    /// Credits a session got when it connected.
    pub fn set_granted(&mut self, session: u32, credits: u32) {
        self.sessions[session as usize].granted = credits;
    }

    fn push_back(&mut self, session: u32, req: R, created: Nanos) {
        let node = Node { req, created, next: NIL };
        let i = if self.free == NIL {
            self.nodes.push(node);
            (self.nodes.len() - 1) as u32
        } else {
            let i = self.free;
            self.free = self.nodes[i as usize].next;
            self.nodes[i as usize] = node;
            i
        };
        let s = &mut self.sessions[session as usize];
        if s.tail == 0 {
            self.nodes[i as usize].next = i;
        } else {
            let t = (s.tail - 1) as usize;
            self.nodes[i as usize].next = self.nodes[t].next;
            self.nodes[t].next = i;
        }
        s.tail = i + 1;
        s.flags += 1;
        self.queued += 1;
    }

    /// The oldest entry's pool index.
    #[inline]
    fn head(&self, session: u32) -> Option<usize> {
        let t = self.sessions[session as usize].tail;
        (t != 0).then(|| self.nodes[(t - 1) as usize].next as usize)
    }

    fn front(&self, session: u32) -> Option<(R, Nanos)> {
        self.head(session).map(|h| (self.nodes[h].req, self.nodes[h].created))
    }

    fn pop_front(&mut self, session: u32) -> Option<R> {
        let h = self.head(session)?;
        let s = &mut self.sessions[session as usize];
        let t = (s.tail - 1) as usize;
        if h == t {
            s.tail = 0;
        } else {
            self.nodes[t].next = self.nodes[h].next;
        }
        s.flags -= 1;
        self.queued -= 1;
        self.nodes[h].next = self.free;
        self.free = h as u32;
        Some(self.nodes[h].req)
    }

    /// A new request `req` of `session`, created at `now`.
    pub fn submit(&mut self, session: u32, req: R, now: Nanos, out: &mut Vec<Out<R>>) {
        let s = &mut self.sessions[session as usize];
        if !self.credit_based || (s.outstanding < s.granted && s.len() == 0) {
            s.outstanding += 1;
            out.push(Out::Send { req, demand: 0 });
            return;
        }
        if s.len() as usize >= self.capacity {
            let old = self.pop_front(session).expect("full queue");
            out.push(Out::Drop { req: old, why: ClientDrop::Overflow });
        }
        self.push_back(session, req, now);
        self.drain(session, now, out);
        let s = &mut self.sessions[session as usize];
        let may_ask = (s.flags & ASKED == 0
            || self.credit_retry.is_some_and(|r| now.saturating_sub(self.asked_at[session as usize]) >= r))
            // The artifact's client never asks again, not even to re-send a lost ask (it runs
            // over TCP): the server leaves an ask it cannot serve unanswered and wakes the
            // session from its drained list later, so a retry would be most of the asks.
            && !(self.first_request_only && s.flags & ASKED_EVER != 0);
        if s.len() > 0 && s.granted == 0 && s.outstanding == 0 && may_ask {
            s.flags |= ASKED | ASKED_EVER;
            if let Some(at) = self.asked_at.get_mut(session as usize) {
                *at = now;
            }
            out.push(Out::CreditRequest { session, demand: s.len() });
        }
    }

    /// A response (`response`: frees a slot) or an explicit credit message reaches `session`,
    /// carrying the absolute credit count `credits`.
    pub fn on_credits(&mut self, session: u32, credits: u32, response: bool, now: Nanos, out: &mut Vec<Out<R>>) {
        let s = &mut self.sessions[session as usize];
        if response {
            s.outstanding = s.outstanding.saturating_sub(1);
        }
        if !self.credit_based {
            return;
        }
        s.granted = credits;
        s.flags &= !ASKED;
        if credits > 0 {
            self.drain(session, now, out);
        }
    }

    /// A sent request will never be answered (timed out in flight): its slot is freed.
    pub fn forget(&mut self, session: u32) {
        let s = &mut self.sessions[session as usize];
        s.outstanding = s.outstanding.saturating_sub(1);
    }

    /// `session`'s timer fires.
    pub fn on_timer(&mut self, session: u32, now: Nanos, out: &mut Vec<Out<R>>) {
        self.sessions[session as usize].flags &= !TIMER_ARMED;
        self.drain(session, now, out);
    }

    /// Drops expired head entries, sends while credits remain, and keeps the timer armed for the
    /// head's expiry.
    fn drain(&mut self, session: u32, now: Nanos, out: &mut Vec<Out<R>>) {
        let timeout = self.timeout;
        while let Some((head, created)) = self.front(session) {
            if now.saturating_sub(created) <= timeout {
                break;
            }
            self.pop_front(session);
            out.push(Out::Drop { req: head, why: ClientDrop::Timeout });
        }
        loop {
            let s = &self.sessions[session as usize];
            if s.outstanding >= s.granted {
                break;
            }
            let Some(req) = self.pop_front(session) else { break };
            let s = &mut self.sessions[session as usize];
            s.outstanding += 1;
            out.push(Out::Send { req, demand: s.len() });
        }
        if let Some((_, created)) = self.front(session) {
            let s = &mut self.sessions[session as usize];
            if s.flags & TIMER_ARMED == 0 {
                s.flags |= TIMER_ARMED;
                out.push(Out::Timer { session, at: created + timeout + 1 });
            }
        }
    }

    /// Credits `session` holds and may use now: none while requests wait for credit (a drain
    /// would have sent them otherwise). A `clients.burst = "credits"` burst is this many.
    pub fn free_credits(&self, session: u32) -> u32 {
        let s = &self.sessions[session as usize];
        if s.len() > 0 {
            0
        } else {
            s.granted.saturating_sub(s.outstanding)
        }
    }

    /// Requests waiting at `session`.
    pub fn queued_at(&self, session: u32) -> usize {
        self.sessions[session as usize].len() as usize
    }

    /// Takes every queued request out (end of a run), session by session, oldest first.
    pub fn take_queued(&mut self) -> Vec<R> {
        let mut v = Vec::with_capacity(self.queued as usize);
        for session in 0..self.sessions.len() as u32 {
            while let Some(r) = self.pop_front(session) {
                v.push(r);
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn credit_clients(sessions: u32, capacity: u32, timeout: Nanos) -> Clients<u32> {
        Clients::new(sessions, capacity, timeout, true, None)
    }

    #[test]
    fn first_request_asks_for_credits_then_credits_drain_the_queue() {
        let mut c = credit_clients(2, 16, 10_000);
        let mut out = vec![];
        c.submit(0, 0, 0, &mut out);
        assert_eq!(out, vec![Out::Timer { session: 0, at: 10_001 }, Out::CreditRequest { session: 0, demand: 1 }]);
        out.clear();
        c.submit(0, 1, 1, &mut out);
        assert!(out.is_empty(), "one credit request at a time, timer already armed: {out:?}");
        c.on_credits(0, 1, false, 5, &mut out);
        assert_eq!(out, vec![Out::Send { req: 0, demand: 1 }]);
        out.clear();
        // The response brings two credits: the second queued request goes, then the third is
        // sent at once on submission.
        c.on_credits(0, 2, true, 6, &mut out);
        assert_eq!(out, vec![Out::Send { req: 1, demand: 0 }]);
        out.clear();
        c.submit(0, 2, 7, &mut out);
        assert_eq!(out, vec![Out::Send { req: 2, demand: 0 }]);
        assert_eq!(c.queued, 0);
    }

    #[test]
    fn free_credits_are_granted_minus_outstanding_and_none_while_requests_wait() {
        let mut c = credit_clients(1, 16, 1_000);
        let mut out = vec![];
        assert_eq!(c.free_credits(0), 0, "nothing granted yet");
        c.submit(0, 0, 0, &mut out); // queued, asks for credit
        c.on_credits(0, 5, false, 1, &mut out); // five credits: request 0 goes, four left
        assert_eq!(c.free_credits(0), 4);
        c.submit(0, 1, 2, &mut out);
        assert_eq!(c.free_credits(0), 3);
        c.on_credits(0, 2, true, 3, &mut out); // window cut to 2 with one answered: 1 outstanding
        assert_eq!(c.free_credits(0), 1);
        c.submit(0, 2, 4, &mut out);
        c.submit(0, 3, 5, &mut out); // no credit left: it waits
        assert_eq!(c.queued_at(0), 1);
        assert_eq!(c.free_credits(0), 0);
    }

    #[test]
    fn timeout_and_overflow_drop_the_oldest() {
        let mut c = credit_clients(1, 2, 10);
        let mut out = vec![];
        c.submit(0, 0, 0, &mut out);
        c.submit(0, 1, 5, &mut out);
        out.clear();
        c.submit(0, 2, 6, &mut out);
        assert_eq!(out, vec![Out::Drop { req: 0, why: ClientDrop::Overflow }]);
        out.clear();
        // The timer armed for request 0 (at 11) fires: request 1 (created 5) is not yet expired.
        c.on_timer(0, 11, &mut out);
        assert_eq!(out, vec![Out::Timer { session: 0, at: 16 }]);
        out.clear();
        c.on_timer(0, 16, &mut out);
        assert_eq!(out, vec![Out::Drop { req: 1, why: ClientDrop::Timeout }, Out::Timer { session: 0, at: 17 }]);
        assert_eq!(c.queued_at(0), 1);
        assert_eq!(c.take_queued(), vec![2]);
        assert_eq!(c.queued, 0);
    }

    #[test]
    fn first_request_only_asks_once_per_session() {
        for (first_only, asks) in [(false, 2), (true, 1)] {
            let mut c: Clients<u32> = Clients::new(1, 16, 1_000, true, None).with_first_request_only(first_only);
            let mut out = vec![];
            c.submit(0, 0, 0, &mut out);
            // The answer: one credit, used by request 0, whose response then carries 0.
            c.on_credits(0, 1, false, 10, &mut out);
            c.on_credits(0, 0, true, 20, &mut out);
            // Drained again: a new request may ask again only without first_only.
            c.submit(0, 1, 30, &mut out);
            let n = out.iter().filter(|o| matches!(o, Out::CreditRequest { .. })).count();
            assert_eq!(n, asks, "first_only = {first_only}: {out:?}");
        }
    }

    #[test]
    fn first_request_only_never_retries_its_ask() {
        let mut c: Clients<u32> = Clients::new(1, 16, 1_000, true, Some(100)).with_first_request_only(true);
        let mut out = vec![];
        c.submit(0, 0, 0, &mut out);
        c.submit(0, 1, 150, &mut out); // unanswered past the retry period: still not asked again
        c.on_credits(0, 1, false, 160, &mut out);
        c.on_credits(0, 0, true, 170, &mut out);
        c.submit(0, 2, 400, &mut out);
        let n = out.iter().filter(|o| matches!(o, Out::CreditRequest { .. })).count();
        assert_eq!(n, 1, "{out:?}");
    }

    #[test]
    fn credit_requests_are_retried_only_on_a_lossy_network() {
        for (retry, asks) in [(None, 1), (Some(100), 2)] {
            let mut c: Clients<u32> = Clients::new(1, 16, 1_000, true, retry);
            let mut out = vec![];
            c.submit(0, 0, 0, &mut out);
            c.submit(0, 1, 50, &mut out);
            c.submit(0, 2, 150, &mut out);
            let n = out.iter().filter(|o| matches!(o, Out::CreditRequest { .. })).count();
            assert_eq!(n, asks, "{retry:?}");
        }
    }

    #[test]
    fn queues_are_fifo_per_session_whatever_the_interleaving() {
        // The circular chains through the shared pool against one VecDeque per session.
        use rand::{Rng, SeedableRng};
        use std::collections::VecDeque;
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut c: Clients<u32> = Clients::new(8, 1 << 20, Nanos::MAX / 2, true, None);
        let mut model: Vec<VecDeque<u32>> = vec![VecDeque::new(); 8];
        for req in 0..20_000u32 {
            let s = rng.gen_range(0..8u32);
            if rng.gen_bool(0.55) {
                c.push_back(s, req, 0);
                model[s as usize].push_back(req);
            } else {
                assert_eq!(c.pop_front(s), model[s as usize].pop_front());
            }
            assert_eq!(c.queued_at(s), model[s as usize].len());
            assert_eq!(c.front(s).map(|f| f.0), model[s as usize].front().copied());
        }
        assert!(c.nodes.len() < 20_000, "freed entries are reused");
        let rest: Vec<u32> = model.iter().flatten().copied().collect();
        assert_eq!(c.take_queued(), rest);
        assert!(c.sessions.iter().all(|s| s.tail == 0 && s.flags == 0));
    }

    #[test]
    fn without_credit_control_every_request_goes_at_once() {
        let mut none: Clients<u64> = Clients::new(1, 2, 10, false, None);
        let mut out = vec![];
        for r in 0..5 {
            none.submit(0, r, 0, &mut out);
        }
        assert!(out.iter().all(|o| matches!(o, Out::Send { .. })) && out.len() == 5);
    }
}
