//! The dispatcher core (mechanism; see `microsched_core::sched::dispatcher`): a FIFO of arrived
//! requests served one at a time, `cost` each. Its time is busy or polling, never parked, and is
//! part of the server's core-time accounting.

use std::collections::VecDeque;

use microsched_core::Nanos;

use crate::events::{Event, EventQueue};

#[derive(Debug)]
pub struct Dispatcher {
    node: u16,
    cost: Nanos,
    queue: VecDeque<u32>,
    /// The request being dispatched.
    current: Option<u32>,
    since: Nanos,
    busy_ns: Nanos,
    search_ns: Nanos,
}

impl Dispatcher {
    pub fn new(node: u16, cost: Nanos) -> Self {
        Self { node, cost, queue: VecDeque::new(), current: None, since: 0, busy_ns: 0, search_ns: 0 }
    }

    /// A request reaches the dispatcher; returns true if it starts on it now (its queueing at
    /// the dispatcher ends now).
    pub fn arrive(&mut self, req: u32, now: Nanos, evq: &mut EventQueue) -> bool {
        if self.current.is_some() {
            self.queue.push_back(req);
            return false;
        }
        self.begin(req, now, evq);
        true
    }

    fn begin(&mut self, req: u32, now: Nanos, evq: &mut EventQueue) {
        if self.current.is_none() {
            self.search_ns += now - self.since;
            self.since = now;
        }
        self.current = Some(req);
        evq.push(now + self.cost, Event::DispatchDone { node: self.node });
    }

    /// The current request is dispatched: returns it, and the next one it starts on (whose
    /// queueing at the dispatcher ends now), if any.
    pub fn done(&mut self, now: Nanos, evq: &mut EventQueue) -> (u32, Option<u32>) {
        let req = self.current.take().expect("a dispatch was under way");
        self.busy_ns += now - self.since;
        self.since = now;
        let next = self.queue.pop_front();
        if let Some(n) = next {
            self.begin(n, now, evq);
        }
        (req, next)
    }

    /// The oldest request waiting for the dispatcher (not the one being dispatched).
    pub fn oldest(&self) -> Option<u32> {
        self.queue.front().copied()
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// (busy, polling) time up to `now`.
    pub fn times_at(&self, now: Nanos) -> (Nanos, Nanos) {
        let open = now - self.since;
        if self.current.is_some() {
            (self.busy_ns + open, self.search_ns)
        } else {
            (self.busy_ns, self.search_ns + open)
        }
    }
}
