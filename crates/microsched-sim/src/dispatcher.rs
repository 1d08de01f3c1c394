//! The dispatcher core (mechanism; see `microsched_core::sched::dispatcher`): a FIFO of work
//! served one item at a time: arrived requests to steer, and the bookkeeping the policy routes
//! through it (completions, preempted requests to requeue, preemption signals to send), each at
//! its kind's cost. Its time is busy or polling, never parked, and is part of the server's
//! core-time accounting.
//!
//! A work-conserving dispatcher (Concord's) also runs a request of its own in chunks when the
//! policy finds slack: arrivals wait for the chunk to end.

use std::collections::VecDeque;

use microsched_core::sched::dispatcher::DispatcherCosts;
use microsched_core::Nanos;

use crate::events::{Event, EventQueue};

/// A dispatcher's counters at one time (the driver takes window differences).
#[derive(Debug, Clone, Copy, Default)]
pub struct DispatchSnap {
    pub busy_ns: Nanos,
    pub handled: [u64; 4],
    pub handled_ns: [Nanos; 4],
}

/// A kind of work of the dispatcher core.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Work {
    Arrival = 0,
    Completion = 1,
    Requeue = 2,
    Signal = 3,
}

/// A queued item that is bookkeeping, not a request to steer.
const NO_REQ: u32 = u32::MAX;

#[derive(Debug)]
pub struct Dispatcher {
    node: u16,
    /// Per [`Work`] kind.
    cost: [Nanos; 4],
    /// Per [`Work`] kind: whether the policy routes it through the dispatcher.
    routed: [bool; 4],
    /// Arrivals waiting to be steered.
    queue: VecDeque<u32>,
    /// Bookkeeping waiting, as its total time: served before arrivals, as the artifacts' loop
    /// polls every worker's state before it takes the networker's next batch (`dispatcher.c`).
    /// Items carry no request, so back-to-back ones run as one stretch (one event).
    chores: Nanos,
    /// The item being handled.
    current: Option<(u32, Work)>,
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
    /// Per [`Work`] kind: items handled, and the time spent on them (the whole run).
    pub handled: [u64; 4],
    pub handled_ns: [Nanos; 4],
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
    pub fn new(node: u16, costs: DispatcherCosts) -> Self {
        Self {
            node,
            cost: [costs.arrival, costs.completion, costs.requeue, costs.signal],
            routed: {
                let r = costs.routes.unwrap_or(microsched_core::sched::dispatcher::Routes::ALL);
                [true, r.completions, r.preempted, r.signals]
            },
            queue: VecDeque::new(),
            chores: 0,
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
            handled: [0; 4],
            handled_ns: [0; 4],
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
        self.begin((req, Work::Arrival), self.cost[0], now, evq);
        true
    }

    /// Bookkeeping of kind `work` reaches the dispatcher: counted now, done after what it is
    /// doing (before any waiting arrival).
    pub fn note(&mut self, work: Work, now: Nanos, evq: &mut EventQueue) {
        let k = work as usize;
        if !self.routed[k] {
            return;
        }
        let cost = self.cost[k];
        self.handled[k] += 1;
        self.handled_ns[k] += cost;
        if cost == 0 {
            return;
        }
        if !self.idle() {
            self.chores += cost;
            return;
        }
        self.begin((NO_REQ, work), cost, now, evq);
    }

    fn begin(&mut self, item: (u32, Work), len: Nanos, now: Nanos, evq: &mut EventQueue) {
        if self.idle() {
            self.search_ns += now - self.since;
            self.since = now;
        }
        self.current = Some(item);
        evq.push(now + len, Event::DispatchDone { node: self.node });
    }

    /// Starts on the next queued item, if any: returns it if it is an arrival (its queueing
    /// at the dispatcher ends now).
    fn begin_next(&mut self, now: Nanos, evq: &mut EventQueue) -> Option<u32> {
        if self.chores > 0 {
            let len = std::mem::take(&mut self.chores);
            self.begin((NO_REQ, Work::Completion), len, now, evq);
            return None;
        }
        let next = self.queue.pop_front()?;
        self.begin((next, Work::Arrival), self.cost[0], now, evq);
        Some(next)
    }

    /// The current item is handled: returns the request it dispatched (None for bookkeeping),
    /// whether it started on a next item, and that item's request if it is an arrival.
    pub fn done(&mut self, now: Nanos, evq: &mut EventQueue) -> (Option<u32>, bool, Option<u32>) {
        let (req, work) = self.current.take().expect("a dispatch was under way");
        self.busy_ns += now - self.since;
        if work == Work::Arrival {
            self.handled[0] += 1;
            self.handled_ns[0] += self.cost[0];
        }
        self.since = now;
        let more = !self.queue.is_empty() || self.chores > 0;
        let next = self.begin_next(now, evq);
        ((work == Work::Arrival).then_some(req), more, next)
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
    /// Returns whether it started on a queued item, and that item's request if an arrival.
    pub fn resume(&mut self, now: Nanos, evq: &mut EventQueue) -> (bool, Option<u32>) {
        let more = !self.queue.is_empty() || self.chores > 0;
        (more, self.begin_next(now, evq))
    }

    /// The oldest request waiting for the dispatcher (not the one being dispatched).
    pub fn oldest(&self) -> Option<u32> {
        self.queue.front().copied()
    }

    /// Requests waiting for the dispatcher.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// What it is doing, for the timeline (None: polling), and for which request slot.
    pub fn activity(&self) -> Option<(microsched_core::trace::DispatcherActivity, u32)> {
        use microsched_core::trace::DispatcherActivity as A;
        match (self.current, self.chunk, self.job) {
            (Some((req, Work::Arrival)), _, _) => Some((A::Dispatching, req)),
            (Some(_), _, _) => Some((A::Bookkeeping, NO_REQ)),
            (None, Some(_), Some((req, _))) => Some((A::Running, req)),
            _ => None,
        }
    }

    /// Its counters at `now`: busy time, and per kind items handled and time on them.
    pub fn snapshot(&self, now: Nanos) -> DispatchSnap {
        DispatchSnap { busy_ns: self.times_at(now).0, handled: self.handled, handled_ns: self.handled_ns }
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
