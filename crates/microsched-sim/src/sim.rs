//! The event loop: clients and network around the server, policies driven at their intervals,
//! metrics over the measured window.

use std::time::Instant;

use microsched_core::alloc::{self, AllocAction, CoreAllocator, ParkMode, ParkVerdict};
use microsched_core::metrics::LatencyRecorder;
use microsched_core::overload::{self, Admission, CreditController, CreditLink, SessionId};
use microsched_core::scenario::{DelaySignal, Loaded, Scenario};
use microsched_core::program::{Op, Programs};
use microsched_core::sched;
use microsched_core::summary::{CoreTime, Cores, Credits, Requests, Sched, SimStats, Summary};
use microsched_core::time::{ms, us, NS_PER_US};
use microsched_core::{Nanos, ScenarioError};
use rand::Rng;

use microsched_core::overload::client::{ClientDrop, Clients, Out};
use crate::events::{Event, EventQueue};
use crate::requests::{Req, Slab};
use crate::result::{RequestLog, SimResult, TimeSeries};
use microsched_core::rng::{stream, Stream};
use microsched_core::workload::{load_steps, pick, Arrivals, RequestMix};
use crate::server::{Idle, SchedCounters, Server, ServerCfg, SliceEnd};

struct Network {
    one_way: Nanos,
    jitter: Nanos,
    rng: Stream,
}

impl Network {
    /// Schedules `ev` one network trip from `now`.
    #[inline]
    fn send(&mut self, now: Nanos, ev: Event, evq: &mut EventQueue) {
        if self.jitter == 0 {
            // Constant delay: trips arrive in the order they were sent.
            evq.push_in_order(now + self.one_way, ev);
        } else {
            evq.push(now + self.one_way + self.rng.gen_range(0..=self.jitter), ev);
        }
    }
}

/// Period of the congestion-signal measurement when the core allocator has no interval of its
/// own (Caladan's IOKERNEL_POLL_INTERVAL).
const DELAY_POLL_NS: Nanos = 10 * NS_PER_US;

/// Credit-based overload control: the server's controller, the client sessions, the cached
/// congestion signal and the credit statistics. Absent with the "none" controller, whose path
/// has no credit work at all.
struct Credit {
    ctl: Box<dyn CreditController>,
    clients: Clients<u32>,
    /// Reused buffers: what the clients do, the controller's wake-ups.
    out: Vec<Out<u32>>,
    wakeups: Vec<(SessionId, u32)>,
    /// Measure the signal at each decision instead of reading the cached sample.
    exact: bool,
    /// The last sampled congestion signal.
    delay: Nanos,
    /// Period of `Event::DelayPoll` (sampled signal, allocator without an interval).
    poll: Option<Nanos>,
    /// Active cores last reported to the controller.
    active_reported: u32,
    packet_cost: Nanos,
    // Measured-window counters and sample sums.
    aqm_drops: u64,
    client_timeouts: u64,
    client_overflows: u64,
    credit_messages: u64,
    credit_requests: u64,
    parks_while_drained: u64,
    samples: u64,
    pool_sum: f64,
    issued_sum: f64,
    drained_sum: f64,
    queued_sum: f64,
}

/// Counters of one time-series interval.
#[derive(Default, Clone, Copy)]
struct Interval {
    arrivals: u64,
    completions: u64,
    drops: u64,
}

pub struct Sim {
    scenario: Scenario,
    now: Nanos,
    end: Nanos,
    warmup: Nanos,
    measuring: bool,
    evq: EventQueue,
    slab: Slab,
    server: Server,
    net: Network,
    workload: RequestMix,
    programs: Programs,
    /// Reused buffer for one request's drawn program.
    ops: Vec<Op>,
    arrivals: Arrivals,
    session_rng: Stream,
    sessions: u32,
    allocator: Box<dyn CoreAllocator>,
    credit: Option<Box<Credit>>,
    search_pass: Nanos,
    sample_every: Nanos,
    recorder: LatencyRecorder,
    slo_us: f64,
    // Whole-run conservation counters.
    generated: u64,
    completed: u64,
    dropped: u64,
    // Core-time and scheduling-counter snapshots at the start of the measured window.
    window_start_times: [Nanos; 5],
    window_start_sched: SchedCounters,
    interval: Interval,
    last_sample_times: [Nanos; 5],
    last_sample_at: Nanos,
    series: TimeSeries,
    log: Option<RequestLog>,
    events: u64,
}

impl Sim {
    pub fn new(loaded: &Loaded, seed: u64) -> Result<Self, ScenarioError> {
        let sc = loaded.scenario.clone();
        let base = &loaded.base_dir;
        let max_cores = sc.server.max_cores as usize;
        let allocator = alloc::build(&sc.policy.allocator, sc.server.max_cores);

        let workload = RequestMix::new(&sc, base, seed)?;
        let programs = Programs::new(&sc.workload, base, seed)?;
        let spin_locks = (0..programs.mutexes()).map(|m| programs.is_spin(m)).collect();
        let steps = load_steps(&sc, base)?;
        let names: Vec<String> = sc.workload.types.iter().map(|t| t.name.clone()).collect();
        let slo_us = sc.slo_us(base)?;
        let warmup = ms(sc.warmup_ms);
        let end = warmup + ms(sc.duration_ms);
        let server = Server::new(
            ServerCfg {
                max_cores,
                steal_cost: sc.server.steal_cost_ns.round() as Nanos,
                packet_cost: sc.server.packet_cost_ns.round() as Nanos,
                alloc_delay: us(sc.server.allocation_delay_us),
                preemption: sc.server.preemption.build(),
            },
            // Dynamic policies start from one core and grow as load demands.
            if allocator.park_rule().mode == ParkMode::Never { max_cores } else { 1 },
            sched::build(&sc, seed),
            spin_locks,
        );
        let log = sc.metrics.record_requests.then(RequestLog::default);
        let rtt = us(sc.network.rtt_us);
        let credit = overload::build(&sc.policy.overload, sc.clients.sessions, sc.server.max_cores, rtt).map(|ctl| {
            let exact = sc.server.delay_signal == DelaySignal::Exact;
            Box::new(Credit {
                ctl,
                // The simulated network loses nothing: a credit request is never retried.
                clients: Clients::new(sc.clients.sessions, sc.clients.queue_capacity, us(sc.clients.timeout_us), true, None),
                out: Vec::with_capacity(64),
                wakeups: Vec::with_capacity(64),
                exact,
                delay: 0,
                poll: (!exact && allocator.interval().is_none()).then_some(DELAY_POLL_NS),
                active_reported: 0,
                packet_cost: sc.server.packet_cost_ns.round() as Nanos,
                aqm_drops: 0,
                client_timeouts: 0,
                client_overflows: 0,
                credit_messages: 0,
                credit_requests: 0,
                parks_while_drained: 0,
                samples: 0,
                pool_sum: 0.0,
                issued_sum: 0.0,
                drained_sum: 0.0,
                queued_sum: 0.0,
            })
        });
        Ok(Self {
            now: 0,
            end,
            warmup,
            measuring: warmup == 0,
            evq: EventQueue::with_capacity(1024),
            slab: Slab::default(),
            server,
            net: Network { one_way: us(sc.network.rtt_us) / 2, jitter: us(sc.network.jitter_us), rng: stream(seed, "network") },
            workload,
            programs,
            ops: Vec::new(),
            arrivals: Arrivals::from_steps(&steps, seed),
            session_rng: stream(seed, "sessions"),
            sessions: sc.clients.sessions,
            allocator,
            credit,
            search_pass: (sc.server.search_pass_ns.round() as Nanos).max(1),
            sample_every: us(sc.metrics.sample_interval_us).max(1),
            recorder: LatencyRecorder::new(&names, us(slo_us)),
            slo_us,
            generated: 0,
            completed: 0,
            dropped: 0,
            window_start_times: [0; 5],
            window_start_sched: SchedCounters::default(),
            interval: Interval::default(),
            last_sample_times: [0; 5],
            last_sample_at: 0,
            series: TimeSeries::default(),
            log,
            events: 0,
            scenario: sc,
        })
    }

    /// Runs to the end of the measured window and returns the results.
    pub fn run(mut self) -> SimResult {
        let wall = Instant::now();
        if let Some(t) = self.arrivals.next() {
            self.evq.push(t, Event::Generate);
        }
        if self.warmup > 0 {
            self.evq.push(self.warmup, Event::WarmupEnd);
        }
        self.evq.push(self.sample_every, Event::Sample);
        if let Some(iv) = self.allocator.interval() {
            self.evq.push(iv, Event::AllocTick);
        }
        if let Some(c) = &mut self.credit {
            if let Some(iv) = c.ctl.timer_interval() {
                self.evq.push(iv, Event::CreditTimer);
            }
            if let Some(p) = c.poll {
                self.evq.push(p, Event::DelayPoll);
            }
            // The controller assumes every core active until told otherwise.
            let active = self.server.active_count() as u32;
            c.active_reported = active;
            c.ctl.on_cores_changed(0, active);
        }
        while let Some((t, ev)) = self.evq.pop() {
            if t >= self.end {
                break;
            }
            self.now = t;
            self.events += 1;
            self.handle(ev);
            while let Some(core) = self.server.aborted_parks.pop() {
                self.park_aborted(core);
            }
            while let Some((core, idle)) = self.server.idled.pop() {
                self.after_idle(core, idle);
            }
        }
        self.now = self.end;
        if self.last_sample_at < self.end {
            self.sample(); // the last, possibly partial, interval
        }
        let wall_s = wall.elapsed().as_secs_f64();
        self.finish(wall_s)
    }

    fn handle(&mut self, ev: Event) {
        let now = self.now;
        match ev {
            Event::Generate => self.generate(),
            Event::ServerArrive { req, demand } => {
                if self.credit.is_none() {
                    self.server.arrive(req, now, &mut self.slab, &mut self.evq);
                } else {
                    self.credit_arrive(req, demand);
                }
            }
            Event::CoreDone { core, gen } => {
                let end = self.server.slice_end(core, gen, now, &mut self.slab, &mut self.evq);
                self.after_slice(core, end);
            }
            Event::OverheadDone { core, gen } => {
                let end = self.server.overhead_done(core, gen, now, &mut self.slab, &mut self.evq);
                self.after_slice(core, end);
            }
            Event::LockGranted { core, gen } => {
                let end = self.server.lock_granted(core, gen, now, &mut self.slab, &mut self.evq);
                self.after_slice(core, end);
            }
            Event::StealDone { core } => {
                let idle = self.server.steal_done(core, now, &mut self.slab, &mut self.evq);
                self.after_idle(core, idle);
            }
            Event::WakeDone { core } => {
                self.park_aborted(core);
                let idle = self.server.wake_done(core, now, &mut self.slab, &mut self.evq);
                self.cores_changed();
                self.after_idle(core, idle);
            }
            Event::ParkCheck { core, epoch } => self.park_check(core, epoch),
            Event::ResponseArrive { req, credits } => {
                let session = self.response(req);
                if let Some(c) = &mut self.credit {
                    c.clients.on_credits(session, credits, true, now, &mut c.out);
                    self.client_outs();
                }
            }
            Event::AllocTick => self.alloc_tick(),
            Event::Sample => self.sample(),
            Event::WarmupEnd => {
                self.measuring = true;
                self.window_start_times = self.server.core_times(now);
                self.window_start_sched = self.server.counters;
            }
            Event::DropReply { req } => self.drop_reply(req),
            Event::CreditRequest { session, demand } => {
                let c = self.credit.as_mut().expect("credit events need a credit controller");
                if let Some(credits) = c.ctl.on_credit_request(now, session, demand) {
                    if self.measuring {
                        c.credit_messages += 1;
                    }
                    self.net.send(now, Event::CreditArrive { session, credits }, &mut self.evq);
                }
                self.send_wakeups();
            }
            Event::CreditArrive { session, credits } => {
                let c = self.credit.as_mut().expect("credit events need a credit controller");
                c.clients.on_credits(session, credits, false, now, &mut c.out);
                self.client_outs();
            }
            Event::ClientTimeout { session, .. } => {
                let c = self.credit.as_mut().expect("credit events need a credit controller");
                c.clients.on_timer(session, now, &mut c.out);
                self.client_outs();
            }
            Event::CreditTimer => {
                let delay = self.delay_signal();
                let c = self.credit.as_mut().expect("credit events need a credit controller");
                c.ctl.on_timer(now, delay);
                if let Some(iv) = c.ctl.timer_interval() {
                    self.evq.push(now + iv, Event::CreditTimer);
                }
                self.send_wakeups();
            }
            Event::DelayPoll => {
                let d = self.server.max_delay(now, &self.slab);
                let c = self.credit.as_mut().expect("credit events need a credit controller");
                c.delay = d;
                if let Some(p) = c.poll {
                    self.evq.push(now + p, Event::DelayPoll);
                }
            }
        }
    }

    /// What follows a core's slice end: the response of a finished request, and the core's
    /// search for work when it is free.
    fn after_slice(&mut self, core: u16, end: SliceEnd) {
        let now = self.now;
        match end {
            SliceEnd::Stale | SliceEnd::Running => return,
            SliceEnd::Finished(req) => {
                self.slab[req].done = now;
                let credits = if self.credit.is_some() { self.credit_response(req, false) } else { 0 };
                self.net.send(now, Event::ResponseArrive { req, credits }, &mut self.evq);
                if self.credit.is_some() {
                    self.send_wakeups();
                }
            }
            SliceEnd::Freed => {}
        }
        let idle = self.server.find_work(core, now, &mut self.slab, &mut self.evq);
        self.after_idle(core, idle);
    }

    /// The congestion signal an overload controller reads now: the cached sample, or measured.
    #[inline]
    fn delay_signal(&self) -> Nanos {
        match &self.credit {
            Some(c) if !c.exact => c.delay,
            _ => self.server.max_delay(self.now, &self.slab),
        }
    }

    /// A request reaches a server with a credit controller: admitted into the queues, or dropped
    /// by AQM and answered with a failure reply after the packet cost.
    fn credit_arrive(&mut self, req: u32, demand: u32) {
        let now = self.now;
        let delay = self.delay_signal();
        let session = self.slab[req].session;
        let c = self.credit.as_mut().expect("credit path");
        match c.ctl.on_request(now, session, demand, delay) {
            Admission::Admit => self.server.arrive(req, now, &mut self.slab, &mut self.evq),
            Admission::Drop => {
                if self.measuring {
                    c.aqm_drops += 1;
                }
                let pc = c.packet_cost;
                let r = &mut self.slab[req];
                r.arrive = now;
                r.start = now;
                r.dropped = true;
                if pc == 0 {
                    self.drop_reply(req);
                } else {
                    self.evq.push(now + pc, Event::DropReply { req });
                }
            }
        }
        self.send_wakeups();
    }

    /// The failure reply of an AQM-dropped request leaves, with credits.
    fn drop_reply(&mut self, req: u32) {
        let now = self.now;
        self.slab[req].done = now;
        let credits = self.credit_response(req, true);
        self.net.send(now, Event::ResponseArrive { req, credits }, &mut self.evq);
        self.send_wakeups();
    }

    /// The controller's credits for the response to `req` leaving now.
    fn credit_response(&mut self, req: u32, dropped: bool) -> u32 {
        let delay = self.delay_signal();
        let session = self.slab[req].session;
        let c = self.credit.as_mut().expect("credit path");
        c.ctl.on_response(self.now, session, dropped, delay)
    }

    /// Sends the explicit credit messages of the sessions the controller woke.
    fn send_wakeups(&mut self) {
        let Some(c) = &mut self.credit else { return };
        c.ctl.take_wakeups(&mut c.wakeups);
        if self.measuring {
            c.credit_messages += c.wakeups.len() as u64;
        }
        for (session, credits) in c.wakeups.drain(..) {
            self.net.send(self.now, Event::CreditArrive { session, credits }, &mut self.evq);
        }
    }

    /// Carries out what the clients decided.
    fn client_outs(&mut self) {
        let now = self.now;
        let mut out = std::mem::take(&mut self.credit.as_mut().expect("credit path").out);
        for o in out.drain(..) {
            match o {
                Out::Send { req, demand } => self.net.send(now, Event::ServerArrive { req, demand }, &mut self.evq),
                Out::Drop { req, why } => {
                    let mut r = self.slab.remove(req);
                    r.dropped = true;
                    self.dropped += 1;
                    self.interval.drops += 1;
                    if self.measuring {
                        self.recorder.dropped(r.rtype as usize);
                        let c = self.credit.as_mut().expect("credit path");
                        match why {
                            ClientDrop::Timeout => c.client_timeouts += 1,
                            ClientDrop::Overflow => c.client_overflows += 1,
                        }
                    }
                    if let Some(log) = &mut self.log {
                        log.push(&r, now);
                    }
                }
                Out::CreditRequest { session, demand } => {
                    if self.measuring {
                        self.credit.as_mut().expect("credit path").credit_requests += 1;
                    }
                    self.net.send(now, Event::CreditRequest { session, demand }, &mut self.evq);
                }
                Out::Timer { session, at } => self.evq.push(at, Event::ClientTimeout { session, epoch: 0 }),
            }
        }
        self.credit.as_mut().expect("credit path").out = out;
    }

    /// Tells the credit controller when the number of active cores changed.
    fn cores_changed(&mut self) {
        if let Some(c) = &mut self.credit {
            let active = self.server.active_count() as u32;
            if active != c.active_reported {
                c.active_reported = active;
                c.ctl.on_cores_changed(self.now, active);
            }
        }
    }

    fn generate(&mut self) {
        let now = self.now;
        let session = pick(&mut self.session_rng, self.sessions);
        let (rtype, mut service) = self.workload.draw();
        let has_program = self.programs.has_program(rtype);
        if has_program {
            self.ops.clear();
            service = self.programs.draw(rtype, service, &mut self.ops);
        }
        let req = Req { id: self.generated, created: now, service, session, rtype, has_program, ..Req::default() };
        self.generated += 1;
        self.interval.arrivals += 1;
        if self.measuring {
            self.recorder.generated(rtype as usize);
        }
        let slot = self.slab.insert(req);
        if has_program {
            self.server.set_program(slot, &self.ops);
        }
        match &mut self.credit {
            None => self.net.send(now, Event::ServerArrive { req: slot, demand: 0 }, &mut self.evq),
            Some(c) => {
                c.clients.submit(session, slot, now, &mut c.out);
                self.client_outs();
            }
        }
        if let Some(next) = self.arrivals.next() {
            if next < self.end {
                self.evq.push(next, Event::Generate);
            }
        }
    }

    /// A response (or an AQM failure reply) reaches its client; returns the session.
    fn response(&mut self, slot: u32) -> u32 {
        let now = self.now;
        let r = self.slab.remove(slot);
        if r.dropped {
            self.dropped += 1;
            self.interval.drops += 1;
            if self.measuring {
                self.recorder.dropped(r.rtype as usize);
            }
        } else {
            self.completed += 1;
            self.interval.completions += 1;
            if self.measuring {
                self.recorder.completed(r.rtype as usize, now - r.created, r.queued_ns, r.service);
            }
        }
        if let Some(log) = &mut self.log {
            log.push(&r, now);
        }
        r.session
    }

    /// Schedules the park check of a core that just went idle, as its allocator's rule says.
    fn after_idle(&mut self, core: u16, idle: Idle) {
        match idle {
            Idle::Working => {}
            Idle::Yielded => self.after_park(),
            Idle::Spinning => {
                let rule = self.allocator.park_rule();
                let wait = match rule.mode {
                    ParkMode::Never => return,
                    ParkMode::AfterPoll => rule.min_poll_ns.max(rule.min_passes as Nanos * self.search_pass),
                    ParkMode::OnlyLastCore if self.server.active_count() == 1 => self.search_pass,
                    ParkMode::OnlyLastCore => return,
                };
                let epoch = self.server.core(core).epoch;
                self.evq.push(self.now + wait, Event::ParkCheck { core, epoch });
            }
        }
    }

    fn park_check(&mut self, core: u16, epoch: u32) {
        if self.server.core(core).epoch != epoch || !self.server.is_spinning(core) {
            return; // found work since, or already parked
        }
        let active = self.server.active_count();
        if active == 1 && self.allocator.park_rule().mode == ParkMode::Never {
            return;
        }
        let credits = self.credit.as_mut().map(|c| &mut *c.ctl as &mut dyn CreditLink);
        match self.allocator.on_park_attempt(self.now, core, active, credits) {
            ParkVerdict::Park => {
                if let Some(c) = &mut self.credit {
                    if self.measuring && c.ctl.drained() > 0 {
                        c.parks_while_drained += 1;
                    }
                }
                self.server.park(core, self.now);
                self.after_park();
            }
            ParkVerdict::KeepPolling => {
                self.server.mark_park_attempt(core);
                self.evq.push(self.now + self.search_pass, Event::ParkCheck { core, epoch });
            }
        }
        if self.credit.is_some() {
            self.send_wakeups();
        }
    }

    /// Tells the allocator that a core ended a park attempt: it found work, or it was woken
    /// after parking (CoreSync returns the credits it withheld).
    fn park_aborted(&mut self, core: u16) {
        let credits = self.credit.as_mut().map(|c| &mut *c.ctl as &mut dyn CreditLink);
        self.allocator.on_park_abort(self.now, core, credits);
    }

    /// After any park: a lone remaining idle core under an only-the-last-core-parks rule gets
    /// its own park check.
    fn after_park(&mut self) {
        self.cores_changed();
        if self.allocator.park_rule().mode == ParkMode::OnlyLastCore && self.server.active_count() == 1 {
            if let Some(c) = self.server.first_spinner() {
                self.after_idle(c, Idle::Spinning);
            }
        }
    }

    fn alloc_tick(&mut self) {
        let now = self.now;
        if let Some(c) = &mut self.credit {
            if !c.exact {
                // The congestion signal is measured at the allocator's pace, as in Caladan.
                c.delay = self.server.max_delay(now, &self.slab);
            }
        }
        // A yield request not served within one interval is withdrawn, as Caladan's IOKernel
        // does: the signal that motivated it is stale by now.
        self.server.withdraw_yield_requests();
        let action = self.allocator.tick(&self.server.alloc_view(now, &self.slab));
        // Before carrying the action out: what the allocator just saw is its next `prev`.
        self.server.mark_tick(now);
        match action {
            AllocAction::Nothing => {}
            AllocAction::Grant => {
                self.server.grant(now, &mut self.evq);
            }
            AllocAction::Yield(core) => {
                self.server.request_yield(core, now);
                if !self.server.core(core).is_active() {
                    self.after_park();
                }
            }
        }
        if let Some(iv) = self.allocator.interval() {
            self.evq.push(now + iv, Event::AllocTick);
        }
    }

    fn sample(&mut self) {
        let now = self.now;
        let times = self.server.core_times(now);
        let dt = (now - self.last_sample_at) as f64;
        let d = |i: usize| (times[i] - self.last_sample_times[i]) as f64 / dt;
        let s = &mut self.series;
        s.t_ms.push(now as f64 / 1e6);
        // A waking core is already the LC application's (taken from the BE co-tenant), though
        // not yet usable: it counts as allocated, so allocated + parked = max_cores.
        s.cores_allocated.push(d(0) + d(1) + d(3) + d(4));
        s.cores_busy.push(d(0));
        s.cores_parked.push(d(2));
        s.queue_len.push(self.server.queued() as f64);
        s.oldest_delay_us.push(self.server.max_delay(now, &self.slab) as f64 / 1e3);
        s.arrivals.push(self.interval.arrivals as f64);
        s.completions.push(self.interval.completions as f64);
        s.drops.push(self.interval.drops as f64);
        s.throughput_rps.push(self.interval.completions as f64 / dt * 1e9);
        s.offered_rps.push(self.arrivals.rate_at(now as f64));
        s.in_system.push(self.slab.live() as f64);
        s.alloc_signal.push(self.allocator.signal().unwrap_or(f64::NAN));
        match &mut self.credit {
            None => {
                s.credit_pool.push(f64::NAN);
                s.credits_issued.push(f64::NAN);
                s.drained_sessions.push(f64::NAN);
                s.client_queued.push(0.0);
            }
            Some(c) => {
                let st = c.ctl.stats();
                let queued = c.clients.queued as f64;
                s.credit_pool.push(st.pool as f64);
                s.credits_issued.push(st.issued as f64);
                s.drained_sessions.push(st.drained as f64);
                s.client_queued.push(queued);
                if self.measuring {
                    c.samples += 1;
                    c.pool_sum += st.pool as f64;
                    c.issued_sum += st.issued as f64;
                    c.drained_sum += st.drained as f64;
                    c.queued_sum += queued;
                }
            }
        }
        self.interval = Interval::default();
        self.last_sample_times = times;
        self.last_sample_at = now;
        self.evq.push(now + self.sample_every, Event::Sample);
    }

    fn finish(self, wall_s: f64) -> SimResult {
        let sc = &self.scenario;
        let window_ns = self.end - self.warmup;
        let window_s = window_ns as f64 / 1e9;
        let times = self.server.core_times(self.end);
        let w = |i: usize| (times[i] - self.window_start_times[i]) as f64 / window_ns as f64;
        let max_cores = sc.server.max_cores;
        let allocated_mean = w(0) + w(1) + w(3) + w(4);
        let (sc0, sc1) = (self.window_start_sched, self.server.counters);
        let summary = Summary {
            scenario: sc.name.clone(),
            seed: 0,
            allocator: self.allocator.name().to_string(),
            overload: self.credit.as_ref().map_or("none", |c| c.ctl.name()).to_string(),
            slo_us: self.slo_us,
            cores: Cores { max: max_cores, allocated_mean, busy_mean: w(0), transition_mean: w(3) },
            cpu_utilization: allocated_mean / max_cores as f64,
            be_cores_mean: w(2),
            requests: Requests {
                generated: self.generated,
                completed: self.completed,
                dropped: self.dropped,
                in_flight: self.slab.live() as u64,
            },
            core_time: CoreTime {
                busy_ns: times[0],
                search_ns: times[1],
                parked_ns: times[2],
                transition_ns: times[3],
                overhead_ns: times[4],
                total_ns: times.iter().sum(),
            },
            sched: Some(Sched {
                queue_policy: self.server.policy_name().to_string(),
                preemptions: sc1.preemptions - sc0.preemptions,
                yields: sc1.yields - sc0.yields,
                lock_acquisitions: sc1.lock_acquisitions - sc0.lock_acquisitions,
                lock_waits: sc1.lock_waits - sc0.lock_waits,
                lock_wait_us_mean: if sc1.lock_waits > sc0.lock_waits {
                    (sc1.lock_wait_ns - sc0.lock_wait_ns) as f64 / (sc1.lock_waits - sc0.lock_waits) as f64 / 1e3
                } else {
                    0.0
                },
                preempt_send_ns: sc1.preempt_send_ns - sc0.preempt_send_ns,
            }),
            credits: self.credit.as_ref().map(|c| {
                let n = c.samples.max(1) as f64;
                Credits {
                    pool_mean: c.pool_sum / n,
                    issued_mean: c.issued_sum / n,
                    drained_mean: c.drained_sum / n,
                    client_queued_mean: c.queued_sum / n,
                    aqm_drops: c.aqm_drops,
                    client_drops: c.client_timeouts + c.client_overflows,
                    client_timeouts: c.client_timeouts,
                    client_overflows: c.client_overflows,
                    credit_messages: c.credit_messages,
                    credit_requests: c.credit_requests,
                    parks_while_drained: c.parks_while_drained,
                }
            }),
            sim: SimStats {
                events: self.events,
                wall_s,
                requests_per_wall_s: if wall_s > 0.0 { self.generated as f64 / wall_s } else { 0.0 },
            },
            ..self.recorder.summary(window_s)
        };
        SimResult {
            summary,
            timeseries: self.series,
            latency_cdf: self.recorder.latency_cdf(),
            requests: self.log,
        }
    }
}
