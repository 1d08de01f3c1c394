//! An application of the scenario: its arrival process, request mix and programs, its client
//! sessions (their Breakwater client state towards each node, under credit-based overload
//! control), its latency recorder and its conservation counters.

use std::path::Path;

use microsched_core::metrics::LatencyRecorder;
use microsched_core::overload::client::{Clients, Out};
use microsched_core::program::{Op, Programs};
use microsched_core::rng::{hash, stream, Stream};
use microsched_core::scenario::{ClientBurst, Scenario};
use microsched_core::summary::{AppSummary, Requests};
use microsched_core::time::us;
use microsched_core::topology::{AppView, ReplicaChoice};
use microsched_core::workload::{load_steps_for, pick, Arrivals, RequestMix};
use microsched_core::{Nanos, ScenarioError};

/// How many arrivals ahead a request's session is drawn (same stream, same order): one arrival
/// is often too short a lead (Poisson gaps) for the prefetch of its client state to complete.
const SESSION_LOOKAHEAD: usize = 4;

/// Sessions from which per-session state is prefetched: below this, every session's client and
/// server state stays in the cache, and drawing ahead only costs time.
pub const PREFETCH_MIN_SESSIONS: u32 = 1 << 14;

pub struct App {
    pub name: String,
    pub mix: RequestMix,
    pub programs: Programs,
    pub arrivals: Arrivals,
    session_rng: Stream,
    /// A recorded run's (session, type, service) in creation order (`workload.replay`).
    replayed: Option<std::collections::VecDeque<(u32, u16, Nanos)>>,
    /// Sessions of the next requests, drawn ahead so that their client state can be prefetched
    /// (a ring: `upcoming[next]` is the oldest).
    upcoming: [u32; SESSION_LOOKAHEAD],
    next: usize,
    primed: bool,
    replicas: u16,
    /// With per-application core sets: the node holding its cores, where all its sessions go.
    pub own_node: Option<u16>,
    pub sessions: u32,
    /// Its first session's number across applications.
    pub session_base: u32,
    /// Its first mutex's id in the nodes' mutex tables.
    pub mutex_base: u32,
    /// Its first condition variable's id in the nodes' condvar tables (set by the driver).
    pub condvar_base: u32,
    pub replica_choice: ReplicaChoice,
    pub retries: u8,
    pub retry_timeouts: bool,
    /// `clients.burst = "credits"`: the largest burst (`clients.queue_capacity`); 0 when off.
    pub burst_cap: u32,
    pub recorder: LatencyRecorder,
    pub slo_us: f64,
    /// Its offered load at the start (requests/s).
    pub initial_rps: f64,
    /// Client state per node (credit-based overload control only).
    pub clients: Vec<Clients<u32>>,
    pub out: Vec<Out<u32>>,
    // Whole-run conservation counters.
    pub generated: u64,
    pub completed: u64,
    pub dropped: u64,
    // Measured-window counters.
    pub retried: u64,
    pub client_timeouts: u64,
    pub client_overflows: u64,
    pub credit_requests: u64,
}

impl App {
    /// Application `index` of `sc`; `session_base` and `mutex_base` number its sessions and
    /// mutexes after the applications before it.
    pub fn new(
        sc: &Scenario,
        a: &AppView,
        base_dir: &Path,
        seed: u64,
        session_base: u32,
        mutex_base: u32,
        credit_based: bool,
    ) -> Result<Self, ScenarioError> {
        let prefix = &a.stream_prefix;
        let mix = RequestMix::for_workload(a.workload, base_dir, seed, prefix).map_err(|e| in_app(e, a))?;
        let programs = Programs::for_app(a.workload, base_dir, seed, prefix).map_err(|e| in_app(e, a))?;
        let steps = load_steps_for(a.load, sc.app_capacity_rps(a, base_dir)?);
        let names: Vec<String> = a.workload.types.iter().map(|t| t.name.clone()).collect();
        let slo_us = sc.app_slo_us(a, base_dir)?;
        let c = a.clients;
        let replay = match &a.workload.replay {
            Some(file) => {
                let field = "workload.replay";
                let r = microsched_core::replay::Replay::load(file, base_dir, field, a.workload.types.len()).map_err(|e| in_app(e, a))?;
                r.check_sessions(c.sessions, field).map_err(|e| in_app(e, a))?;
                Some(r)
            }
            None => None,
        };
        let clients = if credit_based {
            // The simulated network loses nothing: a credit request is never retried.
            (0..sc.node_count()).map(|_| Clients::new(c.sessions, c.queue_capacity, us(c.timeout_us), true, None).with_first_request_only(c.first_request_only)).collect()
        } else {
            Vec::new()
        };
        Ok(Self {
            name: a.name.to_string(),
            mix,
            programs,
            arrivals: match &replay {
                Some(r) => Arrivals::from_steps_named(&steps, seed, prefix).replaying(r.rows.iter().map(|row| row.created_ns)),
                None => Arrivals::from_steps_named(&steps, seed, prefix),
            },
            session_rng: stream(seed, &format!("{prefix}sessions")),
            replayed: replay.map(|r| r.rows.iter().map(|row| (row.session, row.rtype, row.service_ns)).collect()),
            upcoming: [0; SESSION_LOOKAHEAD],
            next: 0,
            primed: false,
            replicas: sc.node_count() as u16,
            own_node: None,
            sessions: c.sessions,
            session_base,
            mutex_base,
            condvar_base: 0,
            replica_choice: c.replica_choice,
            retries: c.retries as u8,
            retry_timeouts: c.retry_timeouts,
            burst_cap: if c.burst == ClientBurst::Credits { c.queue_capacity } else { 0 },
            recorder: LatencyRecorder::new(&names, us(slo_us)),
            slo_us,
            initial_rps: steps.first().map_or(0.0, |s| s.1),
            clients,
            out: Vec::with_capacity(64),
            generated: 0,
            completed: 0,
            dropped: 0,
            retried: 0,
            client_timeouts: 0,
            client_overflows: 0,
            credit_requests: 0,
        })
    }

    /// The next request's session, type, total work and program (appended to `ops`, mutex ids
    /// numbered across applications; `None` if the type has no program).
    pub fn draw(&mut self, ops: &mut Vec<Op>) -> (u32, u16, Nanos, bool) {
        if let Some(q) = &mut self.replayed {
            let (session, rtype, mut service) = q.pop_front().expect("one replayed row per replayed arrival");
            let has_program = self.programs.has_program(rtype);
            if has_program {
                ops.clear();
                service = self.programs.draw(rtype, service, ops);
                for op in ops.iter_mut() {
                    op.offset(self.mutex_base, self.condvar_base);
                }
            }
            return (session, rtype, service, has_program);
        }
        let session = if self.clients.is_empty() || self.sessions < PREFETCH_MIN_SESSIONS {
            // No client state to prefetch: the same stream, drawn when needed.
            pick(&mut self.session_rng, self.sessions)
        } else {
            if !self.primed {
                for i in 0..SESSION_LOOKAHEAD {
                    self.upcoming[i] = self.draw_ahead();
                }
                self.primed = true;
            }
            let ahead = self.draw_ahead();
            let session = std::mem::replace(&mut self.upcoming[self.next], ahead);
            self.next = (self.next + 1) % SESSION_LOOKAHEAD;
            session
        };
        let (rtype, service, has_program) = self.draw_request(ops);
        (session, rtype, service, has_program)
    }

    /// A request's type, total work and program, for a session already drawn (the rest of a
    /// `clients.burst` burst draws only these). Inlined: it is most of every arrival's draw.
    #[inline(always)]
    pub fn draw_request(&mut self, ops: &mut Vec<Op>) -> (u16, Nanos, bool) {
        let (rtype, mut service) = self.mix.draw();
        let has_program = self.programs.has_program(rtype);
        if has_program {
            ops.clear();
            service = self.programs.draw(rtype, service, ops);
            if self.mutex_base > 0 || self.condvar_base > 0 {
                for op in ops.iter_mut() {
                    op.offset(self.mutex_base, self.condvar_base);
                }
            }
        }
        (rtype, service, has_program)
    }

    /// The session of a request a few arrivals ahead, its client state prefetched.
    #[inline]
    fn draw_ahead(&mut self) -> u32 {
        let s = pick(&mut self.session_rng, self.sessions);
        self.clients[self.home_node(s, self.replicas) as usize].prefetch(s);
        s
    }

    /// Counts a new request of `session` of type `rtype` as generated (in the window's recorder
    /// too while `measuring`); returns its flow and its id.
    #[inline(always)]
    pub fn count_generated(&mut self, session: u32, rtype: u16, measuring: bool) -> (u32, u64) {
        let (flow, id) = (self.session_base + session, self.generated);
        self.generated += 1;
        if measuring {
            self.recorder.generated(rtype as usize);
        }
        (flow, id)
    }

    /// The node a session talks to first.
    pub fn home_node(&self, session: u32, replicas: u16) -> u16 {
        if let Some(n) = self.own_node {
            return n;
        }
        match self.replica_choice {
            _ if replicas == 1 => 0,
            ReplicaChoice::Primary => 0,
            ReplicaChoice::Hash => (hash(((self.session_base + session) as u64) ^ 0x005e_ed0f_4e91_1ca5) % replicas as u64) as u16,
        }
    }

    /// Requests of this application still in the system.
    pub fn in_flight(&self) -> u64 {
        self.generated - self.completed - self.dropped
    }

    pub fn summary(&self, window_s: f64) -> AppSummary {
        let s = self.recorder.summary(window_s);
        AppSummary {
            name: self.name.clone(),
            slo_us: self.slo_us,
            offered_rps: s.offered_rps,
            throughput_rps: s.throughput_rps,
            goodput_rps: s.goodput_rps,
            drop_rate: s.drop_rate,
            latency_us: s.latency_us,
            queueing_delay_us: s.queueing_delay_us,
            slowdown: s.slowdown,
            by_type: s.by_type,
            requests: Requests {
                generated: self.generated,
                completed: self.completed,
                dropped: self.dropped,
                in_flight: self.in_flight(),
            },
            retries: self.retried,
        }
    }
}

/// An error of an application after the first names its table.
fn in_app(mut e: ScenarioError, a: &AppView) -> ScenarioError {
    e.field = format!("{}{}", a.field, e.field);
    e
}
