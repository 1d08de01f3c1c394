//! The driver: applications' clients and the network around the server nodes, policies driven at
//! their intervals, metrics over the measured window. This file holds the driver's state, its
//! construction and a run's start and end; each concern has its own file:
//!
//! - `dispatch`: the loop and event dispatch;
//! - `network`: the trips between clients and nodes;
//! - `clients`: generation, sending, resending, responses;
//! - `completion`: a core's slice end and the response leaving the server;
//! - `admission`: the node-side credit glue and SEDA (the only file naming overload policies);
//! - `parking`: the park rule and its timers, the allocator's ticks;
//! - `window`: the measurement window and sampling;
//! - `summary`: the results at the end.
//!
//! Invariants: a run is a function of the scenario and the seed (the wall clock and the tracer
//! change no result); `now` never decreases.

mod admission;
mod clients;
mod completion;
mod dispatch;
mod network;
mod parking;
mod summary;
mod window;

use std::time::Instant;

use microsched_core::rng::stream;
use microsched_core::scenario::{Loaded, Scenario};
use microsched_core::time::{ms, us};
use microsched_core::{Nanos, ScenarioError};

use crate::app::App;
use crate::events::{Event, EventQueue};
use crate::node::{AppLocks, Node};
use crate::requests::Slab;
use crate::result::{RequestLog, SimResult, TimeSeries};
use crate::trace::{NoTrace, Recorder, Tracer};
use microsched_core::program::Op;
use microsched_core::trace::Trace;

use network::Network;
use window::Interval;

/// Events between two calls of a run's check (progress, interruption): a few milliseconds of
/// wall-clock time.
pub const CHECK_EVERY: u64 = 1 << 16;

pub struct Sim<T: Tracer = NoTrace> {
    scenario: Scenario,
    now: Nanos,
    end: Nanos,
    warmup: Nanos,
    measuring: bool,
    evq: EventQueue,
    slab: Slab,
    nodes: Vec<Node>,
    apps: Vec<App>,
    net: Network,
    /// Reused buffer for one request's drawn program.
    ops: Vec<Op>,
    search_pass: Nanos,
    sample_every: Nanos,
    interval: Interval,
    last_sample_at: Nanos,
    /// Σ over samples of the requests waiting for credits at clients (credit control only).
    client_queued_sum: f64,
    series: TimeSeries,
    log: Option<RequestLog>,
    events: u64,
    /// Lock-level drops: failure replies' delays over the measured window, and the cleanup
    /// threads alive (slab entries that are no client's request).
    failure_reply: Option<FailureReplies>,
    /// SEDA's client-side rate limiters, sessions numbered across applications.
    seda: Option<admission::RateLimits>,
    /// What sees the run's events: the timeline recorder of a traced run (`--trace`), or
    /// [`NoTrace`].
    tracer: T,
}

struct FailureReplies {
    delay: hdrhistogram::Histogram<u64>,
    sum: u128,
    ghosts: u64,
}

impl Sim {
    /// An untraced run of `loaded` with `seed`.
    pub fn new(loaded: &Loaded, seed: u64) -> Result<Self, ScenarioError> {
        Self::with_tracer(loaded, seed, |_| NoTrace)
    }
}

impl Sim<Recorder> {
    /// A run of `loaded` with `seed` that records its timeline into `trace` (its window and
    /// size cap set).
    pub fn traced(loaded: &Loaded, seed: u64, trace: Trace) -> Result<Self, ScenarioError> {
        Self::with_tracer(loaded, seed, |nodes| Recorder::new(trace, nodes))
    }
}

impl<T: Tracer> Sim<T> {
    /// A run of `loaded` with `seed`, its events seen by what `tracer` makes of its nodes.
    fn with_tracer(loaded: &Loaded, seed: u64, tracer: impl FnOnce(&[Node]) -> T) -> Result<Self, ScenarioError> {
        let sc = loaded.scenario.clone();
        let base = &loaded.base_dir;
        let credit_based = admission::clients_take_credits(&sc);
        let mut apps = Vec::new();
        let (mut sessions, mut mutexes, mut condvars) = (0u32, 0u32, 0u32);
        for a in sc.apps() {
            let mut app = App::new(&sc, &a, base, seed, sessions, mutexes, credit_based)?;
            app.own_node = sc.server.per_application_cores.then_some(apps.len() as u16);
            app.condvar_base = condvars;
            sessions += app.sessions;
            mutexes += app.programs.mutexes();
            condvars += app.programs.condvar_count();
            apps.push(app);
        }
        let seda = admission::rate_limits(&sc, &apps, seed);
        let locks = AppLocks {
            spin: apps.iter().flat_map(|a| (0..a.programs.mutexes()).map(|m| a.programs.is_spin(m))).collect(),
            families: apps.iter().flat_map(|a| a.programs.families().map(|(n, _, c)| (n, c))).collect(),
            condvars: apps.iter().flat_map(|a| a.programs.condvars().map(|(n, _)| n.to_string())).collect(),
        };
        let mut nodes: Vec<Node> = (0..sc.node_count() as u16).map(|i| Node::new(&sc, i, seed, sessions, &locks, base)).collect::<Result<_, _>>()?;
        admission::install_start_drop(&sc, &mut nodes);
        let failure_reply = sc.server.lock_control.is_some().then(|| FailureReplies { delay: hdrhistogram::Histogram::new(3).expect("valid sigfig"), sum: 0, ghosts: 0 });
        let warmup = ms(sc.warmup_ms);
        let tracer = tracer(&nodes);
        Ok(Self {
            now: 0,
            end: warmup + ms(sc.duration_ms),
            warmup,
            measuring: warmup == 0,
            evq: EventQueue::with_capacity(1024),
            slab: if sc.metrics.record_requests { Slab::with_stamps() } else { Slab::default() },
            nodes,
            apps,
            net: Network { one_way: us(sc.network.rtt_us) / 2, jitter: us(sc.network.jitter_us), rng: stream(seed, "network") },
            ops: Vec::new(),
            search_pass: (sc.server.search_pass_ns.round() as Nanos).max(1),
            sample_every: microsched_core::scenario::sample_interval_ns(&sc),
            interval: Interval::default(),
            last_sample_at: 0,
            client_queued_sum: 0.0,
            series: TimeSeries::default(),
            log: sc.metrics.record_requests.then(RequestLog::default),
            events: 0,
            failure_reply,
            seda,
            scenario: sc,
            tracer,
        })
    }

    /// Runs to the end of the measured window and returns the results.
    pub fn run(self) -> SimResult {
        self.run_checked(&mut |_, _| true)
    }

    /// Runs as [`Sim::run`], calling `check(now, end)` every [`CHECK_EVERY`] events (progress,
    /// interruption); when it returns false the run stops there and the results cover what was
    /// simulated so far (`summary.sim.interrupted_at_ms` says when).
    pub fn run_checked(self, check: &mut dyn FnMut(Nanos, Nanos) -> bool) -> SimResult {
        self.run_recorded(check).0
    }

    /// As [`Sim::run_checked`], and the timeline of a [`Sim::traced`] run.
    pub fn run_recorded(mut self, check: &mut dyn FnMut(Nanos, Nanos) -> bool) -> (SimResult, Option<Trace>) {
        let wall = Instant::now();
        for i in 0..self.apps.len() {
            if let Some(t) = self.apps[i].arrivals.next() {
                self.schedule_arrival(i as u16, t);
            }
        }
        if self.warmup > 0 {
            self.evq.push(self.warmup, Event::WarmupEnd);
        } else {
            // No warm-up: the window is the whole run, and the servers' window counters (lock
            // statistics, drops at locks and at worker start, condition variables) start now;
            // without this they never started and a run with locks reported none.
            for n in &mut self.nodes {
                n.server.start_window(0);
            }
        }
        self.evq.push(self.sample_every, Event::Sample);
        for node in 0..self.nodes.len() {
            let idle = self.nodes[node].server.begin_searches(0, &mut self.evq);
            for core in idle {
                self.arm_sweep_park(node as u16, core);
            }
        }
        for (i, n) in self.nodes.iter_mut().enumerate() {
            if let Some(iv) = n.allocator.interval() {
                self.evq.push(iv, Event::AllocTick { node: i as u16 });
            }
            if let Some(gap) = n.server.next_irq_gap() {
                self.evq.push(gap, Event::Handler { node: i as u16 });
            }
        }
        for (i, n) in self.nodes.iter_mut().enumerate() {
            let node = i as u16;
            if let Some(c) = &mut n.credit {
                if let Some(iv) = c.ctl.timer_interval() {
                    self.evq.push(iv, Event::CreditTimer { node });
                }
                if let Some(p) = c.poll {
                    self.evq.push(p, Event::DelayPoll { node });
                }
                // The controller assumes every core active until told otherwise.
                let active = n.server.active_count() as u32;
                c.active_reported = active;
                c.ctl.on_cores_changed(0, active);
            }
        }
        let interrupted = self.event_loop(check);
        if let Some((t, ev)) = interrupted {
            self.end_after_stop(t, ev);
        }
        self.now = self.end;
        if self.last_sample_at < self.end {
            self.sample(); // the last, possibly partial, interval
        }
        let wall_s = wall.elapsed().as_secs_f64();
        let mut result = self.finish(wall_s);
        result.summary.sim.interrupted_at_ms = interrupted.map(|(t, _)| t as f64 / 1e6);
        (result, self.tracer.finish(self.end))
    }
}
