//! Timelines of a run, shared by the simulator and the runtime: one track layout, one set of
//! names, one writer, so that a simulated and a real run of a scenario open side by side.
//!
//! The file format is Chrome's trace-event JSON (the "JSON Object Format": `traceEvents` plus
//! metadata), which Perfetto (ui.perfetto.dev), `chrome://tracing` and Speedscope open. We
//! write JSON rather than Perfetto's protobuf because no maintained protobuf trace writer
//! exists for Rust or Python that we could depend on, and a hand-written protobuf encoder is a
//! maintenance burden; the JSON importer of Perfetto supports everything a timeline here needs
//! (slices, instants with arguments, counters, process and thread names and order).
//!
//! Layout (per server node, a Perfetto "process" `node N`):
//! * a thread per core, `core K`: slices named by what the core does ([`CoreActivity`]);
//! * `dispatcher` (when the server has one): dispatching, bookkeeping, running its own request;
//! * `requests L` lanes: one slice per request from its arrival at the server to its response
//!   (requests in the server at once are laid on separate lanes);
//! * counters ([`counter`]) and instants ([`instant`]) on the node.
//!
//! The buffer only keeps what falls inside the trace window and at most `max_events` events;
//! a cut is reported in the file's metadata (`metadata.microsched.truncated`).

use std::io::{self, Write};

use crate::Nanos;

/// What `--trace-max-events` defaults to: about 45 MB of JSON, which Perfetto's UI opens in
/// seconds.
pub const DEFAULT_MAX_EVENTS: usize = 500_000;
/// What `--trace-window` defaults to: the first 20 ms of the measured window.
pub const DEFAULT_WINDOW_MS: f64 = 20.0;
/// Requests in the server at once beyond this many lanes are counted, not drawn.
pub const MAX_REQUEST_LANES: usize = 256;

/// Names of counter tracks.
pub mod counter {
    pub const CORES_ALLOCATED: &str = "cores allocated";
    pub const CORES_BUSY: &str = "cores busy";
    pub const QUEUE_LENGTH: &str = "queue length";
    /// In whole µs (it grows at every event while a request waits).
    pub const OLDEST_DELAY_US: &str = "oldest queueing delay (us)";
    pub const CREDIT_POOL: &str = "credit pool";
    pub const CREDITS_ISSUED: &str = "credits issued";
    pub const DISPATCHER_QUEUE: &str = "dispatcher queue";
}

/// Names of instants.
pub mod instant {
    /// A core parked; argument `reason`: the park gate's verdict.
    pub const PARK: &str = "park";
    /// A park attempt that kept the core polling; argument `reason`. Recorded for the first
    /// veto of each reason in an idle stretch, not at every poll.
    pub const PARK_VETOED: &str = "park vetoed";
    /// CoreSync withheld credits at a park attempt; argument `credits`.
    pub const CREDIT_CUT: &str = "credit cut";
    /// Requests dropped (overload control, lock drops, client timeouts); argument `count`.
    pub const DROP: &str = "drop";
    pub const PREEMPTION: &str = "preemption";
    pub const STEAL: &str = "steal";
    pub const WAKE: &str = "wake";
}

/// What a core is doing: the slices of a core track.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoreActivity {
    /// Running a request (its id in the slice's name and `args.request`).
    Running,
    /// Holding the core while spinning for a lock a request waits on.
    LockWait,
    /// The preemption mechanism's receive or return cost.
    Preempting,
    /// Running something that is no client's request (a cleanup thread, a handler).
    Busy,
    /// Idle and polling for work.
    Searching,
    /// Taking work from another core's queue.
    Stealing,
    /// Given to the best-effort co-tenant.
    Parked,
    /// Granted, not yet usable.
    Waking,
}

impl CoreActivity {
    pub fn name(self) -> &'static str {
        match self {
            CoreActivity::Running => "request",
            CoreActivity::LockWait => "waiting on lock",
            CoreActivity::Preempting => "preempting",
            CoreActivity::Busy => "busy",
            CoreActivity::Searching => "searching",
            CoreActivity::Stealing => "stealing",
            CoreActivity::Parked => "parked",
            CoreActivity::Waking => "waking",
        }
    }
}

/// What a dispatcher core is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DispatcherActivity {
    Dispatching,
    Bookkeeping,
    Running,
}

impl DispatcherActivity {
    pub fn name(self) -> &'static str {
        match self {
            DispatcherActivity::Dispatching => "dispatching",
            DispatcherActivity::Bookkeeping => "bookkeeping",
            DispatcherActivity::Running => "request",
        }
    }
}

/// Thread ids of the layout (per node): the dispatcher, cores from 1, request lanes.
const DISPATCHER_TID: u32 = 0;
const CORE_TID: u32 = 1;
const LANE_TID: u32 = 100_000;

/// A value of an instant's argument.
#[derive(Debug, Clone, Copy)]
pub enum Arg {
    Str(&'static str),
    Int(u64),
}

#[derive(Debug, Clone)]
enum Ev {
    Slice { node: u16, tid: u32, name: &'static str, req: Option<u64>, start: Nanos, end: Nanos },
    Instant { node: u16, core: Option<u16>, name: &'static str, at: Nanos, arg: Option<(&'static str, Arg)> },
    Counter { node: u16, name: &'static str, at: Nanos, value: f64 },
    Request { node: u16, id: u64, start: Nanos, end: Nanos, dropped: bool },
}

/// What a trace holds once written, for the caller's report.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct TraceStats {
    pub events: usize,
    /// When the size cap stopped the recording (None: the whole window is in the trace).
    pub truncated_at: Option<Nanos>,
    /// Request slices not drawn because more than [`MAX_REQUEST_LANES`] were in the server.
    pub requests_not_drawn: u64,
}

/// A trace being recorded: events inside `[start, end)` (ns from the run's start), at most
/// `max_events` of them.
#[derive(Debug, Clone)]
pub struct Trace {
    start: Nanos,
    end: Nanos,
    max_events: usize,
    events: Vec<Ev>,
    truncated_at: Option<Nanos>,
    /// Per node: its cores, and whether it has a dispatcher (for the track names).
    nodes: Vec<(usize, bool)>,
}

impl Trace {
    pub fn new(start: Nanos, end: Nanos, max_events: usize) -> Self {
        Self { start, end, max_events, events: Vec::new(), truncated_at: None, nodes: Vec::new() }
    }

    /// Declares node `node` with `cores` cores (and a dispatcher track if `dispatcher`).
    pub fn add_node(&mut self, node: u16, cores: usize, dispatcher: bool) {
        let i = node as usize;
        if self.nodes.len() <= i {
            self.nodes.resize(i + 1, (0, false));
        }
        self.nodes[i] = (cores, dispatcher);
    }

    pub fn window(&self) -> (Nanos, Nanos) {
        (self.start, self.end)
    }

    /// Whether `t` is inside the window.
    #[inline]
    pub fn covers(&self, t: Nanos) -> bool {
        t >= self.start && t < self.end
    }

    /// Whether the cap has stopped the recording.
    pub fn full(&self) -> bool {
        self.truncated_at.is_some()
    }

    fn push(&mut self, ev: Ev, at: Nanos) {
        if self.truncated_at.is_some() {
            return;
        }
        if self.events.len() >= self.max_events {
            self.truncated_at = Some(at);
            return;
        }
        self.events.push(ev);
    }

    /// The part of `[start, end)` inside the window, if any.
    fn clip(&self, start: Nanos, end: Nanos) -> Option<(Nanos, Nanos)> {
        let (s, e) = (start.max(self.start), end.min(self.end));
        (s < e).then_some((s, e))
    }

    /// Core `core` of `node` did `what` over `[start, end)` (for request `req`, if any).
    pub fn core_slice(&mut self, node: u16, core: u16, what: CoreActivity, req: Option<u64>, start: Nanos, end: Nanos) {
        if let Some((s, e)) = self.clip(start, end) {
            self.push(Ev::Slice { node, tid: CORE_TID + core as u32, name: what.name(), req, start: s, end: e }, s);
        }
    }

    /// The dispatcher of `node` did `what` over `[start, end)`.
    pub fn dispatcher_slice(&mut self, node: u16, what: DispatcherActivity, req: Option<u64>, start: Nanos, end: Nanos) {
        if let Some((s, e)) = self.clip(start, end) {
            self.push(Ev::Slice { node, tid: DISPATCHER_TID, name: what.name(), req, start: s, end: e }, s);
        }
    }

    /// Request `id` was in the server of `node` over `[start, end)`; drawn if it ended in the
    /// window (a request is counted where it completes, as the summary counts it).
    pub fn request(&mut self, node: u16, id: u64, start: Nanos, end: Nanos, dropped: bool) {
        if self.covers(end) {
            self.push(Ev::Request { node, id, start: start.max(self.start), end, dropped }, end);
        }
    }

    /// An instant on a core of `node` (or on the node when `core` is None).
    pub fn instant(&mut self, node: u16, core: Option<u16>, name: &'static str, at: Nanos, arg: Option<(&'static str, Arg)>) {
        if self.covers(at) {
            self.push(Ev::Instant { node, core, name, at, arg }, at);
        }
    }

    /// A counter's new value.
    pub fn counter(&mut self, node: u16, name: &'static str, at: Nanos, value: f64) {
        if self.covers(at) && value.is_finite() {
            self.push(Ev::Counter { node, name, at, value }, at);
        }
    }

    /// Writes the trace as trace-event JSON, with `meta` (the run's facts) under
    /// `metadata.microsched`.
    pub fn write_json(&self, w: &mut dyn Write, mut meta: serde_json::Map<String, serde_json::Value>) -> io::Result<TraceStats> {
        let (lanes, not_drawn) = self.request_lanes();
        let stats = TraceStats { events: self.events.len(), truncated_at: self.truncated_at, requests_not_drawn: not_drawn };
        meta.insert("window_ms".into(), serde_json::json!([self.start as f64 / 1e6, self.end as f64 / 1e6]));
        meta.insert("max_events".into(), self.max_events.into());
        meta.insert("events".into(), self.events.len().into());
        meta.insert(
            "truncated".into(),
            match self.truncated_at {
                Some(t) => serde_json::json!({"at_ms": t as f64 / 1e6, "reason": format!("the size cap of {} events (--trace-max-events) was reached", self.max_events)}),
                None => serde_json::Value::Null,
            },
        );
        meta.insert("requests_not_drawn".into(), not_drawn.into());
        meta.insert("format".into(), "microsched trace 1: one process per node; threads: dispatcher, core K, requests L".into());
        write!(w, "{{\"displayTimeUnit\":\"ns\",\"metadata\":{{\"microsched\":")?;
        serde_json::to_writer(&mut *w, &meta)?;
        write!(w, "}},\"traceEvents\":[")?;
        let mut first = true;
        let mut sep = |w: &mut dyn Write| -> io::Result<()> {
            if !first {
                w.write_all(b",\n")?;
            }
            first = false;
            Ok(())
        };
        let max_lane = lanes.iter().flatten().copied().max();
        for (i, &(cores, dispatcher)) in self.nodes.iter().enumerate() {
            let pid = i + 1;
            sep(w)?;
            write!(w, r#"{{"ph":"M","pid":{pid},"name":"process_name","args":{{"name":"node {i}"}}}}"#)?;
            let mut thread = |w: &mut dyn Write, tid: u32, name: &str, order: i64| -> io::Result<()> {
                sep(w)?;
                write!(w, r#"{{"ph":"M","pid":{pid},"tid":{tid},"name":"thread_name","args":{{"name":"{name}"}}}}"#)?;
                sep(w)?;
                write!(w, r#"{{"ph":"M","pid":{pid},"tid":{tid},"name":"thread_sort_index","args":{{"sort_index":{order}}}}}"#)
            };
            if dispatcher {
                thread(w, DISPATCHER_TID, "dispatcher", -1)?;
            }
            for k in 0..cores {
                thread(w, CORE_TID + k as u32, &format!("core {k}"), k as i64)?;
            }
            for l in 0..=max_lane.unwrap_or(0) {
                if max_lane.is_some() {
                    thread(w, LANE_TID + l as u32, &format!("requests {l}"), 10_000 + l as i64)?;
                }
            }
        }
        for (ev, lane) in self.events.iter().zip(&lanes) {
            match *ev {
                Ev::Slice { node, tid, name, req, start, end } => {
                    sep(w)?;
                    let pid = node as u32 + 1;
                    match req {
                        Some(id) => write!(
                            w,
                            r#"{{"ph":"X","pid":{pid},"tid":{tid},"name":"{name} {id}","ts":{},"dur":{},"args":{{"request":{id}}}}}"#,
                            Us(start),
                            Us(end - start)
                        )?,
                        None => write!(w, r#"{{"ph":"X","pid":{pid},"tid":{tid},"name":"{name}","ts":{},"dur":{}}}"#, Us(start), Us(end - start))?,
                    }
                }
                Ev::Request { node, id, start, end, dropped } => {
                    let Some(l) = lane else { continue };
                    sep(w)?;
                    let pid = node as u32 + 1;
                    let tid = LANE_TID + *l as u32;
                    write!(
                        w,
                        r#"{{"ph":"X","pid":{pid},"tid":{tid},"cat":"request","name":"request {id}","ts":{},"dur":{},"args":{{"request":{id},"dropped":{dropped}}}}}"#,
                        Us(start),
                        Us(end - start)
                    )?;
                }
                Ev::Instant { node, core, name, at, arg } => {
                    sep(w)?;
                    let pid = node as u32 + 1;
                    let (scope, tid) = match core {
                        Some(c) => ("t", CORE_TID + c as u32),
                        None => ("p", DISPATCHER_TID),
                    };
                    write!(w, r#"{{"ph":"i","s":"{scope}","pid":{pid},"tid":{tid},"name":"{name}","ts":{}"#, Us(at))?;
                    match arg {
                        Some((k, Arg::Str(v))) => write!(w, r#","args":{{"{k}":"{v}"}}}}"#)?,
                        Some((k, Arg::Int(v))) => write!(w, r#","args":{{"{k}":{v}}}}}"#)?,
                        None => write!(w, "}}")?,
                    }
                }
                Ev::Counter { node, name, at, value } => {
                    sep(w)?;
                    let pid = node as u32 + 1;
                    write!(w, r#"{{"ph":"C","pid":{pid},"name":"{name}","ts":{},"args":{{"value":{value}}}}}"#, Us(at))?;
                }
            }
        }
        write!(w, "]}}")?;
        Ok(stats)
    }

    /// A lane per request slice (None for non-request events and requests beyond the lanes):
    /// each request goes on the lowest lane free at its start, per node.
    fn request_lanes(&self) -> (Vec<Option<usize>>, u64) {
        let mut order: Vec<usize> = (0..self.events.len()).filter(|&i| matches!(self.events[i], Ev::Request { .. })).collect();
        order.sort_by_key(|&i| match self.events[i] {
            Ev::Request { node, start, id, .. } => (node, start, id),
            _ => unreachable!("filtered"),
        });
        let mut lanes = vec![None; self.events.len()];
        let mut free_at: Vec<Vec<Nanos>> = vec![Vec::new(); self.nodes.len().max(1)];
        let mut not_drawn = 0;
        for i in order {
            let Ev::Request { node, start, end, .. } = self.events[i] else { unreachable!("filtered") };
            let node_lanes = &mut free_at[node as usize];
            match node_lanes.iter().position(|&f| f <= start) {
                Some(l) => {
                    node_lanes[l] = end;
                    lanes[i] = Some(l);
                }
                None if node_lanes.len() < MAX_REQUEST_LANES => {
                    node_lanes.push(end);
                    lanes[i] = Some(node_lanes.len() - 1);
                }
                None => not_drawn += 1,
            }
        }
        (lanes, not_drawn)
    }
}

/// Nanoseconds written as the format's microseconds, exactly.
struct Us(Nanos);

impl std::fmt::Display for Us {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{:03}", self.0 / 1000, self.0 % 1000)
    }
}

/// Why the parks of one attempt parked (CoreSync's gate; Caladan parks without one).
pub fn park_reason(g: &crate::summary::ParkGate, gated: bool) -> &'static str {
    if !gated {
        "idle (no gate)"
    } else if g.parked_at_once > 0 {
        "parked at once"
    } else if g.parked_after_cut > 0 {
        "parked after cut"
    } else {
        "parked without credits"
    }
}

/// A bit per veto reason, so that a core records each reason once per idle stretch.
pub fn veto_bit(reason: &str) -> u8 {
    match reason {
        "a session is drained" => 1,
        "another core is parking" => 2,
        "waiting for credits to come back" => 4,
        _ => 8,
    }
}

/// Why an attempt kept the core polling, if it did.
pub fn veto_reason(g: &crate::summary::ParkGate) -> Option<&'static str> {
    if g.vetoed_drained > 0 {
        Some("a session is drained")
    } else if g.waited_for_parker > 0 {
        Some("another core is parking")
    } else if g.waited_for_revocation > 0 {
        Some("waiting for credits to come back")
    } else if g.cuts > 0 {
        Some("cut credits")
    } else {
        None
    }
}

/// Parses `--trace-window START_MS:END_MS` (milliseconds, START < END).
pub fn parse_window(text: &str) -> Result<(f64, f64), String> {
    let err = || format!("--trace-window: {text:?} is not START_MS:END_MS with 0 <= START_MS < END_MS (e.g. 0:20)");
    let (a, b) = text.split_once(':').ok_or_else(err)?;
    let (a, b): (f64, f64) = (a.trim().parse().map_err(|_| err())?, b.trim().parse().map_err(|_| err())?);
    if !(a.is_finite() && b.is_finite() && a >= 0.0 && a < b) {
        return Err(err());
    }
    Ok((a, b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_parses_and_rejects() {
        assert_eq!(parse_window("0:20"), Ok((0.0, 20.0)));
        assert_eq!(parse_window("1.5:2"), Ok((1.5, 2.0)));
        for bad in ["", "5", "5:5", "6:5", "-1:3", "a:b", "1:inf"] {
            assert!(parse_window(bad).unwrap_err().starts_with("--trace-window:"), "{bad}");
        }
    }

    #[test]
    fn cap_cuts_and_says_when() {
        let mut t = Trace::new(0, 1000, 2);
        t.add_node(0, 1, false);
        for i in 0..5 {
            t.core_slice(0, 0, CoreActivity::Searching, None, i * 10, i * 10 + 5);
        }
        let mut out = Vec::new();
        let stats = t.write_json(&mut out, serde_json::Map::new()).unwrap();
        assert_eq!(stats.events, 2);
        assert_eq!(stats.truncated_at, Some(20));
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["metadata"]["microsched"]["truncated"]["at_ms"], 20.0 / 1e6);
    }

    #[test]
    fn slices_are_clipped_to_the_window_and_requests_get_lanes() {
        let mut t = Trace::new(100, 200, 100);
        t.add_node(0, 1, false);
        t.core_slice(0, 0, CoreActivity::Running, Some(7), 50, 150);
        t.core_slice(0, 0, CoreActivity::Parked, None, 10, 90);
        t.request(0, 1, 90, 150, false);
        t.request(0, 2, 120, 160, false);
        t.request(0, 3, 160, 170, false);
        t.request(0, 4, 150, 250, false); // ends after the window
        let mut out = Vec::new();
        t.write_json(&mut out, serde_json::Map::new()).unwrap();
        let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let evs = v["traceEvents"].as_array().unwrap();
        let x: Vec<_> = evs.iter().filter(|e| e["ph"] == "X").collect();
        assert_eq!(x.len(), 4);
        assert_eq!(x[0]["name"], "request 7");
        assert_eq!(x[0]["ts"], 0.1);
        assert_eq!(x[0]["dur"], 0.05);
        let lane = |id: u64| x.iter().find(|e| e["args"]["request"] == id && e["cat"] == "request").unwrap()["tid"].as_u64().unwrap();
        assert_ne!(lane(1), lane(2));
        assert_eq!(lane(3), lane(1));
    }
}
