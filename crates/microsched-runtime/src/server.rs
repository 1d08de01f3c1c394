//! The server: a UDP socket, N worker threads (the "cores", [`crate::worker`]), a controller
//! thread ([`crate::control`]) and optionally the best-effort co-tenant ([`crate::be`]).
//!
//! There is no receive thread: the workers poll the socket themselves in their work-search loop
//! (a non-blocking `recvfrom`, as Caladan's kthreads poll their RX queue), and the controller
//! drains it when no worker is searching (all busy, parked or waking: Caladan's IOKernel, which
//! watches the queues of cores that do not poll). [`poll_socket`] is the NIC and the RPC layer's
//! ingress, whoever calls it: it decodes (malformed → counted by reason, dropped), authenticates
//! (unknown token, or a valid token from another address → counted, dropped, never answered),
//! checks the request (type, service-time cap), asks the credit controller (credit-less →
//! `Rejected` notice; AQM → `Dropped` notice with credits), draws the program of an admitted
//! request whose type has one (so programs are drawn in arrival order), and hands it to the
//! queue the scenario's queueing policy steers it to ([`crate::sched`]: d-FCFS, the inbox of the
//! session's home core or of an active core while that is parked; c-FCFS, the shared queue).

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use microsched_core::alloc::{self, CoreAllocator, ParkMode, ParkRule};
use microsched_core::overload;
use microsched_core::program::Programs;
use microsched_core::scenario::Loaded;
use microsched_core::sched::condvar::CondvarStats;
use microsched_core::sched::Place;
use microsched_core::time::us;
use microsched_core::Nanos;
use parking_lot::Mutex;

use crate::be::BeCoTenant;
use crate::clock::Clock;
use crate::config::{check_loopback, check_scenario, ConfigError, MAX_SERVICE_NS};
use crate::control::{self, ControlOut};
use crate::coro::{StackPool, Task, MAX_STACKS};
use crate::handler::{Handler, Synthetic};
use crate::mutex::Mutexes;
use crate::park::Phase;
use crate::queue::{CoreShared, Job, LocalQueue, SharedQueue};
use crate::report::{BeReport, CoreReport, Counters, ServerReport};
use crate::rpc::{Auth, Connected, CreditMsg, Rpc, Verdict};
use crate::sched::Sched;
use crate::wire::{decode, encode, DecodeError, Msg, Status, MAX_LEN};

/// How to run a server.
#[derive(Debug, Clone)]
pub struct ServeOpts {
    /// Where to bind; port 0 picks a free port ([`Server::addr`] tells which).
    pub addr: SocketAddr,
    /// Allow a non-loopback bind.
    pub allow_remote: bool,
    /// Stop by itself after this long (`None`: until [`Server::stop`]).
    pub duration: Option<Duration>,
    /// Stop once every session that connected has disconnected (the load generator is done).
    pub once: bool,
    /// Largest service time a request may ask for (ns; a request above it is refused,
    /// `bad_request`). `None`: [`MAX_SERVICE_NS`] on loopback, [`REMOTE_MAX_SERVICE_NS`] with
    /// `allow_remote`.
    pub max_service_ns: Option<u64>,
    /// Most sessions one client ([`crate::rpc::ClientKey`]) may hold. `None`: every slot (a load
    /// generator alone takes them all; fair-share eviction still lets a newcomer in).
    pub max_client_sessions: Option<u32>,
    /// Connects per second one client may send (`None`: [`crate::rpc::Fairness::defaults`]).
    pub connect_rate: Option<f64>,
}

impl Default for ServeOpts {
    /// Loopback, a free port, until stopped, every default limit.
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            allow_remote: false,
            duration: None,
            once: false,
            max_service_ns: None,
            max_client_sessions: None,
            connect_rate: None,
        }
    }
}

/// The default service-time cap of a server reachable from other machines (`--allow-remote`):
/// 10 ms, a tenth of [`MAX_SERVICE_NS`], so that a datagram of a few dozen bytes cannot buy more
/// than 10 ms of a worker.
pub const REMOTE_MAX_SERVICE_NS: u64 = 10_000_000;

impl ServeOpts {
    /// The service-time cap in force, checked: 1 µs ..= [`MAX_SERVICE_NS`].
    pub fn service_cap_ns(&self) -> Result<u64, ConfigError> {
        match self.max_service_ns {
            None if self.allow_remote => Ok(REMOTE_MAX_SERVICE_NS),
            None => Ok(MAX_SERVICE_NS),
            Some(ns) if (1_000..=MAX_SERVICE_NS).contains(&ns) => Ok(ns),
            Some(ns) => Err(ConfigError(format!(
                "--max-service-us: {} is not allowed: use 1..={} (µs)",
                ns as f64 / 1e3,
                MAX_SERVICE_NS / 1000
            ))),
        }
    }
}

/// What the threads share.
pub(crate) struct Shared {
    pub clock: Clock,
    pub cores: Vec<CoreShared>,
    /// The queue every worker serves (c-FCFS); empty under d-FCFS.
    pub shared: SharedQueue,
    pub sock: UdpSocket,
    pub rpc: Mutex<Rpc>,
    pub credit_based: bool,
    pub alloc: Mutex<Box<dyn CoreAllocator>>,
    pub park_rule: ParkRule,
    /// The congestion signal as last sampled by the controller (ns).
    pub delay_ns: AtomicU64,
    pub stop: AtomicBool,
    pub counters: Counters,
    pub handler: Arc<dyn Handler>,
    pub yield_when_idle: bool,
    pub ntypes: u16,
    pub parks: AtomicU64,
    /// Parks decided while some session held no credits (CoreSync must never do this).
    pub parks_while_drained: AtomicU64,
    /// Stop once every session that connected has left.
    pub once: bool,
    /// Set in `once` mode when the last session left.
    pub clients_gone: AtomicBool,
    /// Request programs, drawn at admission in arrival order; `None` when no type has paths.
    pub programs: Option<Mutex<Programs>>,
    /// Per request type: it has a program (checked without the lock).
    pub with_program: Vec<bool>,
    pub mutexes: Mutexes,
    pub stacks: StackPool,
    /// Sessions silent for this long (and with nothing at the server) are disconnected.
    pub session_idle_ns: microsched_core::Nanos,
    /// The shared secret that Connects must prove ([`crate::auth`]), if any.
    pub secret: Option<crate::auth::Secret>,
    /// Largest service time a request may ask for ([`ServeOpts::max_service_ns`]).
    pub max_service_ns: u64,
    pub replay: Mutex<crate::auth::ReplayGuard>,
    /// `server.lock_control`: the ASQM / try_lock rule and per-lock statistics.
    pub asqm: Option<crate::asqm::Asqm>,
    /// Per condvar of the request programs (`workload.condvars`, by id), whole run.
    pub condvar_stats: Mutex<CondvarStats>,
    /// Time-slice preemption: quantum deadlines, the timer's flags, a shared policy instance.
    pub preempt: crate::preempt::Preempt,
    /// Breakwater v2's worker-start drop budget ([`crate::startdrop`]).
    pub start_budget_ns: Option<microsched_core::Nanos>,
    /// The timeline sink (`--trace`), set by [`Server::trace`]; empty: untraced.
    pub trace: std::sync::OnceLock<Arc<crate::trace::TraceSink>>,
    /// The dispatcher thread's queues and reports, when the scenario runs with one
    /// ([`crate::dispatcher`]): then it alone receives from the socket.
    pub dispatch: Option<crate::dispatcher::Dispatch>,
}

impl Shared {
    /// Every counter by name, with `condvar_items`, which is counted once per condvar (its
    /// `signals`, [`crate::asqm`]'s `CondvarPutItem`) and summed here.
    pub fn counters_snapshot(&self) -> serde_json::Map<String, serde_json::Value> {
        let mut m = self.counters.snapshot();
        m.insert("condvar_items".into(), self.condvar_stats.lock().signals().into());
        m
    }

    pub fn active_cores(&self) -> usize {
        self.cores
            .iter()
            .filter(|c| matches!(c.parker.phase(), Phase::Busy | Phase::Search))
            .count()
    }

    /// Queues `job` at `place`, stamped `at` (its arrival, or when it became ready again).
    pub fn deliver(&self, place: Place, job: Job, at: microsched_core::Nanos) {
        match place {
            Place::Core(c) => {
                self.cores[c as usize].deliver(job, at);
                if self.preempt.enabled {
                    self.preempt.queued_at(c as usize, &self.clock, &self.counters);
                }
            }
            Place::Shared => self.shared.push(job, at),
            Place::Class(k) => self.dispatch.as_ref().expect("class queues only with a dispatcher").push_class(k, job, at),
        }
    }

    /// Requests waiting in every queue.
    pub fn queued(&self) -> u64 {
        self.cores.iter().map(|c| c.queued()).sum::<u64>()
            + self.shared.stamps.len()
            + self.dispatch.as_ref().map_or(0, |d| d.class_queued())
    }

    #[inline]
    pub fn send(&self, bytes: &[u8], to: SocketAddr) {
        if self.sock.send_to(bytes, to).is_err() {
            Counters::bump(&self.counters.send_errors);
        }
    }

    pub fn send_credit(&self, m: CreditMsg) {
        Counters::bump(&self.counters.credit_messages);
        self.send(
            &encode(&Msg::Credit {
                cookie: m.cookie,
                credits: m.credits,
            }),
            m.peer,
        );
    }

    /// A request of `session` completed at `done`: under credit-based control, the credits its
    /// response carries (the controller's decision at the current delay), and the credits the
    /// completion freed for waiting sessions sent; without, 0. `msgs` is the caller's scratch.
    pub fn complete_credits(&self, done: Nanos, session: u32, msgs: &mut Vec<CreditMsg>) -> u32 {
        if !self.credit_based {
            return 0;
        }
        let delay = self.delay_ns.load(Ordering::Relaxed);
        let mut rpc = self.rpc.lock();
        let credits = rpc.complete(done, session, delay);
        rpc.wakeups(msgs);
        drop(rpc);
        for m in msgs.drain(..) {
            self.send_credit(m);
        }
        credits
    }
}

/// A running server.
pub struct Server {
    sh: Arc<Shared>,
    addr: SocketAddr,
    opts: ServeOpts,
    scenario_name: String,
    queue_policy: &'static str,
    workers: Vec<JoinHandle<()>>,
    pinned_workers: bool,
    control: Option<JoinHandle<ControlOut>>,
    timer: Option<JoinHandle<()>>,
    dispatcher: Option<JoinHandle<crate::dispatcher::DispatcherReport>>,
    be: Option<BeCoTenant>,
    be_threads: u32,
    started: Instant,
}

impl Server {
    /// Validates the configuration, binds, and starts every thread.
    pub fn start(loaded: &Loaded, opts: ServeOpts) -> Result<Server, ConfigError> {
        // Under `server.lock_control` the programs take their locks with ASQM.
        let sc = &loaded.scenario;
        let handler: Arc<dyn Handler> = match (sc.runtime.handler, &sc.server.lock_control) {
            (microsched_core::scenario::HandlerKind::Kv, _) => Arc::new(crate::kv::KvStore::new(sc)?),
            (_, Some(lc)) => Arc::new(crate::asqm::ProgramHandler::new(lc, &lock_families(sc))),
            (_, None) => Arc::new(Synthetic),
        };
        Self::start_with(loaded, opts, handler)
    }

    pub fn start_with(
        loaded: &Loaded,
        opts: ServeOpts,
        handler: Arc<dyn Handler>,
    ) -> Result<Server, ConfigError> {
        let sc = &loaded.scenario;
        check_scenario(sc)?;
        let programs = Programs::new(&sc.workload, &loaded.base_dir, sc.seed)?;
        let condvar_names: Vec<String> = programs.condvars().map(|(n, _)| n.to_string()).collect();
        check_loopback(opts.addr, opts.allow_remote, "--addr")?;
        let max_service_ns = opts.service_cap_ns()?;
        let secret = crate::auth::Secret::from_env()?;
        let session_idle_ns = microsched_core::time::ms(sc.runtime.session_idle_ms).max(1);
        let mut fair = crate::rpc::Fairness::defaults(sc.clients.sessions, session_idle_ns);
        if let Some(cap) = opts.max_client_sessions {
            if cap == 0 {
                return Err(ConfigError("--max-client-sessions: 0 is not allowed: use 1 or more".into()));
            }
            fair.max_per_client = cap.min(sc.clients.sessions);
        }
        if let Some(rate) = opts.connect_rate {
            if !(rate.is_finite() && rate > 0.0) {
                return Err(ConfigError(format!(
                    "--connect-rate: {rate} is not allowed: use a number of Connects per second > 0"
                )));
            }
            fair.connect_rate = rate;
        }
        let sock = UdpSocket::bind(opts.addr)
            .map_err(|e| ConfigError(format!("--addr: cannot bind {}: {e}", opts.addr)))?;
        let addr = sock
            .local_addr()
            .map_err(|e| ConfigError(format!("--addr: {e}")))?;
        set_buffers(&sock, 8 << 20);
        // A dispatcher core takes one of the cores (the simulator's `worker_cores`).
        let n = microsched_core::sched::worker_cores(sc);
        let allocator = alloc::build(&sc.policy.allocator, &microsched_core::env::AllocEnv { max_cores: n, seed: sc.seed })
            .map_err(|e| ConfigError(e.to_string()))?;
        let park_rule = allocator.park_rule();
        // Static allocation starts with every core; dynamic ones with one, as the simulator.
        let initially_active = if park_rule.mode == ParkMode::Never {
            n
        } else {
            1
        };
        let rtt = us(sc.network.rtt_us);
        let env = microsched_core::env::OverloadEnv { sessions: sc.clients.sessions, max_cores: n, rtt_ns: rtt, seed: sc.seed };
        let ctl = overload::build(&sc.policy.overload, &env).map_err(|e| ConfigError(e.to_string()))?;
        let credit_based = ctl.is_some();
        let mut cores = Vec::new();
        let mut locals = Vec::new();
        for i in 0..n {
            let (c, w) = CoreShared::new(if i < initially_active {
                Phase::Search
            } else {
                Phase::Parked
            });
            cores.push(c);
            locals.push(LocalQueue { runq: w });
        }
        let preempt = crate::preempt::Preempt::new(sc, n as usize);
        let dispatch = if crate::dispatcher::wanted(sc) {
            Some(
                crate::dispatcher::Dispatch::new(sc, n as usize, preempt.enabled)
                    .map_err(|e| ConfigError(format!("server.dispatcher: cannot create the dispatcher's event fd: {e}")))?,
            )
        } else {
            None
        };
        let sh = Arc::new(Shared {
            clock: Clock::new(),
            cores,
            shared: SharedQueue::default(),
            sock,
            rpc: Mutex::new(Rpc::with_fairness(ctl, sc.clients.sessions, fair)),
            credit_based,
            alloc: Mutex::new(allocator),
            park_rule,
            delay_ns: AtomicU64::new(0),
            stop: AtomicBool::new(false),
            counters: Counters::default(),
            handler,
            yield_when_idle: sc.runtime.yield_when_idle,
            ntypes: sc.workload.types.len() as u16,
            parks: AtomicU64::new(0),
            parks_while_drained: AtomicU64::new(0),
            once: opts.once,
            clients_gone: AtomicBool::new(false),
            with_program: (0..sc.workload.types.len() as u16).map(|t| programs.has_program(t)).collect(),
            mutexes: Mutexes::new(programs.mutexes()).with_spin((0..programs.mutexes()).map(|m| programs.is_spin(m)).collect()),
            programs: (0..sc.workload.types.len() as u16)
                .any(|t| programs.has_program(t))
                .then(|| Mutex::new(programs)),
            stacks: StackPool::new(MAX_STACKS),
            session_idle_ns,
            secret,
            max_service_ns,
            replay: Mutex::new(Default::default()),
            asqm: sc.server.lock_control.as_ref().map(|lc| crate::asqm::Asqm::new(lc, &lock_families(sc))),
            condvar_stats: Mutex::new({
                let mut c = CondvarStats::new(condvar_names);
                c.measuring = true;
                c
            }),
            preempt,
            start_budget_ns: crate::startdrop::budget(sc),
            trace: std::sync::OnceLock::new(),
            dispatch,
        });
        let be = (sc.runtime.be_threads > 0).then(|| BeCoTenant::start(sc.runtime.be_threads));
        let queue_policy = Sched::new(sc, 0, sh.clone()).name();
        let cpus = crate::clock::allowed_cpus();
        let pinned_workers = sc.runtime.pin_workers && locals.len() <= cpus.len();
        let workers = locals
            .into_iter()
            .enumerate()
            .map(|(i, local)| {
                let sh = sh.clone();
                let sched = Sched::new(sc, i, sh.clone());
                let cpu = pinned_workers.then(|| cpus[i]);
                std::thread::Builder::new()
                    .name(format!("worker-{i}"))
                    .spawn(move || {
                        if let Some(cpu) = cpu {
                            crate::clock::pin_to_cpu(cpu);
                        }
                        crate::worker::run(sh, i, local, sched)
                    })
                    .expect("spawn worker")
            })
            .collect();
        let control = {
            let sh = sh.clone();
            let tick = us(sc.runtime.tick_us).max(1);
            let sample = us(sc.metrics.sample_interval_us.max(1000.0));
            let ops = be.as_ref().map(|b| b.counter());
            let realtime = sc.runtime.realtime;
            let sched = Sched::new(sc, n as usize, sh.clone());
            std::thread::Builder::new()
                .name("control".into())
                .spawn(move || control::run(sh, sched, tick, sample, ops, realtime))
                .expect("spawn controller")
        };
        let dispatcher = sh.dispatch.is_some().then(|| {
            let sh = sh.clone();
            let sched = Sched::new(sc, n as usize + 2, sh.clone());
            std::thread::Builder::new()
                .name("dispatcher".into())
                .spawn(move || crate::dispatcher::run(sh, sched))
                .expect("spawn dispatcher")
        });
        // The dispatcher watches the quantum deadlines itself when its policy sends the
        // preemptions; else a timer thread does.
        let timer_needed = sh.preempt.enabled && !sh.dispatch.as_ref().is_some_and(|d| d.signals_here);
        let timer = timer_needed.then(|| {
            let sh = sh.clone();
            let sched = Sched::new(sc, n as usize + 1, sh.clone());
            let realtime = sc.runtime.realtime;
            std::thread::Builder::new()
                .name("preempt-timer".into())
                .spawn(move || crate::preempt::run_timer(sh, sched, realtime))
                .expect("spawn preemption timer")
        });
        Ok(Server {
            sh,
            timer,
            dispatcher,
            addr,
            opts,
            scenario_name: sc.name.clone(),
            queue_policy,
            pinned_workers,
            workers,
            control: Some(control),
            be,
            be_threads: sc.runtime.be_threads,
            started: Instant::now(),
        })
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Whether Connects must prove the shared secret ([`crate::auth::ENV`]).
    pub fn authenticated(&self) -> bool {
        self.sh.secret.is_some()
    }

    /// The largest service time a request may ask for (ns).
    pub fn max_service_ns(&self) -> u64 {
        self.sh.max_service_ns
    }

    /// The session-slot sharing rules in force.
    pub fn fairness(&self) -> crate::rpc::Fairness {
        self.sh.rpc.lock().fairness()
    }

    /// Whether the server has reached its end (duration, or every client gone in `once` mode).
    pub fn finished(&self) -> Option<&'static str> {
        if self.sh.clients_gone.load(Ordering::Relaxed) {
            return Some("clients_gone");
        }
        match self.opts.duration {
            Some(d) if self.started.elapsed() >= d => Some("duration"),
            _ => None,
        }
    }

    /// Blocks until the server reaches its end, checking `interrupted` every 50 ms (a `true`
    /// stops it early), then stops it and returns its report.
    pub fn wait(self, mut interrupted: impl FnMut() -> bool) -> ServerReport {
        loop {
            if let Some(why) = self.finished() {
                return self.stop_with(why);
            }
            if interrupted() {
                return self.stop_with("stopped");
            }
            std::thread::sleep(Duration::from_millis(50).min(
                self.opts.duration.map_or(Duration::from_millis(50), |d| {
                    d.saturating_sub(self.started.elapsed())
                }),
            ));
        }
    }

    /// The live counters, read while the server runs: every counter, the connected sessions
    /// and the seconds since the start (one JSON object, for a periodic line or a scrape).
    pub fn live(&self) -> serde_json::Value {
        let mut m = self.sh.counters_snapshot();
        m.insert("connected_sessions".into(), self.sh.rpc.lock().connected().into());
        m.insert("uptime_s".into(), self.started.elapsed().as_secs_f64().into());
        m.insert("rejected_total".into(), self.sh.counters.rejected_total().into());
        serde_json::Value::Object(m)
    }

    pub fn stop(self) -> ServerReport {
        self.stop_with("stopped")
    }

    /// Stops the server, recording `why` as the report's stop reason.
    pub fn stop_because(self, why: &str) -> ServerReport {
        self.stop_with(why)
    }

    /// Records the server's timeline over `window` (ns of run time since its start), at most
    /// `max_events` events ([`crate::trace`]); the returned sink gives the trace once stopped.
    /// Called once, right after the start (a second call returns the first sink).
    pub fn trace(&self, window: (microsched_core::Nanos, microsched_core::Nanos), max_events: usize) -> Arc<crate::trace::TraceSink> {
        let phases: Vec<_> = self.sh.cores.iter().map(|c| c.parker.phase()).collect();
        let sink = self.sh.trace.get_or_init(|| Arc::new(crate::trace::TraceSink::new(phases.len(), window, max_events, &phases)));
        for (i, c) in self.sh.cores.iter().enumerate() {
            let _ = c.parker.trace.set((sink.clone(), i));
        }
        sink.clone()
    }

    fn stop_with(mut self, why: &str) -> ServerReport {
        let end = self.sh.clock.now();
        if let Some(t) = self.sh.trace.get() {
            // Closes the slices open now: what the workers do while stopping is not the run's.
            t.finish(end);
        }
        self.sh.stop.store(true, Ordering::Relaxed);
        for c in &self.sh.cores {
            c.parker.wake();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
        if let Some(t) = self.timer.take() {
            let _ = t.join();
        }
        // Requests the dispatcher still held (handed back and not requeued, or its own).
        let mut dispatcher = self.dispatcher.take().and_then(|d| d.join().ok());
        if let (Some(rep), Some(d)) = (dispatcher.as_mut(), self.sh.dispatch.as_ref()) {
            rep.load.queued_end += d.backlog();
        }
        // Queued, or suspended behind a mutex (its holder was queued or stopped).
        let abandoned: u64 = self.sh.queued()
            + self.sh.mutexes.waiting() as u64
            + dispatcher.as_ref().map_or(0, |d| d.load.queued_end);
        let kernel_drops = crate::netstat::udp_drops(self.addr).unwrap_or(0);
        let ctl = self
            .control
            .take()
            .map(|c| c.join().expect("controller thread"));
        let sched_idle = self
            .be
            .as_ref()
            .is_some_and(|b| b.sched_idle.load(Ordering::Relaxed));
        let be_ops = self.be.take().map_or(0, |b| b.stop());
        let sh = &self.sh;
        let mut times = [0u64; 4];
        for c in &sh.cores {
            let t = c.parker.times(end);
            for k in 0..4 {
                times[k] += t[k];
            }
        }
        let span = end.max(1) as f64;
        let (series, creport, grants, series_info) = match ctl {
            Some(c) => (c.series, c.report, c.grants, c.series_info),
            None => Default::default(),
        };
        // (Not inside the report's literal below: a guard taken there lives to its end.)
        let (fair, slots) = {
            let rpc = sh.rpc.lock();
            (rpc.fairness(), rpc.slots())
        };
        let n = sh.cores.len() as u32;
        ServerReport {
            addr: self.addr.to_string(),
            scenario: self.scenario_name.clone(),
            allocator: sh.alloc.lock().name().to_string(),
            overload: sh.rpc.lock().controller_name().to_string(),
            queue_policy: self.queue_policy.to_string(),
            workers: n,
            pinned_workers: self.pinned_workers,
            start_unix_ns: sh.clock.start_unix_ns(),
            duration_s: end as f64 / 1e9,
            stop_reason: why.to_string(),
            counters: sh.counters_snapshot(),
            rejected_total: sh.counters.rejected_total(),
            abandoned,
            kernel_drops,
            cores: CoreReport {
                max: n,
                allocated_mean: (times[0] + times[1] + times[3]) as f64 / span,
                busy_mean: times[0] as f64 / span,
                parked_mean: times[2] as f64 / span,
                waking_mean: times[3] as f64 / span,
                busy_ns: times[0],
                search_ns: times[1],
                parked_ns: times[2],
                waking_ns: times[3],
                total_ns: times.iter().sum(),
                grants,
                parks: sh.parks.load(Ordering::Relaxed),
                parks_while_drained: sh.parks_while_drained.load(Ordering::Relaxed),
                completed_per_worker: sh
                    .cores
                    .iter()
                    .map(|c| c.completed.load(Ordering::Relaxed))
                    .collect(),
                wake_us: {
                    let mut all = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds");
                    for c in sh.cores.iter() {
                        if let Some(h) = c.parker.wake_latencies() {
                            let _ = all.add(&h);
                        }
                    }
                    crate::report::WakeReport::from_histogram(&all)
                },
            },
            be: BeReport {
                threads: self.be_threads,
                sched_idle,
                ops: be_ops,
                ops_per_s: be_ops as f64 / (end as f64 / 1e9).max(1e-9),
            },
            controller: creport,
            timeseries_info: series_info,
            timeseries: series,
            limits: crate::report::Limits {
                authentication: sh.secret.is_some(),
                max_service_us: sh.max_service_ns as f64 / 1e3,
                sessions: slots,
                max_client_sessions: fair.max_per_client,
                connect_rate_per_s: fair.connect_rate,
                connect_burst: fair.connect_burst,
                evict_idle_ms: fair.evict_idle_ns as f64 / 1e6,
                session_idle_ms: sh.session_idle_ns as f64 / 1e6,
            },
            locks: sh.asqm.as_ref().map(|a| a.summaries(end)).unwrap_or_default(),
            condvars: CondvarStats::summaries(&[&sh.condvar_stats.lock()], |cv| sh.mutexes.items(cv)),
            dispatcher,
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A server dropped without `stop` still ends its threads.
        self.sh.stop.store(true, Ordering::Relaxed);
        for c in &self.sh.cores {
            c.parker.wake();
        }
    }
}

/// The scenario's lock families, (name, members) in mutex-id order.
pub(crate) fn lock_families(sc: &microsched_core::scenario::Scenario) -> Vec<(&str, u32)> {
    sc.workload.locks.iter().map(|l| (l.name.as_str(), l.count)).collect()
}

/// Larger socket buffers: bursts of datagrams must wait in userspace queues, not be dropped.
fn set_buffers(sock: &UdpSocket, bytes: i32) {
    use std::os::fd::AsRawFd;
    for opt in [libc::SO_RCVBUF, libc::SO_SNDBUF] {
        // SAFETY: setsockopt with a valid fd and a pointer to an i32 that outlives the call.
        unsafe {
            libc::setsockopt(
                sock.as_raw_fd(),
                libc::SOL_SOCKET,
                opt,
                &bytes as *const i32 as *const libc::c_void,
                std::mem::size_of::<i32>() as libc::socklen_t,
            );
        }
    }
}

pub(crate) fn set_socket_buffers(sock: &UdpSocket, bytes: i32) {
    set_buffers(sock, bytes)
}

/// Receives up to `budget` datagrams without blocking and handles each (validation, admission,
/// delivery to the queue `sched` steers it to). Returns how many were received. Called by searching workers and
/// by the controller; `buf` and `msgs` are the caller's scratch space.
pub(crate) fn poll_socket(
    sh: &Shared,
    sched: &mut Sched,
    budget: usize,
    buf: &mut [u8; 2048],
    msgs: &mut Vec<CreditMsg>,
) -> usize {
    let mut got = 0;
    while got < budget {
        let Some((len, peer)) = recv_nonblocking(&sh.sock, buf) else {
            break;
        };
        got += 1;
        Counters::bump(&sh.counters.datagrams);
        let now = sh.clock.now();
        // A datagram longer than any message is malformed even if truncated to a valid prefix.
        let msg = if len > MAX_LEN {
            Err(DecodeError::BadLength { kind: buf[3], len })
        } else {
            decode(&buf[..len])
        };
        let msg = match msg {
            Ok(m) => m,
            Err(e) => {
                let c = &sh.counters;
                Counters::bump(match e {
                    DecodeError::Short => &c.short,
                    DecodeError::BadMagic => &c.bad_magic,
                    DecodeError::BadVersion(_) => &c.bad_version,
                    DecodeError::UnknownKind(_) => &c.unknown_kind,
                    DecodeError::BadLength { .. } => &c.bad_length,
                    DecodeError::BadStatus(_) => &c.bad_status,
                });
                continue;
            }
        };
        let disconnect = matches!(msg, Msg::Disconnect { .. });
        handle(sh, sched, now, msg, peer, msgs);
        if disconnect && sh.once && sh.rpc.lock().all_gone() {
            sh.clients_gone.store(true, Ordering::Relaxed);
        }
    }
    got
}

/// `recvfrom(MSG_DONTWAIT)`: one datagram (truncated to `buf`, its length then > `MAX_LEN`) and
/// its sender, or `None` when nothing is waiting (or on any error).
fn recv_nonblocking(sock: &UdpSocket, buf: &mut [u8]) -> Option<(usize, SocketAddr)> {
    use std::net::{Ipv4Addr, Ipv6Addr, SocketAddrV4, SocketAddrV6};
    use std::os::fd::AsRawFd;
    // SAFETY: all-zero is a valid sockaddr_storage.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut sl = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: buf and ss are valid for writes of the given lengths for the duration of the call.
    let n = unsafe {
        libc::recvfrom(
            sock.as_raw_fd(),
            buf.as_mut_ptr() as *mut libc::c_void,
            buf.len(),
            libc::MSG_DONTWAIT,
            &mut ss as *mut libc::sockaddr_storage as *mut libc::sockaddr,
            &mut sl,
        )
    };
    if n < 0 {
        return None;
    }
    let peer = match ss.ss_family as i32 {
        libc::AF_INET => {
            // SAFETY: the kernel wrote a sockaddr_in (family AF_INET) into the storage.
            let a = unsafe { &*(&ss as *const libc::sockaddr_storage as *const libc::sockaddr_in) };
            SocketAddr::V4(SocketAddrV4::new(
                Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr)),
                u16::from_be(a.sin_port),
            ))
        }
        libc::AF_INET6 => {
            // SAFETY: the kernel wrote a sockaddr_in6 (family AF_INET6) into the storage.
            let a =
                unsafe { &*(&ss as *const libc::sockaddr_storage as *const libc::sockaddr_in6) };
            SocketAddr::V6(SocketAddrV6::new(
                Ipv6Addr::from(a.sin6_addr.s6_addr),
                u16::from_be(a.sin6_port),
                a.sin6_flowinfo,
                a.sin6_scope_id,
            ))
        }
        _ => return None,
    };
    Some((n as usize, peer))
}

/// Waits until the socket is readable or `timeout` passed (the controller's sleep when no worker
/// polls the socket).
pub(crate) fn wait_readable(sock: &UdpSocket, timeout: Duration) {
    use std::os::fd::AsRawFd;
    let mut fds = libc::pollfd {
        fd: sock.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    unsafe {
        libc::ppoll(&mut fds, 1, &ts, std::ptr::null());
    }
}

/// A Connect (authenticated if the server has a secret): a slot and its token, or `Full`, or
/// nothing (over the client's Connect rate).
fn connect(sh: &Shared, now: u64, peer: SocketAddr, cookie: u32, demand: u32) {
    let c = &sh.counters;
    let (r, evicted) = {
        let mut rpc = sh.rpc.lock();
        let before = rpc.evicted();
        let r = rpc.connect(now, peer, cookie, demand);
        (r, rpc.evicted() - before)
    };
    if evicted > 0 {
        c.evicted_sessions.fetch_add(evicted, Ordering::Relaxed);
    }
    match r {
        Connected::Ack { token, credits } => {
            Counters::bump(&c.connects);
            sh.send(
                &encode(&Msg::ConnectAck {
                    cookie,
                    token,
                    credits,
                }),
                peer,
            );
        }
        Connected::Full | Connected::OverCap => {
            // Said, not silently dropped: the client can tell a full server from none.
            Counters::bump(if r == Connected::Full { &c.no_slot } else { &c.client_cap });
            sh.send(&encode(&Msg::Full { cookie }), peer);
        }
        // Unanswered: a flood of Connects gets no flood of answers.
        Connected::RateLimited => Counters::bump(&c.connect_rate_limited),
    }
}

fn handle(sh: &Shared, sched: &mut Sched, now: u64, msg: Msg, peer: SocketAddr, msgs: &mut Vec<CreditMsg>) {
    let c = &sh.counters;
    match msg {
        Msg::Connect { .. } if sh.secret.is_some() => Counters::bump(&c.unauthenticated),
        Msg::AuthConnect { cookie, demand, stamp_ms, mac } if sh.secret.is_some() => {
            let secret = sh.secret.as_ref().expect("checked");
            let now_ms = crate::auth::unix_ms();
            let ok = secret.verify(cookie, demand, stamp_ms, &mac, now_ms).is_ok()
                && sh.replay.lock().admit(mac, peer, stamp_ms, now_ms);
            if ok {
                connect(sh, now, peer, cookie, demand);
            } else {
                Counters::bump(&c.bad_mac);
            }
        }
        // Without a secret, an authenticated Connect is as good as a plain one.
        Msg::AuthConnect { cookie, demand, .. } => connect(sh, now, peer, cookie, demand),
        Msg::Connect { cookie, demand } => connect(sh, now, peer, cookie, demand),
        Msg::Request {
            token,
            req_id,
            demand,
            service_ns,
            rtype,
        } => {
            let delay = sh.delay_ns.load(Ordering::Relaxed);
            let mut rpc = sh.rpc.lock();
            let sid = match rpc.auth(token, peer) {
                Auth::Ok(sid) => sid,
                Auth::UnknownToken => return Counters::bump(&c.unknown_token),
                Auth::WrongPeer => return Counters::bump(&c.wrong_peer),
            };
            if rtype >= sh.ntypes || service_ns > sh.max_service_ns {
                return Counters::bump(&c.bad_request);
            }
            Counters::bump(&c.requests);
            let verdict = rpc.admit(now, sid, demand, delay);
            rpc.wakeups(msgs);
            drop(rpc);
            for m in msgs.drain(..) {
                sh.send_credit(m);
            }
            match verdict {
                Verdict::Admit => {
                    Counters::bump(&c.admitted);
                    let task = match &sh.programs {
                        Some(p) if sh.with_program[rtype as usize] => {
                            let mut ops = Vec::new();
                            p.lock().draw(rtype, service_ns, &mut ops);
                            Some(Box::new(Task::Program(ops)))
                        }
                        _ => None,
                    };
                    let job = Job {
                        session: sid,
                        req_id,
                        rtype,
                        service_ns,
                        arrived: now,
                        peer,
                        task,
                    };
                    match &sh.dispatch {
                        Some(d) => d.arrival(sh, sched, sid, job, now),
                        None => {
                            let place = sched.steer(sid);
                            sh.deliver(place, job, now);
                        }
                    }
                }
                Verdict::Drop { credits } => {
                    Counters::bump(&c.aqm_dropped);
                    sh.send(
                        &encode(&Msg::Response {
                            req_id,
                            credits,
                            status: Status::Dropped,
                            qdelay_ns: 0,
                            service_ns: 0,
                        }),
                        peer,
                    );
                }
                Verdict::Reject { credits } => {
                    Counters::bump(&c.rejected_no_credit);
                    sh.send(
                        &encode(&Msg::Response {
                            req_id,
                            credits,
                            status: Status::Rejected,
                            qdelay_ns: 0,
                            service_ns: 0,
                        }),
                        peer,
                    );
                }
            }
        }
        Msg::CreditRequest { token, demand } => {
            let mut rpc = sh.rpc.lock();
            let sid = match rpc.auth(token, peer) {
                Auth::Ok(sid) => sid,
                Auth::UnknownToken => return Counters::bump(&c.unknown_token),
                Auth::WrongPeer => return Counters::bump(&c.wrong_peer),
            };
            Counters::bump(&c.credit_requests);
            let answer = rpc.credit_request(now, sid, demand);
            rpc.wakeups(msgs);
            drop(rpc);
            if let Some((peer, cookie, credits)) = answer {
                msgs.push(CreditMsg {
                    peer,
                    cookie,
                    credits,
                });
            }
            for m in msgs.drain(..) {
                sh.send_credit(m);
            }
        }
        Msg::Disconnect { token } => {
            let mut rpc = sh.rpc.lock();
            match rpc.auth(token, peer) {
                Auth::Ok(sid) => {
                    rpc.disconnect(now, sid);
                    Counters::bump(&c.disconnects);
                }
                Auth::UnknownToken => Counters::bump(&c.unknown_token),
                Auth::WrongPeer => Counters::bump(&c.wrong_peer),
            }
        }
        Msg::ConnectAck { .. } | Msg::Response { .. } | Msg::Credit { .. } | Msg::Full { .. } => {
            Counters::bump(&c.unexpected_kind)
        }
    }
}
