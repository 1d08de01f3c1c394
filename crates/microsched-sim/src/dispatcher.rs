//! The dispatcher core (mechanism; see `microsched_core::sched::dispatcher`): a FIFO of arrived
//! requests served one at a time, `cost` each. Its time is busy or polling, never parked, and is
//! part of the server's core-time accounting.
//!
//! A work-conserving dispatcher (Concord's) also runs a request of its own in chunks when the
//! policy finds slack: arrivals wait for the chunk to end.

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
    /// Its own request and the run time it has left.
    pub job: Option<(u32, Nanos)>,
    /// The chunk of `job` being run: its event's generation and length.
    chunk: Option<(u32, Nanos)>,
    /// The generation of a pending "ask again" event.
    retry: Option<u32>,
    gen: u32,
    /// Requests it ran to completion, and its time running them.
    pub completed: u64,
    pub work_ns: Nanos,
}

/// What a [`Event::DispatcherWork`] event meant.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkEvent {
    Stale,
    /// Time to ask the policy for slack again.
    Retry,
    /// A chunk of its own request ended; `Some` if the request is done.
    ChunkEnd(Option<u32>),
}

impl Dispatcher {
    pub fn new(node: u16, cost: Nanos) -> Self {
        Self {
            node,
            cost,
            queue: VecDeque::new(),
            current: None,
            since: 0,
            busy_ns: 0,
            search_ns: 0,
            job: None,
            chunk: None,
            retry: None,
            gen: 0,
            completed: 0,
            work_ns: 0,
        }
    }

    /// Neither dispatching nor running a request of its own.
    pub fn idle(&self) -> bool {
        self.current.is_none() && self.chunk.is_none()
    }

    /// A request reaches the dispatcher; returns true if it starts on it now (its queueing at
    /// the dispatcher ends now).
    pub fn arrive(&mut self, req: u32, now: Nanos, evq: &mut EventQueue) -> bool {
        if !self.idle() {
            self.queue.push_back(req);
            return false;
        }
        self.begin(req, now, evq);
        true
    }

    fn begin(&mut self, req: u32, now: Nanos, evq: &mut EventQueue) {
        if self.idle() {
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

    /// Runs `len` (at most what is left) of its own request from `now`.
    pub fn run_chunk(&mut self, len: Nanos, now: Nanos, evq: &mut EventQueue) {
        let (_, left) = self.job.expect("a request to run");
        debug_assert!(self.idle());
        let len = len.min(left);
        self.search_ns += now - self.since;
        self.since = now;
        self.gen = self.gen.wrapping_add(1);
        self.chunk = Some((self.gen, len));
        evq.push(now + len, Event::DispatcherWork { node: self.node, gen: self.gen });
    }

    /// Asks the policy again at `at`, unless an earlier ask is pending.
    pub fn retry_at(&mut self, at: Nanos, evq: &mut EventQueue) {
        if self.retry.is_none() {
            self.gen = self.gen.wrapping_add(1);
            self.retry = Some(self.gen);
            evq.push(at, Event::DispatcherWork { node: self.node, gen: self.gen });
        }
    }

    /// A [`Event::DispatcherWork`] event of generation `gen` at `now`.
    pub fn work_event(&mut self, gen: u32, now: Nanos) -> WorkEvent {
        if self.retry == Some(gen) {
            self.retry = None;
            return WorkEvent::Retry;
        }
        match self.chunk {
            Some((g, len)) if g == gen => {
                self.chunk = None;
                self.busy_ns += now - self.since;
                self.since = now;
                self.work_ns += len;
                let (req, left) = self.job.as_mut().expect("a chunk runs the job");
                *left -= len;
                let req = *req;
                if *left == 0 {
                    self.job = None;
                    self.completed += 1;
                    return WorkEvent::ChunkEnd(Some(req));
                }
                WorkEvent::ChunkEnd(None)
            }
            _ => WorkEvent::Stale,
        }
    }

    /// Back from its own request: starts on the oldest waiting arrival, if any (returned; its
    /// queueing at the dispatcher ends now).
    pub fn resume(&mut self, now: Nanos, evq: &mut EventQueue) -> Option<u32> {
        let next = self.queue.pop_front()?;
        self.begin(next, now, evq);
        Some(next)
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
        if !self.idle() {
            (self.busy_ns + open, self.search_ns)
        } else {
            (self.busy_ns, self.search_ns + open)
        }
    }
}
