//! The event queue: a binary heap ordered by (time, insertion sequence), so that events at the
//! same nanosecond run in the order they were scheduled — the tie-break that makes runs
//! bit-for-bit reproducible.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

use microsched_core::Nanos;

/// Indices are into the simulator's request slab; `epoch` lets stale timers be ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Event {
    /// Application `app`'s arrival process produces its next request.
    Generate { app: u16 },
    /// A request packet reaches its server node (the request's `node`); `demand` is the sending
    /// client's queue length (credit-based overload control only).
    ServerArrive { req: u32, demand: u32 },
    /// A core's compute slice ends (the op is done, or the quantum expired); `gen` tells a
    /// cancelled slice from the current one.
    CoreDone { node: u16, core: u16, gen: u32 },
    /// A core's preemption overhead (receive or return cost) ends.
    OverheadDone { node: u16, core: u16, gen: u32 },
    /// A spin-waiting core was handed the mutex it spins for.
    LockGranted { node: u16, core: u16, gen: u32 },
    /// The dispatcher core finishes dispatching its current request.
    DispatchDone { node: u16 },
    /// A core finishes a steal and can run what it took.
    StealDone { node: u16, core: u16 },
    /// A granted core becomes usable.
    WakeDone { node: u16, core: u16 },
    /// An idle core has polled long enough to consider parking.
    ParkCheck { node: u16, core: u16, epoch: u32 },
    /// A response (or drop notice) reaches its client, with the absolute credits it carries
    /// (credit-based overload control only).
    ResponseArrive { req: u32, credits: u32 },
    /// The server's AQM failure reply for a dropped request leaves (after the packet cost).
    DropReply { req: u32 },
    /// An explicit credit request (Breakwater's WINUPDATE/CREDIT) of a session (numbered across
    /// applications) reaches a node.
    CreditRequest { node: u16, session: u32, demand: u32 },
    /// An explicit credit message from a node reaches a client session.
    CreditArrive { node: u16, session: u32, credits: u32 },
    /// A request waiting for credits from a node at a client times out.
    ClientTimeout { node: u16, session: u32 },
    AllocTick { node: u16 },
    CreditTimer { node: u16 },
    /// Periodic measurement of the congestion signal (static allocation, sampled signal).
    DelayPoll { node: u16 },
    Sample,
    /// The start of the measured window.
    WarmupEnd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    time: Nanos,
    seq: u64,
    event: Event,
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        // BinaryHeap is a max-heap: reverse to pop the earliest (time, seq) first.
        (other.time, other.seq).cmp(&(self.time, self.seq))
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Events in a heap, plus a FIFO lane for events scheduled at nondecreasing times (network
/// trips of constant delay: most events of a run), which then cost O(1) instead of O(log n).
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: BinaryHeap<Entry>,
    lane: VecDeque<Entry>,
    seq: u64,
}

impl EventQueue {
    pub fn with_capacity(n: usize) -> Self {
        Self { heap: BinaryHeap::with_capacity(n), lane: VecDeque::with_capacity(n), seq: 0 }
    }

    /// Schedules an event no earlier than every event pushed to the lane before it.
    #[inline]
    pub fn push_in_order(&mut self, time: Nanos, event: Event) {
        debug_assert!(self.lane.back().is_none_or(|e| e.time <= time));
        self.seq += 1;
        self.lane.push_back(Entry { time, seq: self.seq, event });
    }

    #[inline]
    pub fn push(&mut self, time: Nanos, event: Event) {
        self.seq += 1;
        self.heap.push(Entry { time, seq: self.seq, event });
    }

    #[inline]
    pub fn pop(&mut self) -> Option<(Nanos, Event)> {
        let from_lane = match (self.lane.front(), self.heap.peek()) {
            (Some(l), Some(h)) => (l.time, l.seq) < (h.time, h.seq),
            (Some(_), None) => true,
            (None, _) => false,
        };
        let e = if from_lane { self.lane.pop_front() } else { self.heap.pop() };
        e.map(|e| (e.time, e.event))
    }
}
