//! The simulator's timeline recorder (`--trace`): what each core and dispatcher does, the
//! counters, instants and request slices of a window, in the track layout of
//! [`microsched_core::trace`] (the runtime writes the same).
//!
//! The driver's loop is generic over a [`Tracer`]: a traced run's [`Recorder`] sees each event
//! before and after it is handled, and the two places where a request leaves the server; it
//! compares the state it sees with what it saw last and records the changes. An untraced run's
//! loop is monomorphised for [`NoTrace`], whose hooks are empty: it pays nothing and gives
//! identical results (the recorder only reads the simulation's state, never changes it).

use microsched_core::summary::Parking;
use microsched_core::trace::{counter, instant, park_reason, veto_bit, veto_reason, Arg, CoreActivity, DispatcherActivity, Trace};
use microsched_core::Nanos;

use crate::events::Event;
use crate::node::Node;
use crate::requests::{Req, Slab};
use crate::server::CoreMode;

const NONE: u32 = u32::MAX;

/// What sees a run's events (the driver's loop is monomorphised per tracer). It only reads the
/// simulation's state.
pub trait Tracer {
    /// Before `ev` at `now` is handled.
    fn before(&mut self, now: Nanos, nodes: &[Node], slab: &Slab, ev: Event);
    /// After `ev` at `now` was handled.
    fn after(&mut self, now: Nanos, nodes: &[Node], slab: &Slab, ev: Event);
    /// The response (or failure reply) to the request in `slot` leaves the server of `node`;
    /// `served`: from the core that ran it (otherwise dropped on arrival).
    fn respond(&mut self, slab: &Slab, node: u16, slot: u32, served: bool, now: Nanos, dropped: bool);
    /// At the end of the run (`end`): the timeline recorded, if any.
    fn finish(self, end: Nanos) -> Option<Trace>;
}

/// The untraced run's tracer: sees nothing, costs nothing.
pub struct NoTrace;

impl Tracer for NoTrace {
    #[inline(always)]
    fn before(&mut self, _: Nanos, _: &[Node], _: &Slab, _: Event) {}
    #[inline(always)]
    fn after(&mut self, _: Nanos, _: &[Node], _: &Slab, _: Event) {}
    #[inline(always)]
    fn respond(&mut self, _: &Slab, _: u16, _: u32, _: bool, _: Nanos, _: bool) {}
    fn finish(self, _: Nanos) -> Option<Trace> {
        None
    }
}

impl Tracer for Recorder {
    /// The recorder sees arrivals (a request reaching its server gets its id).
    #[inline(never)]
    fn before(&mut self, now: Nanos, nodes: &[Node], slab: &Slab, ev: Event) {
        Recorder::before(self, now, nodes, slab);
        if let Event::ServerArrive { req, .. } = ev {
            self.arrive(req, now);
        }
    }

    /// What the event changed, with the core it is about (if it names one).
    #[inline(never)]
    fn after(&mut self, now: Nanos, nodes: &[Node], slab: &Slab, ev: Event) {
        let about = match ev {
            Event::CoreDone { node, core, .. }
            | Event::OverheadDone { node, core, .. }
            | Event::LockGranted { node, core, .. }
            | Event::StealDone { node, core }
            | Event::WakeDone { node, core }
            | Event::ParkCheck { node, core, .. }
            | Event::Probe { node, core, .. }
            | Event::SweepEnd { node, core, .. } => Some((node, core)),
            _ => None,
        };
        self.poll(now, nodes, slab, about);
    }

    fn respond(&mut self, slab: &Slab, node: u16, slot: u32, served: bool, now: Nanos, dropped: bool) {
        let core = served.then(|| slab[slot].core);
        Recorder::respond(self, node, slot, core, now, dropped);
    }

    fn finish(mut self, end: Nanos) -> Option<Trace> {
        Recorder::finish(&mut self, end);
        Some(self.trace)
    }
}

/// The counters of a node, in this order.
const COUNTERS: [&str; 7] = [
    counter::CORES_ALLOCATED,
    counter::CORES_BUSY,
    counter::QUEUE_LENGTH,
    counter::OLDEST_DELAY_US,
    counter::CREDIT_POOL,
    counter::CREDITS_ISSUED,
    counter::DISPATCHER_QUEUE,
];

/// What the recorder last saw of a node.
struct Seen {
    /// Per core: what it does, for which request slot (NONE: none), since when.
    cores: Vec<(CoreActivity, u32, Nanos)>,
    /// The dispatcher's activity (None: polling) and since when; None: no dispatcher.
    dispatcher: Option<(Option<(DispatcherActivity, u32)>, Nanos)>,
    counters: [f64; COUNTERS.len()],
    /// Per core: the park veto reasons recorded in its current idle stretch ([`veto_bit`]; a
    /// gate that vetoes every poll would otherwise fill the trace).
    vetoed: Vec<u8>,
    parking: Parking,
    preemptions: u64,
}

pub struct Recorder {
    pub trace: Trace,
    nodes: Vec<Seen>,
    /// Per slab slot: the id and server arrival of the request in it (id 0: none).
    slots: Vec<(u64, Nanos)>,
    next_id: u64,
    /// The poll has run since the window started (the cores' state was read once).
    started: bool,
}

impl Recorder {
    pub fn new(trace: Trace, nodes: &[Node]) -> Self {
        let mut trace = trace;
        let seen = nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let cores = n.server.core_count();
                trace.add_node(i as u16, cores, n.server.dispatcher_activity().is_some());
                Seen {
                    cores: vec![(CoreActivity::Searching, NONE, 0); cores],
                    dispatcher: n.server.dispatcher_activity().map(|_| (None, 0)),
                    counters: [f64::NAN; COUNTERS.len()],
                    vetoed: vec![0; cores],
                    parking: n.parking_now(),
                    preemptions: n.server.counters().preemptions,
                }
            })
            .collect();
        Self { trace, nodes: seen, slots: Vec::new(), next_id: 1, started: false }
    }

    /// A request reached its server: it gets the next id.
    pub fn arrive(&mut self, slot: u32, now: Nanos) {
        let s = slot as usize;
        if self.slots.len() <= s {
            self.slots.resize(s + 1, (0, 0));
        }
        self.slots[s] = (self.next_id, now);
        self.next_id += 1;
    }

    fn id(&self, slot: u32) -> Option<u64> {
        self.slots.get(slot as usize).map(|s| s.0).filter(|&id| id != 0)
    }

    /// A request's response (or failure reply) leaves the server of `node`.
    pub fn respond(&mut self, node: u16, slot: u32, core: Option<u16>, now: Nanos, dropped: bool) {
        if let Some(&(id, arrived)) = self.slots.get(slot as usize) {
            if id != 0 {
                self.trace.request(node, id, arrived, now, dropped);
            }
        }
        if dropped {
            self.trace.instant(node, core, instant::DROP, now, Some(("request", Arg::Int(self.id(slot).unwrap_or(0)))));
        }
    }

    /// Before the event at `now`: at the window's start, what each core does then (the state
    /// the previous events left) opens its first slice.
    pub fn before(&mut self, now: Nanos, nodes: &[Node], slab: &Slab) {
        let start = self.trace.window().0;
        if self.started || now < start {
            return;
        }
        self.started = true;
        for (i, n) in nodes.iter().enumerate() {
            let seen = &mut self.nodes[i];
            for (c, s) in seen.cores.iter_mut().enumerate() {
                let (what, slot) = activity(n, c as u16, slab);
                *s = (what, slot, start);
            }
            if let Some(d) = &mut seen.dispatcher {
                *d = (n.server.dispatcher_activity().flatten(), start);
            }
            seen.parking = n.parking_now();
            seen.preemptions = n.server.counters().preemptions;
        }
    }

    /// After an event at `now` (about core `core` of node `at_node`, if it names one): records
    /// what changed.
    pub fn poll(&mut self, now: Nanos, nodes: &[Node], slab: &Slab, event_core: Option<(u16, u16)>) {
        if !self.started || now >= self.trace.window().1 || self.trace.full() {
            return;
        }
        for (i, n) in nodes.iter().enumerate() {
            let node = i as u16;
            let here = event_core.filter(|&(en, _)| en == node).map(|(_, c)| c);
            for c in 0..self.nodes[i].cores.len() {
                let (what, slot) = activity(n, c as u16, slab);
                let (was, was_slot, since) = self.nodes[i].cores[c];
                if (what, slot) != (was, was_slot) {
                    let id = self.id(was_slot);
                    self.trace.core_slice(node, c as u16, was, id.filter(|_| was_slot != NONE), since, now);
                    self.nodes[i].cores[c] = (what, slot, now);
                    self.nodes[i].vetoed[c] = 0;
                    if what == CoreActivity::Stealing {
                        self.trace.instant(node, Some(c as u16), instant::STEAL, now, None);
                    }
                }
            }
            if let Some((was, since)) = self.nodes[i].dispatcher {
                let what = n.server.dispatcher_activity().flatten();
                if what != was {
                    if let Some((a, slot)) = was {
                        self.trace.dispatcher_slice(node, a, self.id(slot), since, now);
                    }
                    self.nodes[i].dispatcher = Some((what, now));
                }
            }
            let pre = n.server.counters().preemptions;
            let seen = &mut self.nodes[i];
            for _ in seen.preemptions..pre {
                self.trace.instant(node, here, instant::PREEMPTION, now, None);
            }
            seen.preemptions = pre;
            let p = n.parking_now();
            let d = p.since(&seen.parking);
            seen.parking = p;
            if d.attempts > 0 || d.parks > 0 || d.wakeups > 0 {
                self.park_instants(node, here, now, &d);
            }
            let values = counters(n, now, slab);
            for (k, v) in values.into_iter().enumerate() {
                let last = self.nodes[i].counters[k];
                if v != last && !(v.is_nan() && last.is_nan()) {
                    self.nodes[i].counters[k] = v;
                    self.trace.counter(node, COUNTERS[k], now, v);
                }
            }
        }
    }

    fn park_instants(&mut self, node: u16, core: Option<u16>, now: Nanos, d: &Parking) {
        let n = node as usize;
        let g = d.gate.unwrap_or_default();
        let park_reason = park_reason(&g, d.gate.is_some());
        for _ in 0..d.parks {
            self.trace.instant(node, core, instant::PARK, now, Some(("reason", Arg::Str(park_reason))));
        }
        if let Some(reason) = veto_reason(&g) {
            // The first veto of each reason in an idle stretch.
            if let Some(c) = core {
                let seen = &mut self.nodes[n].vetoed[c as usize];
                if *seen & veto_bit(reason) == 0 {
                    *seen |= veto_bit(reason);
                    self.trace.instant(node, core, instant::PARK_VETOED, now, Some(("reason", Arg::Str(reason))));
                }
            }
        }
        if g.cuts > 0 {
            self.trace.instant(node, core, instant::CREDIT_CUT, now, Some(("credits", Arg::Int(g.credits_cut))));
        }
        for _ in 0..d.wakeups {
            self.trace.instant(node, core, instant::WAKE, now, None);
        }
    }

    /// At the end of the run: closes what is still open at `now`.
    pub fn finish(&mut self, now: Nanos) {
        if !self.started {
            return;
        }
        for (i, seen) in self.nodes.iter().enumerate() {
            for (c, &(what, slot, since)) in seen.cores.iter().enumerate() {
                let id = self.slots.get(slot as usize).map(|s| s.0).filter(|&id| id != 0 && slot != NONE);
                self.trace.core_slice(i as u16, c as u16, what, id, since, now);
            }
            if let Some((Some((a, slot)), since)) = seen.dispatcher {
                let id = self.slots.get(slot as usize).map(|s| s.0).filter(|&id| id != 0);
                self.trace.dispatcher_slice(i as u16, a, id, since, now);
            }
        }
    }
}

/// What core `c` of `n` does, and for which request slot.
fn activity(n: &Node, c: u16, slab: &Slab) -> (CoreActivity, u32) {
    let core = n.server.core(c);
    let cur = core.current;
    match core.mode {
        CoreMode::Busy if cur == NONE => (CoreActivity::Busy, NONE),
        CoreMode::Busy if slab[cur].has(Req::WAITING_LOCK) => (CoreActivity::LockWait, cur),
        CoreMode::Busy => (CoreActivity::Running, cur),
        CoreMode::Overhead => (CoreActivity::Preempting, cur),
        CoreMode::Search if n.server.is_stealing(c) => (CoreActivity::Stealing, NONE),
        CoreMode::Search => (CoreActivity::Searching, NONE),
        CoreMode::Parked => (CoreActivity::Parked, NONE),
        CoreMode::Waking => (CoreActivity::Waking, NONE),
    }
}

fn counters(n: &Node, now: Nanos, slab: &Slab) -> [f64; COUNTERS.len()] {
    let s = &n.server;
    let (parked, busy) = s.parked_busy_counts();
    let credit = n.credit.as_ref().map(|c| c.ctl.stats());
    [
        (s.core_count() - parked) as f64,
        busy as f64,
        s.queued_total() as f64,
        // In whole µs: the age of a waiting request grows at every event.
        (s.max_delay(now, slab) as f64 / 1e3).round(),
        credit.map_or(f64::NAN, |c| c.pool as f64),
        credit.map_or(f64::NAN, |c| c.issued as f64),
        s.dispatcher_snapshot(now).map_or(f64::NAN, |(_, q)| q as f64),
    ]
}
