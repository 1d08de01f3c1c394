//! The event queue: a heap ordered by (time, insertion sequence), so that events at the same
//! nanosecond run in the order they were scheduled — the tie-break that makes runs bit-for-bit
//! reproducible.

use std::cmp::Ordering;
use std::collections::VecDeque;

use dary_heap::QuaternaryHeap;

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
    /// A dispatcher core's own request: a chunk of it ends, or it asks for slack again.
    DispatcherWork { node: u16, gen: u32 },
    /// A core finishes a steal and can run what it took.
    StealDone { node: u16, core: u16 },
    /// A granted core becomes usable.
    WakeDone { node: u16, core: u16 },
    /// An idle core has polled long enough to consider parking.
    ParkCheck { node: u16, core: u16, epoch: u32 },
    /// Probe search: searching core `core` probes `victim`'s queue (its own: an own-queue
    /// check) in its search number `search`.
    Probe { node: u16, core: u16, victim: u16, search: u32 },
    /// Probe search under the study's park rule: the end of a sweep of `core`'s search number
    /// `search`.
    SweepEnd { node: u16, core: u16, search: u32 },
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
    /// SEDA (artifact): a session's waiting requests get a token, or the oldest has waited its
    /// longest (session numbered across applications).
    SedaRelease { session: u32 },
    AllocTick { node: u16 },
    CreditTimer { node: u16 },
    /// Periodic measurement of the congestion signal (static allocation, sampled signal).
    DelayPoll { node: u16 },
    /// One of a node's interference handlers placed idle first (`server.irq.steering =
    /// "idle_first"`) arrives.
    Handler { node: u16 },
    Sample,
    /// The start of the measured window.
    WarmupEnd,
}

/// `key` is (time << 64 | insertion sequence): one integer compare orders events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Entry {
    key: u128,
    event: Event,
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> Ordering {
        // The heap is a max-heap: reverse to pop the earliest (time, seq) first.
        other.key.cmp(&self.key)
    }
}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// Events in a heap with four children per node (half a binary heap's depth for the pops, which
/// dominate), plus two FIFO lanes for streams of events scheduled at nondecreasing times
/// (network trips of constant delay; the arrivals of a single application), which then cost
/// O(1) instead of O(log n): most events of a run. Pop order is (time, seq) whatever the
/// source.
#[derive(Debug, Default)]
pub struct EventQueue {
    heap: QuaternaryHeap<Entry>,
    lanes: [VecDeque<Entry>; 2],
    /// The key of each lane's first event (`u128::MAX` when empty), kept beside the lanes so
    /// that choosing the next event compares three integers.
    fronts: [u128; 2],
    seq: u64,
}

/// The lane of network trips of constant delay.
pub const NETWORK_LANE: usize = 0;
/// The lane of a scenario's arrivals when it has a single application.
pub const ARRIVAL_LANE: usize = 1;

impl EventQueue {
    pub fn with_capacity(n: usize) -> Self {
        Self {
            heap: QuaternaryHeap::with_capacity(n),
            lanes: [VecDeque::with_capacity(n), VecDeque::with_capacity(4)],
            fronts: [u128::MAX; 2],
            seq: 0,
        }
    }

    #[inline(always)]
    fn key(&mut self, time: Nanos) -> u128 {
        self.seq += 1;
        ((time as u128) << 64) | self.seq as u128
    }

    /// Schedules an event on `lane`, no earlier than every event pushed to that lane before it.
    #[inline(always)]
    pub fn push_in_order(&mut self, lane: usize, time: Nanos, event: Event) {
        let key = self.key(time);
        let l = &mut self.lanes[lane & 1];
        debug_assert!(l.back().is_none_or(|e| e.key <= key));
        if l.is_empty() {
            self.fronts[lane & 1] = key;
        }
        l.push_back(Entry { key, event });
    }

    #[inline(always)]
    pub fn push(&mut self, time: Nanos, event: Event) {
        let key = self.key(time);
        self.heap.push(Entry { key, event });
    }

    #[inline(always)]
    pub fn pop(&mut self) -> Option<(Nanos, Event)> {
        let heap_key = self.heap.peek().map_or(u128::MAX, |h| h.key);
        let [net, arrivals] = self.fronts;
        let lane = (arrivals < net) as usize;
        let e = if self.fronts[lane] < heap_key {
            let l = &mut self.lanes[lane];
            let e = l.pop_front().expect("a lane with a front key is not empty");
            self.fronts[lane] = l.front().map_or(u128::MAX, |f| f.key);
            e
        } else {
            self.heap.pop()?
        };
        Some(((e.key >> 64) as Nanos, e.event))
    }
}
