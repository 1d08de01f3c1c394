//! The event loop: applications' clients and the network around the server nodes, policies
//! driven at their intervals, metrics over the measured window.

use std::time::Instant;

use microsched_core::alloc::{AllocAction, ParkMode, ParkRule, ParkVerdict};
use microsched_core::overload::client::{ClientDrop, Out};
use microsched_core::overload::{Admission, CreditLink};
use microsched_core::rng::{stream, Stream};
use microsched_core::overload::seda::{Admit, Seda};
use microsched_core::scenario::{Loaded, OverloadCfg, Scenario};
use microsched_core::sched::asqm::LockStats;
use microsched_core::summary::{CoreTime, Cores, DispatcherLoad, Harvest, Irq, LockDrops, Parking, Requests, Sched, SimStats, Summary};
use microsched_core::time::{ms, us};
use microsched_core::{Nanos, ScenarioError};
use rand::Rng;

use crate::app::{App, PREFETCH_MIN_SESSIONS};
use crate::dispatcher::Work;
use crate::events::{Event, EventQueue, ARRIVAL_LANE, NETWORK_LANE};
use crate::node::Node;
use crate::requests::{Req, Slab, Stamps};
use crate::result::{RequestLog, SimResult, TimeSeries};
use crate::server::{Idle, LockDropState, SliceEnd};
use crate::trace::Recorder;
use microsched_core::trace::Trace;
use microsched_core::program::Op;

struct Network {
    one_way: Nanos,
    jitter: Nanos,
    rng: Stream,
}

impl Network {
    /// Schedules `ev` one network trip from `now`.
    #[inline(always)]
    fn send(&mut self, now: Nanos, ev: Event, evq: &mut EventQueue) {
        let at = self.arrival(now);
        self.deliver(at, ev, evq);
    }

    /// When a trip leaving at `now` arrives (draws its jitter).
    #[inline(always)]
    fn arrival(&mut self, now: Nanos) -> Nanos {
        if self.jitter == 0 {
            now + self.one_way
        } else {
            now + self.one_way + self.rng.gen_range(0..=self.jitter)
        }
    }

    /// Schedules `ev` at `at`, a trip's `arrival`.
    #[inline(always)]
    fn deliver(&self, at: Nanos, ev: Event, evq: &mut EventQueue) {
        if self.jitter == 0 {
            // Constant delay: trips arrive in the order they were sent.
            evq.push_in_order(NETWORK_LANE, at, ev);
        } else {
            evq.push(at, ev);
        }
    }
}

/// Counters of one time-series interval.
#[derive(Default, Clone, Copy)]
struct Interval {
    arrivals: u64,
    completions: u64,
    drops: u64,
}

/// Events between two calls of a run's check (progress, interruption): a few milliseconds of
/// wall-clock time.
pub const CHECK_EVERY: u64 = 1 << 16;

pub struct Sim {
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
    seda: Option<Seda>,
    /// The timeline recorder of a traced run (`--trace`); None: untraced.
    trace: Option<Box<Recorder>>,
}

struct FailureReplies {
    delay: hdrhistogram::Histogram<u64>,
    sum: u128,
    ghosts: u64,
}

impl Sim {
    pub fn new(loaded: &Loaded, seed: u64) -> Result<Self, ScenarioError> {
        let sc = loaded.scenario.clone();
        let base = &loaded.base_dir;
        let credit_based = !matches!(sc.policy.overload, OverloadCfg::None | OverloadCfg::Seda(_));
        let mut apps = Vec::new();
        let (mut sessions, mut mutexes) = (0u32, 0u32);
        let mut spin_locks = Vec::new();
        for a in sc.apps() {
            let mut app = App::new(&sc, &a, base, seed, sessions, mutexes, credit_based)?;
            app.own_node = sc.server.per_application_cores.then_some(apps.len() as u16);
            sessions += app.sessions;
            mutexes += app.programs.mutexes();
            spin_locks.extend((0..app.programs.mutexes()).map(|m| app.programs.is_spin(m)));
            apps.push(app);
        }
        let seda = match &sc.policy.overload {
            OverloadCfg::Seda(c) => {
                let share = apps.iter().flat_map(|a| std::iter::repeat_n(a.initial_rps / a.sessions.max(1) as f64, a.sessions as usize));
                Some(Seda::new(c, share.collect(), seed))
            }
            _ => None,
        };
        let mut nodes: Vec<Node> = (0..sc.node_count() as u16).map(|i| Node::new(&sc, i, seed, sessions, spin_locks.clone())).collect::<Result<_, _>>()?;
        if let OverloadCfg::Breakwater(b) = &sc.policy.overload {
            if let Some(budget) = b.latency_budget_us {
                let exact = sc.server.delay_signal == microsched_core::scenario::DelaySignal::Exact;
                for n in &mut nodes {
                    n.server.start_drop = Some(crate::server::StartDrop { budget: us(budget), exact, sampled: 0, drops: 0 });
                }
            }
        }
        if let Some(w) = &sc.server.wake_latency {
            let sampler = w.build(base, "server.wake_latency")?;
            for (i, n) in nodes.iter_mut().enumerate() {
                n.wake = Some((sampler.clone(), stream(seed, &format!("wake{}", if i == 0 { String::new() } else { i.to_string() }))));
            }
        }
        for (i, n) in nodes.iter_mut().enumerate() {
            if let Some(w) = n.allocator.lent_wake() {
                let sampler = w.build(base, "policy.allocator.mechanism.lent_wake")?;
                n.lent_wake = Some((sampler, stream(seed, &format!("lent_wake{i}"))));
            }
            if let Some(t) = n.allocator.timeshare() {
                n.server.timeshare = Some(Box::new(crate::server::Timesharing {
                    turn: us(t.turn_us),
                    first_turn: (us(t.first_turn_min_us), us(t.first_turn_max_us)),
                    rng: stream(seed, &format!("timeshare{i}")),
                }));
            }
        }
        let failure_reply = sc.server.lock_control.as_ref().map(|lc| {
            let rule = lc.build();
            let families: Vec<(&str, u32)> = apps.iter().flat_map(|a| a.programs.families().map(|(n, _, c)| (n, c))).collect();
            let cleanup: Vec<bool> = families
                .iter()
                .flat_map(|&(n, c)| std::iter::repeat_n(lc.cleanup_lock.as_deref() == Some(n), c as usize))
                .collect();
            for n in &mut nodes {
                let stats = LockStats::new(families.iter().copied());
                n.server.locks = Some(Box::new(LockDropState::new(rule, cleanup.clone(), stats)));
            }
            FailureReplies { delay: hdrhistogram::Histogram::new(3).expect("valid sigfig"), sum: 0, ghosts: 0 }
        });
        let warmup = ms(sc.warmup_ms);
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
            trace: None,
        })
    }

    /// Records the run's timeline into `trace` (its window and size cap set).
    pub fn traced(mut self, trace: Trace) -> Self {
        self.trace = Some(Box::new(Recorder::new(trace, &self.nodes)));
        self
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
            if let Some(gap) = n.server.irq.as_mut().and_then(|irq| irq.next_gap()) {
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
        // Two copies of the loop: an untraced run's has no trace check per event.
        let interrupted = if self.trace.is_some() { self.event_loop::<true>(check) } else { self.event_loop::<false>(check) };
        if let Some((t, ev)) = interrupted {
            self.end_after_stop(t, ev);
        }
        self.now = self.end;
        if self.last_sample_at < self.end {
            self.sample(); // the last, possibly partial, interval
        }
        let trace = self.trace.take().map(|mut r| {
            r.finish(self.end);
            r.trace
        });
        let wall_s = wall.elapsed().as_secs_f64();
        let mut result = self.finish(wall_s);
        result.summary.sim.interrupted_at_ms = interrupted.map(|(t, _)| t as f64 / 1e6);
        (result, trace)
    }

    /// Handles events up to the end of the run; returns the event at which `check` stopped it.
    #[inline(always)]
    fn event_loop<const TRACED: bool>(&mut self, check: &mut dyn FnMut(Nanos, Nanos) -> bool) -> Option<(Nanos, Event)> {
        while let Some((t, ev)) = self.evq.pop() {
            if t >= self.end {
                break;
            }
            self.now = t;
            self.events += 1;
            if self.events.is_multiple_of(CHECK_EVERY) && !check(t, self.end) {
                return Some((t, ev));
            }
            if TRACED {
                self.step_traced(ev);
            } else {
                self.step(ev);
            }
        }
        None
    }

    /// A traced run's step: the recorder sees arrivals, then what the event changed.
    #[cold]
    #[inline(never)]
    fn step_traced(&mut self, ev: Event) {
        if let Some(r) = self.trace.as_deref_mut() {
            r.before(self.now, &self.nodes, &self.slab);
            if let Event::ServerArrive { req, .. } = ev {
                r.arrive(req, self.now);
            }
        }
        self.step(ev);
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
        if let Some(r) = self.trace.as_deref_mut() {
            r.poll(self.now, &self.nodes, &self.slab, about);
        }
    }

    /// A run stopped at `t`, before handling `ev`. Responses already booked at their completion
    /// land up to a network trip after the stop: the window runs on for the longest trip, so
    /// that it holds every response it counts (microseconds of simulated time; the window is
    /// half-open), and is empty if the run stopped in warm-up.
    #[cold]
    #[inline(never)]
    fn end_after_stop(&mut self, t: Nanos, ev: Event) {
        self.end = self.end.min(t + self.net.one_way + self.net.jitter + 1);
        self.step(ev); // t < self.end
        while let Some((t, ev)) = self.evq.pop() {
            if t >= self.end {
                break;
            }
            self.now = t;
            self.events += 1;
            if self.trace.is_some() {
                self.step_traced(ev);
            } else {
                self.step(ev);
            }
        }
        self.end = self.end.max(self.warmup);
    }

    #[inline(always)]
    fn step(&mut self, ev: Event) {
        self.handle(ev);
        if self.nodes.iter().any(|n| n.server.has_followups()) {
            self.followups();
        }
    }

    /// What the nodes' servers left for the driver while handling an event: park attempts that
    /// found work, and cores that ran out of it (kept out of line: most events leave none).
    #[cold]
    #[inline(never)]
    fn followups(&mut self) {
        for node in 0..self.nodes.len() as u16 {
            while let Some(core) = self.nodes[node as usize].server.aborted_parks.pop() {
                self.park_aborted(node, core);
            }
            while let Some((core, idle)) = self.nodes[node as usize].server.idled.pop() {
                self.after_idle(node, core, idle);
            }
        }
    }

    fn handle(&mut self, ev: Event) {
        let now = self.now;
        match ev {
            Event::Generate { app } => self.generate(app),
            Event::ServerArrive { req, demand } => {
                let node = self.slab[req].node;
                if self.nodes[node as usize].credit.is_none() {
                    self.nodes[node as usize].server.arrive(req, now, &mut self.slab, &mut self.evq);
                } else {
                    self.credit_arrive(req, demand);
                }
            }
            Event::CoreDone { node, core, gen } => {
                let end = self.nodes[node as usize].server.slice_end(core, gen, now, &mut self.slab, &mut self.evq);
                self.after_slice(node, core, end);
            }
            Event::OverheadDone { node, core, gen } => {
                let end = self.nodes[node as usize].server.overhead_done(core, gen, now, &mut self.slab, &mut self.evq);
                self.after_slice(node, core, end);
            }
            Event::LockGranted { node, core, gen } => {
                let end = self.nodes[node as usize].server.lock_granted(core, gen, now, &mut self.slab, &mut self.evq);
                self.after_slice(node, core, end);
            }
            Event::DispatchDone { node } => self.nodes[node as usize].server.dispatch_done(now, &mut self.slab, &mut self.evq),
            Event::DispatcherWork { node, gen } => {
                if let Some(req) = self.nodes[node as usize].server.dispatcher_work(gen, now, &mut self.slab, &mut self.evq) {
                    self.respond(node, req);
                }
            }
            Event::StealDone { node, core } => {
                let idle = self.nodes[node as usize].server.steal_done(core, now, &mut self.slab, &mut self.evq);
                self.after_idle(node, core, idle);
            }
            Event::WakeDone { node, core } => {
                self.nodes[node as usize].parking.wakeups += 1;
                self.park_aborted(node, core);
                let idle = self.nodes[node as usize].server.wake_done(core, now, &mut self.slab, &mut self.evq);
                self.cores_changed(node);
                self.after_idle(node, core, idle);
            }
            Event::ParkCheck { node, core, epoch } => self.park_check(node, core, epoch),
            Event::Probe { node, core, victim, search } => {
                if let Some(idle) = self.nodes[node as usize].server.probe_event(core, victim, search, now, &mut self.slab, &mut self.evq) {
                    self.after_idle(node, core, idle);
                }
            }
            Event::SweepEnd { node, core, search } => self.sweep_end(node, core, search),
            Event::ResponseArrive { req, credits } => self.response(req, credits, now),
            Event::AllocTick { node } => self.alloc_tick(node),
            Event::Sample => self.sample(),
            Event::WarmupEnd => {
                self.measuring = true;
                for n in &mut self.nodes {
                    n.window_start_times = n.server.core_times(now);
                    n.window_start_sched = n.server.counters;
                    if let Some((snap, _)) = n.server.dispatcher_snapshot(now) {
                        n.window_start_dispatch = snap;
                    }
                    n.window_start_parking = n.parking_now();
                    n.window_start_core_busy = n.core_busy(now);
                    if let Some(l) = &mut n.server.locks {
                        l.stats.start_window(now);
                        l.drops = 0;
                    }
                    if let Some(sd) = &mut n.server.start_drop {
                        sd.drops = 0;
                    }
                }
            }
            Event::DropReply { req } => self.drop_reply(req),
            Event::Handler { node } => {
                let server = &mut self.nodes[node as usize].server;
                server.handler_lands(now, &mut self.slab, &mut self.evq);
                if let Some(gap) = server.irq.as_mut().and_then(|irq| irq.next_gap()) {
                    self.evq.push(now + gap, Event::Handler { node });
                }
            }
            Event::CreditRequest { node, session, demand } => {
                let c = self.nodes[node as usize].credit.as_mut().expect("credit events need a credit controller");
                if let Some(credits) = c.ctl.on_credit_request(now, session, demand) {
                    if self.measuring {
                        c.credit_messages += 1;
                    }
                    self.net.send(now, Event::CreditArrive { node, session, credits }, &mut self.evq);
                }
                self.send_wakeups(node);
            }
            Event::CreditArrive { node, session, credits } => {
                let (app, local) = self.app_of(session);
                let a = &mut self.apps[app];
                a.clients[node as usize].on_credits(local, credits, false, now, &mut a.out);
                self.client_outs(app, node);
            }
            Event::SedaRelease { session } => self.seda_release(session),
            Event::ClientTimeout { node, session } => {
                let (app, local) = self.app_of(session);
                let a = &mut self.apps[app];
                a.clients[node as usize].on_timer(local, now, &mut a.out);
                self.client_outs(app, node);
            }
            Event::CreditTimer { node } => {
                let delay = self.delay_signal(node);
                let c = self.nodes[node as usize].credit.as_mut().expect("credit events need a credit controller");
                c.ctl.on_timer(now, delay);
                if let Some(iv) = c.ctl.timer_interval() {
                    self.evq.push(now + iv, Event::CreditTimer { node });
                }
                self.send_wakeups(node);
            }
            Event::DelayPoll { node } => {
                let n = &mut self.nodes[node as usize];
                let d = n.server.max_delay(now, &self.slab);
                let c = n.credit.as_mut().expect("credit events need a credit controller");
                c.delay = d;
                if let Some(sd) = &mut n.server.start_drop {
                    sd.sampled = d;
                }
                if let Some(p) = c.poll {
                    self.evq.push(now + p, Event::DelayPoll { node });
                }
            }
        }
    }

    /// The application a session numbered across applications belongs to, and its number
    /// within it.
    #[inline]
    fn app_of(&self, session: u32) -> (usize, u32) {
        let app = self.apps.iter().rposition(|a| a.session_base <= session).expect("session 0 is the first app's");
        (app, session - self.apps[app].session_base)
    }

    /// What follows a core's slice end: the response of a finished request, and the core's
    /// search for work when it is free.
    #[inline(always)]
    fn after_slice(&mut self, node: u16, core: u16, end: SliceEnd) {
        let now = self.now;
        if let SliceEnd::Finished(_) = end {
            self.nodes[node as usize].server.dispatcher_note(Work::Completion, now, &mut self.evq);
        }
        match end {
            SliceEnd::Stale | SliceEnd::Running => return,
            SliceEnd::Finished(req) if self.slab[req].has(Req::GHOST) => {
                self.slab.remove(req);
                if let Some(f) = &mut self.failure_reply {
                    f.ghosts -= 1;
                }
            }
            SliceEnd::Finished(req) => {
                let dropped = self.respond(node, req);
                if dropped && self.cleanup(node, core, req) {
                    return;
                }
            }
            SliceEnd::Freed => {}
        }
        let idle = self.nodes[node as usize].server.find_work(core, now, &mut self.slab, &mut self.evq);
        self.after_idle(node, core, idle);
    }

    /// A finished request's response (or failure reply) leaves the server; true if it was
    /// dropped.
    #[inline(always)]
    fn respond(&mut self, node: u16, req: u32) -> bool {
        let now = self.now;
        self.slab.stamp(req, |s| s.done = now);
        let dropped = self.slab[req].dropped;
        if let Some(r) = self.trace.as_deref_mut() {
            r.respond(node, req, Some(self.slab[req].core), now, dropped);
        }
        let credited = self.nodes[node as usize].credit.is_some();
        let credits = if credited { self.credit_response(req, dropped) } else { 0 };
        let at = self.net.arrival(now);
        if !credited && self.settles_now(req, at) {
            self.response(req, credits, at);
        } else {
            self.net.deliver(at, Event::ResponseArrive { req, credits }, &mut self.evq);
        }
        if credited {
            self.send_wakeups(node);
        }
        dropped
    }

    /// Whether the response to `req`, reaching its client at `at`, can be booked now instead of
    /// as an event: nothing acts on its arrival (no credits, SEDA or request log; a failure
    /// reply, which may be retried or leave a cleanup thread, always travels), and nothing reads
    /// what it changes before `at` (it lands before the next sample, in the window it would
    /// land in, and before the run ends). Saves one event per request.
    #[inline(always)]
    fn settles_now(&self, req: u32, at: Nanos) -> bool {
        !self.slab[req].dropped
            && at < self.end
            && at < self.last_sample_at + self.sample_every
            && (self.measuring || at < self.warmup)
            && self.log.is_none()
            && self.seda.is_none()
    }

    /// After the failure reply of a request dropped at a lock step: its thread re-takes the
    /// cleanup lock it had taken (a dropped SET frees its item under the slab lock), never
    /// dropped, as a cleanup thread of its own on the same core. True if the core stays busy.
    fn cleanup(&mut self, node: u16, core: u16, req: u32) -> bool {
        let server = &mut self.nodes[node as usize].server;
        let Some(m) = server.take_cleanup(req) else { return false };
        let hold = server.locks.as_ref().map_or(0, |l| l.rule.cleanup_ns);
        let r = self.slab[req];
        let id = self.slab.stamps(req).id;
        let ghost = self.slab.insert(Req { created: self.now, session: r.session, flow: r.flow, app: r.app, node, has_program: true, flags: Req::GHOST, ..Req::default() }, id);
        if let Some(f) = &mut self.failure_reply {
            f.ghosts += 1;
        }
        server.set_program(ghost, &[Op::Acquire(m), Op::Compute(hold), Op::Release(m)]);
        server.run_cleanup(core, ghost, m, self.now, &mut self.slab, &mut self.evq)
    }

    /// The congestion signal a node's overload controller reads now: the cached sample, or
    /// measured.
    #[inline]
    fn delay_signal(&self, node: u16) -> Nanos {
        let n = &self.nodes[node as usize];
        match &n.credit {
            Some(c) if !c.exact => c.delay,
            _ => n.server.max_delay(self.now, &self.slab),
        }
    }

    /// A request reaches a node with a credit controller: admitted into the queues, or dropped
    /// by AQM and answered with a failure reply after the packet cost.
    fn credit_arrive(&mut self, req: u32, demand: u32) {
        let now = self.now;
        let node = self.slab[req].node;
        let delay = self.delay_signal(node);
        let flow = self.slab[req].flow;
        let n = &mut self.nodes[node as usize];
        let c = n.credit.as_mut().expect("credit path");
        match c.ctl.on_request(now, flow, demand, delay) {
            Admission::Admit => n.server.arrive(req, now, &mut self.slab, &mut self.evq),
            Admission::Drop => {
                if self.measuring {
                    c.aqm_drops += 1;
                }
                let pc = c.packet_cost;
                self.slab.stamp(req, |s| {
                    s.arrive = now;
                    s.start = now;
                });
                self.slab[req].dropped = true;
                if pc == 0 {
                    self.drop_reply(req);
                } else {
                    self.evq.push(now + pc, Event::DropReply { req });
                }
            }
        }
        self.send_wakeups(node);
    }

    /// The failure reply of an AQM-dropped request leaves, with credits.
    fn drop_reply(&mut self, req: u32) {
        let now = self.now;
        self.slab.stamp(req, |s| s.done = now);
        if let Some(r) = self.trace.as_deref_mut() {
            r.respond(self.slab[req].node, req, None, now, true);
        }
        let credits = self.credit_response(req, true);
        self.net.send(now, Event::ResponseArrive { req, credits }, &mut self.evq);
        self.send_wakeups(self.slab[req].node);
    }

    /// The controller's credits for the response to `req` leaving now.
    #[inline(always)]
    fn credit_response(&mut self, req: u32, dropped: bool) -> u32 {
        let node = self.slab[req].node;
        let delay = self.delay_signal(node);
        let flow = self.slab[req].flow;
        let c = self.nodes[node as usize].credit.as_mut().expect("credit path");
        c.ctl.on_response(self.now, flow, dropped, delay)
    }

    /// Sends the explicit credit messages of the sessions a node's controller woke.
    #[inline(always)]
    fn send_wakeups(&mut self, node: u16) {
        match &self.nodes[node as usize].credit {
            Some(c) if c.ctl.has_wakeups() => self.send_woken(node),
            _ => {}
        }
    }

    fn send_woken(&mut self, node: u16) {
        let Some(c) = &mut self.nodes[node as usize].credit else { return };
        c.ctl.take_wakeups(&mut c.wakeups);
        if self.measuring {
            c.credit_messages += c.wakeups.len() as u64;
        }
        for (session, credits) in c.wakeups.drain(..) {
            self.net.send(self.now, Event::CreditArrive { node, session, credits }, &mut self.evq);
        }
    }

    /// Carries out what an application's clients towards `node` decided.
    #[inline(always)]
    fn client_outs(&mut self, app: usize, node: u16) {
        let now = self.now;
        let mut out = std::mem::take(&mut self.apps[app].out);
        let base = self.apps[app].session_base;
        for &o in &out {
            match o {
                Out::Send { req, demand } => {
                    // The server-side session state is needed one network trip from now.
                    if let Some(c) = &self.nodes[node as usize].credit {
                        if self.apps[app].sessions >= PREFETCH_MIN_SESSIONS {
                            c.ctl.prefetch(self.slab[req].flow);
                        }
                    }
                    self.net.send(now, Event::ServerArrive { req, demand }, &mut self.evq)
                }
                Out::Drop { req, why } => {
                    let r = self.slab[req];
                    let replicas = self.nodes.len() as u16;
                    if why == ClientDrop::Timeout && self.apps[app].retry_timeouts && r.tries < self.apps[app].retries && replicas > 1 {
                        // No credit in time: to the next replica, with the local failure.
                        if self.measuring {
                            self.apps[app].retried += 1;
                            if let Some(f) = &mut self.failure_reply {
                                f.delay.record(now - r.created).expect("auto-resizing histogram");
                                f.sum += u128::from(now - r.created);
                            }
                        }
                        self.resend(req);
                        continue;
                    }
                    let st = self.slab.stamps(req);
                    let mut r = self.slab.remove(req);
                    r.dropped = true;
                    let a = &mut self.apps[app];
                    a.dropped += 1;
                    self.interval.drops += 1;
                    if self.measuring {
                        a.recorder.dropped(r.rtype as usize);
                        match why {
                            ClientDrop::Timeout => a.client_timeouts += 1,
                            ClientDrop::Overflow => a.client_overflows += 1,
                        }
                    }
                    if let Some(log) = &mut self.log {
                        log.push(&r, &st, now);
                    }
                }
                Out::CreditRequest { session, demand } => {
                    if self.measuring {
                        self.apps[app].credit_requests += 1;
                    }
                    self.net.send(now, Event::CreditRequest { node, session: base + session, demand }, &mut self.evq);
                }
                Out::Timer { session, at } => self.evq.push(at, Event::ClientTimeout { node, session: base + session }),
            }
        }
        out.clear();
        self.apps[app].out = out;
    }

    /// Tells a node's credit controller when its number of active cores changed.
    fn cores_changed(&mut self, node: u16) {
        let n = &mut self.nodes[node as usize];
        if let Some(c) = &mut n.credit {
            let active = n.server.active_count() as u32;
            if active != c.active_reported {
                c.active_reported = active;
                c.ctl.on_cores_changed(self.now, active);
            }
        }
    }

    fn generate(&mut self, app: u16) {
        let now = self.now;
        let a = &mut self.apps[app as usize];
        let (session, rtype, service, has_program) = a.draw(&mut self.ops);
        let node = a.home_node(session, self.nodes.len() as u16);
        let flow = a.session_base + session;
        let id = a.generated;
        let req = Req { created: now, service, session, flow, rtype, app, node, has_program, ..Req::default() };
        a.generated += 1;
        self.interval.arrivals += 1;
        if self.measuring {
            a.recorder.generated(rtype as usize);
        }
        let slot = self.slab.insert(req, id);
        if has_program {
            for n in &mut self.nodes {
                n.server.set_program(slot, &self.ops);
            }
        }
        self.send(slot, app as usize, node, session);
        let a = &mut self.apps[app as usize];
        if let Some(next) = a.arrivals.next() {
            if next < self.end {
                self.schedule_arrival(app, next);
            }
        }
    }

    /// A single application's arrivals come in time order: they take the queue's arrival lane.
    #[inline(always)]
    fn schedule_arrival(&mut self, app: u16, t: Nanos) {
        if self.apps.len() == 1 {
            self.evq.push_in_order(ARRIVAL_LANE, t, Event::Generate { app });
        } else {
            self.evq.push(t, Event::Generate { app });
        }
    }

    /// A request leaves its client for its node: straight onto the network, or through the
    /// session's credit state.
    #[inline(always)]
    fn send(&mut self, slot: u32, app: usize, node: u16, session: u32) {
        if let Some(s) = &mut self.seda {
            let flow = self.slab[slot].flow;
            match s.admit(flow, slot as u64, self.now) {
                Admit::Send => {}
                Admit::Drop => {
                    self.reject(slot);
                    return;
                }
                Admit::Wait => {
                    if let Some(at) = s.next_release(flow) {
                        self.evq.push(at, Event::SedaRelease { session: flow });
                    }
                    return;
                }
            }
        }
        self.send_admitted(slot, app, node, session);
    }

    #[inline(always)]
    fn send_admitted(&mut self, slot: u32, app: usize, node: u16, session: u32) {
        if self.nodes[node as usize].credit.is_none() {
            self.net.send(self.now, Event::ServerArrive { req: slot, demand: 0 }, &mut self.evq);
        } else {
            let a = &mut self.apps[app];
            a.clients[node as usize].submit(session, slot, self.now, &mut a.out);
            self.client_outs(app, node);
        }
    }

    /// SEDA's session `flow` sends the requests that waited for a token and drops those that
    /// waited too long.
    #[cold]
    fn seda_release(&mut self, flow: u32) {
        let (mut sent, mut dropped) = (Vec::new(), Vec::new());
        let s = self.seda.as_mut().expect("SEDA events need SEDA");
        s.release(flow, self.now, &mut sent, &mut dropped);
        if let Some(at) = s.next_release(flow) {
            self.evq.push(at, Event::SedaRelease { session: flow });
        }
        for slot in dropped {
            self.reject(slot as u32);
        }
        for slot in sent {
            let slot = slot as u32;
            let r = self.slab[slot];
            self.send_admitted(slot, r.app as usize, r.node, r.session);
        }
    }

    /// A request its client's rate limit refused: dropped at the client (SEDA).
    fn reject(&mut self, slot: u32) {
        let st = self.slab.stamps(slot);
        let mut r = self.slab.remove(slot);
        r.dropped = true;
        let a = &mut self.apps[r.app as usize];
        a.dropped += 1;
        self.interval.drops += 1;
        if self.measuring {
            a.recorder.dropped(r.rtype as usize);
        }
        if let Some(log) = &mut self.log {
            log.push(&r, &st, self.now);
        }
    }

    /// Sends a failed request again, to the next replica: a fresh attempt of the same request.
    fn resend(&mut self, slot: u32) {
        let r = self.slab[slot];
        let replicas = self.nodes.len() as u16;
        self.slab.stamp(slot, |s| *s = Stamps { id: s.id, ..Stamps::default() });
        let again = Req { created: r.created, service: r.service, session: r.session, flow: r.flow, rtype: r.rtype, app: r.app, has_program: r.has_program, ..Req::default() };
        let node = (r.node + 1) % replicas;
        self.slab[slot] = Req { node, tries: r.tries + 1, ..again };
        self.send(slot, r.app as usize, node, r.session);
    }

    /// A response (or a failure reply) reaches its client. A failure with retries left is sent
    /// again, to the next replica.
    fn response(&mut self, slot: u32, credits: u32, now: Nanos) {
        let (app, node, dropped, tries) = {
            let r = &self.slab[slot];
            (r.app as usize, r.node, r.dropped, r.tries)
        };
        let credited = self.nodes[node as usize].credit.is_some();
        let replicas = self.nodes.len() as u16;
        if dropped && self.measuring {
            if let Some(f) = &mut self.failure_reply {
                let created = self.slab[slot].created;
                f.delay.record(now - created).expect("auto-resizing histogram");
                f.sum += u128::from(now - created);
            }
        }
        if dropped && tries < self.apps[app].retries && replicas > 1 {
            let r = self.slab[slot];
            if credited {
                self.client_credits(app, r.node, r.session, credits);
            }
            if self.measuring {
                self.apps[app].retried += 1;
            }
            self.resend(slot);
            return;
        }
        let r = &self.slab[slot];
        let session = r.session;
        if let Some(s) = &mut self.seda {
            if !r.dropped {
                s.observe(r.flow, slot as u64, r.created, now);
            }
        }
        let a = &mut self.apps[app];
        if r.dropped {
            a.dropped += 1;
            self.interval.drops += 1;
            if self.measuring {
                a.recorder.dropped(r.rtype as usize);
            }
        } else {
            a.completed += 1;
            self.interval.completions += 1;
            if self.measuring {
                a.recorder.completed(r.rtype as usize, now - r.created, r.queued_ns, r.service);
            }
        }
        if let Some(log) = &mut self.log {
            log.push(r, &self.slab.stamps(slot), now);
        }
        self.slab.remove(slot);
        if credited {
            self.client_credits(app, node, session, credits);
        }
    }

    /// The credits a response carries reach its session's client state.
    fn client_credits(&mut self, app: usize, node: u16, session: u32, credits: u32) {
        let a = &mut self.apps[app];
        a.clients[node as usize].on_credits(session, credits, true, self.now, &mut a.out);
        self.client_outs(app, node);
    }

    /// Schedules the park check of a core that just went idle, as its allocator's rule says.
    #[inline(always)]
    fn after_idle(&mut self, node: u16, core: u16, idle: Idle) {
        match idle {
            Idle::Working => {}
            Idle::Yielded => self.after_park(node),
            Idle::Spinning => {
                let n = &self.nodes[node as usize];
                let rule = n.allocator.park_rule();
                let wait = match rule.mode {
                    ParkMode::Never => return,
                    // The probe search's sweep-end rule decides (see `sweep_end`).
                    ParkMode::AfterPoll if n.server.parks_after_sweep() => return self.arm_sweep_park(node, core),
                    ParkMode::AfterPoll => self.poll_wait(&rule),
                    ParkMode::OnlyLastCore if n.server.active_count() == 1 => self.search_pass,
                    ParkMode::OnlyLastCore => return,
                };
                let epoch = n.server.core(core).epoch;
                self.evq.push(self.now + wait, Event::ParkCheck { node, core, epoch });
            }
        }
    }

    /// The study's park rule (probe search, `park = "sweep"`): the first sweep end at least a
    /// poll period into a fruitless search is a park check.
    fn arm_sweep_park(&mut self, node: u16, core: u16) {
        let n = &self.nodes[node as usize];
        let rule = n.allocator.park_rule();
        if !n.server.parks_after_sweep() || rule.mode != ParkMode::AfterPoll {
            return;
        }
        let wait = self.poll_wait(&rule);
        n.server.schedule_sweep_end(core, n.server.search_started_at(core) + wait.saturating_sub(1), &mut self.evq);
    }

    /// How long a fruitless search lasts before a park check under `AfterPoll`: the poll
    /// period, and at least `min_passes` search passes.
    fn poll_wait(&self, rule: &ParkRule) -> Nanos {
        rule.min_poll_ns.max(rule.min_passes as Nanos * self.search_pass)
    }

    /// A sweep end under the study's park rule: the next sweep's own-queue check, then a park
    /// check; a core that keeps searching gets the same at its next sweep end.
    fn sweep_end(&mut self, node: u16, core: u16, search: u32) {
        let now = self.now;
        let n = &mut self.nodes[node as usize];
        match n.server.sweep_end(core, search, now, &mut self.slab, &mut self.evq) {
            None => {}
            Some(Idle::Spinning) => {
                let epoch = n.server.core(core).epoch;
                self.park_check(node, core, epoch);
                let s = &self.nodes[node as usize].server;
                if s.still_searching(core, search) {
                    s.schedule_sweep_end(core, now + 1, &mut self.evq);
                }
            }
            Some(idle) => self.after_idle(node, core, idle),
        }
    }

    fn park_check(&mut self, node: u16, core: u16, epoch: u32) {
        let measuring = self.measuring;
        let n = &mut self.nodes[node as usize];
        if n.server.core(core).epoch != epoch || !n.server.is_spinning(core) {
            return; // found work since, or already parked
        }
        // Probe search: the final own-queue check before parking.
        if let Some(idle) = n.server.take_own_work(core, self.now, &mut self.slab, &mut self.evq) {
            self.after_idle(node, core, idle);
            return;
        }
        let active = n.server.active_count();
        if active == 1 && n.allocator.park_rule().mode == ParkMode::Never {
            return;
        }
        let credits = n.credit.as_mut().map(|c| &mut *c.ctl as &mut dyn CreditLink);
        n.parking.attempts += 1;
        match n.allocator.on_park_attempt(self.now, core, active, credits) {
            ParkVerdict::Park => {
                n.parking.parks += 1;
                if let Some(c) = &mut n.credit {
                    if measuring && c.ctl.drained() > 0 {
                        c.parks_while_drained += 1;
                    }
                }
                n.server.park(core, self.now);
                self.after_park(node);
            }
            ParkVerdict::KeepPolling => {
                n.server.mark_park_attempt(core);
                self.evq.push(self.now + self.search_pass, Event::ParkCheck { node, core, epoch });
            }
        }
        if self.nodes[node as usize].credit.is_some() {
            self.send_wakeups(node);
        }
    }

    /// Tells a node's allocator that a core ended a park attempt: it found work, or it was
    /// woken after parking (CoreSync returns the credits it withheld).
    fn park_aborted(&mut self, node: u16, core: u16) {
        let n = &mut self.nodes[node as usize];
        let credits = n.credit.as_mut().map(|c| &mut *c.ctl as &mut dyn CreditLink);
        n.allocator.on_park_abort(self.now, core, credits);
    }

    /// After any park: a lone remaining idle core under an only-the-last-core-parks rule gets
    /// its own park check.
    fn after_park(&mut self, node: u16) {
        self.cores_changed(node);
        let s = &self.nodes[node as usize];
        if s.allocator.park_rule().mode == ParkMode::OnlyLastCore && s.server.active_count() == 1 {
            if let Some(c) = s.server.first_spinner() {
                self.after_idle(node, c, Idle::Spinning);
            }
        }
    }

    fn alloc_tick(&mut self, node: u16) {
        let now = self.now;
        let n = &mut self.nodes[node as usize];
        if let Some(c) = &mut n.credit {
            if !c.exact {
                // The congestion signal is measured at the allocator's pace, as in Caladan.
                c.delay = n.server.max_delay(now, &self.slab);
                if let Some(sd) = &mut n.server.start_drop {
                    sd.sampled = c.delay;
                }
            }
        }
        // A yield request not served within one interval is withdrawn, as Caladan's IOKernel
        // does: the signal that motivated it is stale by now.
        n.server.withdraw_yield_requests();
        let action = n.allocator.tick(&n.server.alloc_view(now, &self.slab));
        // Before carrying the action out: what the allocator just saw is its next `prev`.
        n.server.mark_tick(now);
        match action {
            AllocAction::Nothing => {}
            AllocAction::Grant => match n.allocator.grant_delay() {
                Some(evict) => {
                    // Work waiting on a lent core waits for the scheduler there, not the eviction.
                    let on_demand = n.allocator.grant_on_demand();
                    let d = match &mut n.lent_wake {
                        Some((w, rng)) if on_demand => w.sample(rng),
                        _ => evict,
                    };
                    let refill = n.allocator.refill_after_grant();
                    let granted = n.server.grant_after(now, d, refill, &mut self.evq);
                    if let (Some(core), true) = (granted, on_demand) {
                        // Its Secondary stays: the balancer evicts only to refill the buffer.
                        n.server.share_with_secondary(core);
                    }
                }
                None => match &mut n.wake {
                    Some((w, rng)) => {
                        let d = w.sample(rng);
                        n.server.grant_after(now, d, 0, &mut self.evq);
                    }
                    None => {
                        n.server.grant(now, &mut self.evq);
                    }
                },
            },
            AllocAction::Yield(core) => {
                n.server.request_yield(core, now);
                if !n.server.core(core).is_active() {
                    self.after_park(node);
                }
            }
        }
        if let Some(iv) = self.nodes[node as usize].allocator.interval() {
            self.evq.push(now + iv, Event::AllocTick { node });
        }
    }

    fn sample(&mut self) {
        let now = self.now;
        let dt = (now - self.last_sample_at) as f64;
        let measuring = self.measuring;
        let s = &mut self.series;
        s.t_ms.push(now as f64 / 1e6);
        let (mut allocated, mut busy, mut parked, mut queue_len, mut oldest) = (0.0, 0.0, 0.0, 0.0, 0.0f64);
        let (mut pool, mut issued, mut drained) = (f64::NAN, f64::NAN, f64::NAN);
        let mut park = Parking::default();
        let (mut parking, mut gated) = (false, false);
        for (i, n) in self.nodes.iter_mut().enumerate() {
            let p = n.parking_now();
            park = park.plus(&p.since(&n.last_sample_parking));
            n.last_sample_parking = p;
            parking |= n.parks_cores();
            gated |= p.gate.is_some();
            let times = n.server.core_times(now);
            let d = |k: usize| (times[k] - n.last_sample_times[k]) as f64 / dt;
            // A waking core is already the LC application's (taken from the BE co-tenant), though
            // not yet usable: it counts as allocated, so allocated + parked = max_cores; except
            // where the Secondary runs on it until it is usable, and for the Secondary's turns on
            // a core it shares with Primary requests, as in the summary.
            let turns_at = n.server.secondary_turn_ns_at(now);
            let turns = (turns_at - n.last_sample_secondary_turns) as f64 / dt;
            n.last_sample_secondary_turns = turns_at;
            let waking = if n.allocator.secondary_runs_while_waking() { 0.0 } else { d(3) };
            allocated += d(0) + d(1) + waking + d(4) - turns;
            busy += d(0) - turns;
            parked += d(2);
            queue_len += n.server.queued_total() as f64;
            oldest = oldest.max(n.server.max_delay(now, &self.slab) as f64 / 1e3);
            n.last_sample_times = times;
            if let Some(c) = &mut n.credit {
                let st = c.ctl.stats();
                let first = i == 0;
                pool = if first { st.pool as f64 } else { pool + st.pool as f64 };
                issued = if first { st.issued as f64 } else { issued + st.issued as f64 };
                drained = if first { st.drained as f64 } else { drained + st.drained as f64 };
                if measuring {
                    c.samples += 1;
                    c.pool_sum += st.pool as f64;
                    c.pool_max = c.pool_max.max(st.pool as f64);
                    c.issued_sum += st.issued as f64;
                    c.drained_sum += st.drained as f64;
                }
            }
        }
        s.cores_allocated.push(allocated);
        s.cores_busy.push(busy);
        s.cores_parked.push(parked);
        s.queue_len.push(queue_len);
        s.oldest_delay_us.push(oldest);
        s.arrivals.push(self.interval.arrivals as f64);
        s.completions.push(self.interval.completions as f64);
        s.drops.push(self.interval.drops as f64);
        s.throughput_rps.push(self.interval.completions as f64 / dt * 1e9);
        s.offered_rps.push(self.apps.iter().map(|a| a.arrivals.rate_at(now as f64)).sum());
        s.in_system.push(self.slab.live() as f64);
        s.alloc_signal.push(self.nodes[0].allocator.signal().unwrap_or(f64::NAN));
        s.credit_pool.push(pool);
        s.credits_issued.push(issued);
        s.drained_sessions.push(drained);
        let queued: u64 = self.apps.iter().flat_map(|a| a.clients.iter()).map(|c| c.queued).sum();
        s.client_queued.push(queued as f64);
        let count = |on: bool, v: u64| if on { v as f64 } else { f64::NAN };
        s.park_attempts.push(count(parking, park.attempts));
        s.park_vetoes.push(count(gated, park.gate.map_or(0, |g| g.vetoes())));
        s.parks.push(count(parking, park.parks));
        s.wakeups.push(count(parking, park.wakeups));
        if measuring && self.nodes[0].credit.is_some() {
            self.client_queued_sum += queued as f64;
        }
        self.interval = Interval::default();
        self.last_sample_at = now;
        self.evq.push(now + self.sample_every, Event::Sample);
    }

    fn finish(self, wall_s: f64) -> SimResult {
        let sc = &self.scenario;
        let window_ns = self.end - self.warmup;
        let window_s = window_ns as f64 / 1e9;
        let nodes: Vec<_> =
            self.nodes.iter().enumerate().map(|(i, n)| n.summary(i as u16, sc.server.max_cores, self.end, window_ns)).collect();
        // The flat resource keys are the nodes' totals (a single node's, exactly).
        let mut total = nodes[0].clone();
        for (k, n) in nodes[1..].iter().enumerate().map(|(k, n)| (k + 1, n)) {
            let (t, c) = (&mut total, n);
            t.cores.max += c.cores.max;
            t.cores.allocated_mean += c.cores.allocated_mean;
            t.cores.busy_mean += c.cores.busy_mean;
            t.cores.transition_mean += c.cores.transition_mean;
            t.be_cores_mean += c.be_cores_mean;
            let (a, b) = (&mut t.core_time, &c.core_time);
            *a = CoreTime {
                busy_ns: a.busy_ns + b.busy_ns,
                search_ns: a.search_ns + b.search_ns,
                parked_ns: a.parked_ns + b.parked_ns,
                transition_ns: a.transition_ns + b.transition_ns,
                overhead_ns: a.overhead_ns + b.overhead_ns,
                total_ns: a.total_ns + b.total_ns,
            };
            let (a, b) = (&mut t.sched, &c.sched);
            let waited = |s: &Sched| s.lock_wait_us_mean * s.lock_waits as f64;
            let waits = a.lock_waits + b.lock_waits;
            a.lock_wait_us_mean = if waits > 0 { (waited(a) + waited(b)) / waits as f64 } else { 0.0 };
            a.preemptions += b.preemptions;
            a.yields += b.yields;
            a.lock_acquisitions += b.lock_acquisitions;
            a.lock_waits = waits;
            a.preempt_send_ns += b.preempt_send_ns;
            a.avoided_preemptions += b.avoided_preemptions;
            a.dispatcher_requests += b.dispatcher_requests;
            a.dispatcher_work_ns += b.dispatcher_work_ns;
            a.dispatcher = match (a.dispatcher, b.dispatcher) {
                (Some(x), Some(y)) => Some(DispatcherLoad {
                    // The busiest dispatcher is the one that limits.
                    utilization: x.utilization.max(y.utilization),
                    saturated: x.saturated || y.saturated,
                    queued_end: x.queued_end + y.queued_end,
                    arrivals: x.arrivals + y.arrivals,
                    arrival_ns: x.arrival_ns + y.arrival_ns,
                    completions: x.completions + y.completions,
                    completion_ns: x.completion_ns + y.completion_ns,
                    requeues: x.requeues + y.requeues,
                    requeue_ns: x.requeue_ns + y.requeue_ns,
                    signals: x.signals + y.signals,
                    signal_ns: x.signal_ns + y.signal_ns,
                }),
                (x, y) => x.or(y),
            };
            let (ua, ub) = (&mut a.worker_utilization, &b.worker_utilization);
            ua.mean = (ua.mean * k as f64 + ub.mean) / (k + 1) as f64;
            ua.min = ua.min.min(ub.min);
            ua.max = ua.max.max(ub.max);
            if let (Some(a), Some(b)) = (&mut t.credits, &c.credits) {
                a.pool_mean += b.pool_mean;
                a.issued_mean += b.issued_mean;
                a.drained_mean += b.drained_mean;
                a.aqm_drops += b.aqm_drops;
                a.credit_messages += b.credit_messages;
                a.parks_while_drained += b.parks_while_drained;
                a.pool_max += b.pool_max;
                a.pool_floor = a.pool_floor.zip(b.pool_floor).map(|(x, y)| x + y);
                a.pool_ceiling = a.pool_ceiling.zip(b.pool_ceiling).map(|(x, y)| x + y);
                if let Some(d) = b.start_drops {
                    a.start_drops = Some(a.start_drops.unwrap_or(0) + d);
                }
            }
        }
        total.cpu_utilization = if nodes.len() == 1 { total.cpu_utilization } else { total.cores.allocated_mean / total.cores.max as f64 };
        let credits = total.credits.take().map(|mut c| {
            let samples = self.nodes[0].credit.as_ref().map_or(0, |c| c.samples).max(1) as f64;
            c.client_queued_mean = self.client_queued_sum / samples;
            for a in &self.apps {
                c.client_timeouts += a.client_timeouts;
                c.client_overflows += a.client_overflows;
                c.credit_requests += a.credit_requests;
            }
            c.client_drops = c.client_timeouts + c.client_overflows;
            c
        });
        // Several nodes: the Primaries' harvests add up (node 0's eviction latency).
        let harvest = nodes.iter().filter_map(|n| n.harvest.as_ref()).enumerate().fold(None, |acc: Option<Harvest>, (k, h)| match acc {
            None => Some(h.clone()),
            Some(mut t) => {
                t.add(h, k);
                Some(t)
            }
        });
        let irq = nodes.iter().filter_map(|n| n.irq.as_ref()).fold(None, |acc: Option<Irq>, i| match acc {
            None => Some(i.clone()),
            Some(mut t) => {
                t.add(i);
                Some(t)
            }
        });
        let parking = nodes.iter().filter_map(|n| n.parking).reduce(|a, b| a.plus(&b));
        let first = &self.apps[0];
        let generated: u64 = self.apps.iter().map(|a| a.generated).sum();
        let summary = Summary {
            scenario: sc.name.clone(),
            seed: 0,
            allocator: self.nodes[0].allocator.name().to_string(),
            overload: self.nodes[0].credit.as_ref().map_or("none", |c| c.ctl.name()).to_string(),
            slo_us: first.slo_us,
            cores: Cores { ..total.cores },
            cpu_utilization: total.cpu_utilization,
            be_cores_mean: total.be_cores_mean,
            requests: Requests {
                generated: first.generated,
                completed: first.completed,
                dropped: first.dropped,
                in_flight: if self.apps.len() == 1 {
                    self.slab.live() as u64 - self.failure_reply.as_ref().map_or(0, |f| f.ghosts)
                } else {
                    first.in_flight()
                },
            },
            core_time: total.core_time,
            credits,
            sched: Some(total.sched),
            applications: self.apps.iter().map(|a| a.summary(window_s)).collect(),
            nodes,
            harvest,
            irq,
            parking,
            lock_control: self.failure_reply.as_ref().map(|f| {
                let stats: Vec<&LockStats> = self.nodes.iter().filter_map(|n| n.server.locks.as_ref().map(|l| &l.stats)).collect();
                let n = f.delay.len();
                LockDrops {
                    drops: self.nodes.iter().filter_map(|n| n.server.locks.as_ref()).map(|l| l.drops).sum(),
                    failure_reply_us: microsched_core::metrics::us_percentiles(&f.delay, f.sum, n),
                    locks: LockStats::summaries(&stats, self.end, window_ns),
                }
            }),
            sim: SimStats {
                events: self.events,
                wall_s,
                requests_per_wall_s: if wall_s > 0.0 { generated as f64 / wall_s } else { 0.0 },
                interrupted_at_ms: None,
            },
            ..first.recorder.summary(window_s)
        };
        SimResult { summary, timeseries: self.series, latency_cdf: first.recorder.latency_cdf(), requests: self.log }
    }
}
