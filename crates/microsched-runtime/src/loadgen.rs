//! The load generator: open-loop Poisson arrivals over many sessions, Breakwater's client
//! ([`crate::client`]) when the scenario names a credit controller, and the simulator's result
//! schema ([`Summary`]).
//!
//! * **Workload.** The same random streams as the simulator (`arrivals`, `sessions`, `types`,
//!   `service.{i}`, derived from the seed the same way) and the same samplers
//!   ([`microsched_core::dist::Sampler`]): with one seed, the simulator and the load generator
//!   produce the very same sequence of (arrival time, session, type, service time).
//! * **Open loop.** A request's latency runs from its *scheduled* send time to its response, so
//!   a late sender (the machine is busy) shows up as latency, never as a lower offered load.
//! * **One thread**, an event loop: receive everything pending, send what is due, fire client
//!   timers, expire requests in flight longer than `runtime.request_timeout_ms`, sample. It
//!   waits in `ppoll` (1 ns timer slack) until the next event: on a 2-CPU machine the server
//!   needs the other cycles. With `runtime.realtime` it runs under `SCHED_FIFO`, standing for
//!   the papers' separate client machines: it gets a CPU when it wakes.
//! * **Accounting.** Every generated request ends exactly once: completed, dropped with a notice
//!   (AQM `Dropped`, or `Rejected` for want of credit), dropped at the client (timeout or full
//!   queue, never sent), timed out in flight (no response), or still in flight / queued when the
//!   drain period ends ([`ClientCounters`]).
//! * **Replicas and retries** (`server.replicas`, one `--addr` per replica): every session
//!   connects to every replica; a request goes to its session's replica as
//!   `clients.replica_choice` says (the simulator's hash of the session, or the first replica),
//!   and a failure reply (AQM or lock drop, no credit, worker-start drop; with
//!   `clients.retry_timeouts` also a client timeout) is resent to the next replica up to
//!   `clients.retries` times, its latency still counted from its first scheduled send. Each try
//!   is counted ([`ReplicaCounters`], `retries`, `retried_requests`).

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap, VecDeque};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use microsched_core::metrics::LatencyRecorder;
use microsched_core::scenario::Loaded;
use microsched_core::summary::{Credits, Requests, SimStats, Summary};
use microsched_core::time::{ms, us};
use microsched_core::workload::{load_steps, Arrivals, RequestMix};
use microsched_core::Nanos;

/// Over UDP a credit request can be lost: re-ask after this long without an answer.
const CREDIT_RETRY_NS: Nanos = 5_000_000;
use hdrhistogram::Histogram;
use rand::Rng;
use serde::{Deserialize, Serialize};

use crate::clock::{realtime_priority, thread_cpu_ns, thread_sleeps, tight_timer_slack, Clock};
use crate::config::{check_loopback, check_scenario, ConfigError, MAX_RPS, MAX_SERVICE_NS};
use crate::records::Outcome;
use crate::wire::{decode, encode, Msg, Status};
use microsched_core::rng::hash;
use microsched_core::topology::ReplicaChoice;
use microsched_core::overload::client::{ClientDrop, Clients, Out};
use microsched_core::overload::seda::{Admit, Seda};

pub use microsched_core::rng::stream;

#[derive(Debug, Clone)]
pub struct LoadgenOpts {
    /// The server (the first replica).
    pub addr: SocketAddr,
    /// The other replicas, in order (`server.replicas` - 1 of them; empty with one server).
    pub more_addrs: Vec<SocketAddr>,
    pub allow_remote: bool,
    /// Overrides the scenario's seed.
    pub seed: Option<u64>,
}

/// The load generator's own counters (whole run, warm-up included).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClientCounters {
    pub generated: u64,
    /// Requests put on the wire.
    pub sent: u64,
    pub completed: u64,
    /// AQM drop notices received.
    pub aqm_dropped: u64,
    /// `Rejected` notices received (no credit at the server).
    pub rejected: u64,
    /// Failure replies of requests dropped by ASQM at a lock (`LockDropped`).
    #[serde(default)]
    pub lock_dropped: u64,
    /// Failure replies of requests dropped at worker start (`StartDropped`,
    /// `policy.overload.latency_budget_us`).
    #[serde(default)]
    pub start_dropped: u64,
    /// Refused at the client by SEDA's rate limit (never sent).
    #[serde(default)]
    pub seda_rejected: u64,
    /// Dropped at the client after waiting too long for a credit (never sent).
    pub client_timeouts: u64,
    /// Dropped at the client as the oldest entry of a full queue (never sent).
    pub client_overflows: u64,
    /// Sent, no response within `runtime.request_timeout_ms`.
    pub timed_out: u64,
    /// Responses that came after their request had timed out.
    pub late_responses: u64,
    /// Sent and unanswered, or queued at the client, when the drain period ended.
    pub in_flight_end: u64,
    pub queued_end: u64,
    pub credit_requests: u64,
    pub credit_messages: u64,
    pub datagrams_in: u64,
    pub datagrams_out: u64,
    /// Datagrams from the server the client could not decode or did not expect.
    pub bad_datagrams: u64,
    pub send_errors: u64,
    /// Datagrams the kernel dropped at the load generator's socket (responses never seen).
    pub kernel_drops: u64,
    /// How late requests were put on the wire after their scheduled time: the wait for a credit
    /// at the client plus the load generator's own lag (`schedule_lag_us`); it counts in the
    /// latency.
    pub send_lag_us_mean: f64,
    pub send_lag_us_max: f64,
    /// How late the load generator processed arrivals after their scheduled time: its own lag,
    /// without any wait for credits, part of every latency it measures. A p99 that is a sizeable
    /// part of the SLO means the load generator, not the server, shaped the result.
    #[serde(default)]
    pub schedule_lag_us: LagStats,
    /// Whether the load generator's thread got `SCHED_FIFO` (`runtime.realtime`).
    #[serde(default)]
    pub realtime: bool,
    /// The load generator thread's own CPU time over the whole run (user + system, warm-up and
    /// drain included), ms: on one machine, CPU the server's workers do not get.
    #[serde(default)]
    pub cpu_ms: f64,
    /// Times its thread slept and was woken (its voluntary context switches over the loop).
    #[serde(default)]
    pub wakeups: u64,
    /// Of those, the ones a datagram from the server ended (its reply, or a credit), rather than
    /// its own timer (the next arrival, a client timeout).
    #[serde(default)]
    pub wakeups_by_datagram: u64,
    /// Wall time of its loop (the span `cpu_ms` covers), ms.
    #[serde(default)]
    pub loop_ms: f64,
    /// Its CPU per wake-up by its own timer, and by a datagram from the server.
    #[serde(default)]
    pub timer_wakeup_cpu: crate::clock::WakeupCpu,
    #[serde(default)]
    pub datagram_wakeup_cpu: crate::clock::WakeupCpu,
    /// Requests resent to another replica after a failure (every resend, whole run).
    #[serde(default)]
    pub retries: u64,
    /// Resends over the measured window (the simulator's `applications[].retries`).
    #[serde(default)]
    pub measured_retries: u64,
    /// Requests resent at least once (whole run).
    #[serde(default)]
    pub retried_requests: u64,
    /// Per replica, in `--addr` order (one entry with one server).
    #[serde(default)]
    pub replicas: Vec<ReplicaCounters>,
    /// Every failure reply received, retried ones included (what the servers count); the
    /// outcome counters above count a request's last reply only.
    #[serde(default)]
    pub failure_replies: FailureReplies,
}

/// Failure replies by status, every try (whole run).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct FailureReplies {
    pub aqm_dropped: u64,
    pub rejected: u64,
    pub lock_dropped: u64,
    pub start_dropped: u64,
}

/// One replica's share of the tries (whole run).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ReplicaCounters {
    pub addr: String,
    /// Tries put on the wire to it (first sends and resends).
    pub sent: u64,
    /// Requests it completed.
    pub completed: u64,
    /// Failure replies it sent (drops and rejections, retried or not).
    pub failures: u64,
}

/// Percentiles of the load generator's schedule lag (µs).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct LagStats {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl LagStats {
    fn of(h: &Histogram<u64>) -> Self {
        let us = |ns: u64| ns as f64 / 1e3;
        if h.is_empty() {
            return Self::default();
        }
        Self {
            p50: us(h.value_at_quantile(0.5)),
            p99: us(h.value_at_quantile(0.99)),
            p999: us(h.value_at_quantile(0.999)),
            max: us(h.max()),
        }
    }
}

impl ClientCounters {
    /// generated = every way a request can end, exactly.
    pub fn conserved(&self) -> bool {
        self.generated
            == self.completed
                + self.aqm_dropped
                + self.rejected
                + self.lock_dropped
                + self.start_dropped
                + self.seda_rejected
                + self.client_timeouts
                + self.client_overflows
                + self.timed_out
                + self.in_flight_end
                + self.queued_end
    }
}

/// Client-side time series; each row covers the interval ending at `t_ms` (counts) or is taken
/// at `t_ms` (in_system, client_queued). `t_ms` counts from the start of the schedule.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ClientSeries {
    pub unix_ns: Vec<u64>,
    /// The simulator's columns; the client fills t_ms, arrivals, completions, drops,
    /// throughput_rps, offered_rps, in_system and client_queued (the server the others).
    #[serde(flatten)]
    pub cols: microsched_core::timeseries::TimeSeries,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LoadgenResult {
    pub summary: Summary,
    pub client: ClientCounters,
    pub timeseries: ClientSeries,
    /// (latency µs, cumulative fraction) over the measured window.
    pub latency_cdf: (Vec<f64>, Vec<f64>),
    /// The measured window in wall-clock ns since the Unix epoch.
    pub window_unix_ns: (u64, u64),
    pub addr: String,
    /// One row per request (`metrics.record_requests`), in generation order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub records: Option<crate::records::Records>,
}

struct Pending {
    /// Its sequence number (generation order).
    id: u64,
    session: u32,
    rtype: u16,
    service: Nanos,
    sched: Nanos,
    /// The replica of its current try, and its tries so far (1 on its first).
    replica: u16,
    tries: u8,
}

struct Gen {
    sock: UdpSocket,
    /// The replicas' addresses (one with one server).
    servers: Vec<SocketAddr>,
    /// Per replica, per session: the session's token there.
    tokens: Vec<Vec<u64>>,
    /// Per replica: Breakwater's clients of the sessions there (the simulator's one per node).
    clients: Vec<Clients<u64>>,
    /// `clients.retries`, `clients.retry_timeouts`.
    retries: u8,
    retry_timeouts: bool,
    pending: HashMap<u64, Pending>,
    /// (request, sent at) in send order, for in-flight timeouts.
    sent_order: VecDeque<(u64, Nanos)>,
    timers: BinaryHeap<Reverse<(Nanos, u16, u32)>>,
    /// SEDA (artifact): when each session's requests waiting for a token need attention.
    seda_timers: BinaryHeap<Reverse<(Nanos, u32)>>,
    out: Vec<Out<u64>>,
    /// Requests a client timeout sends to the next replica once `out` is carried out.
    pending_resends: Vec<Pending>,
    c: ClientCounters,
    rec: LatencyRecorder,
    lag_sum: f64,
    /// Arrival processing lag (ns, up to 60 s), 3 significant digits.
    schedule_lag: Histogram<u64>,
    // Window counters (for the summary) and interval counters (for the series).
    w_aqm: u64,
    /// Failure replies over the window, and their delay from the request's scheduled send (ns).
    w_lock: u64,
    /// Worker-start drops over the window.
    w_start: u64,
    failure_reply: Histogram<u64>,
    failure_reply_sum: u128,
    /// SEDA's per-session rate limiters (`policy.overload.kind = "seda"`): the simulator's object.
    seda: Option<Seda>,
    w_timeouts: u64,
    w_overflows: u64,
    iv: [u64; 3],
    /// Per-request records (`metrics.record_requests`).
    records: Option<crate::records::Records>,
    /// The measured window [warm-up end, end of sending), ns since the start: a request's end
    /// (completion, drop) counts in the window's statistics if it happens inside it, as in the
    /// simulator, whenever the request was sent.
    window: (Nanos, Nanos),
}

impl Gen {
    fn in_window(&self, now: Nanos) -> bool {
        now >= self.window.0 && now < self.window.1
    }

    fn send(&mut self, m: &Msg, replica: u16) {
        self.c.datagrams_out += 1;
        if self.sock.send_to(&encode(m), self.servers[replica as usize]).is_err() {
            self.c.send_errors += 1;
        }
    }

    /// The replica a session talks to first: the simulator's choice (`home_node` of its
    /// application, the first one's sessions numbered from 0).
    fn home(&self, session: u32, choice: ReplicaChoice) -> u16 {
        let n = self.servers.len() as u64;
        match choice {
            _ if n == 1 => 0,
            ReplicaChoice::Primary => 0,
            ReplicaChoice::Hash => (hash(session as u64 ^ 0x005e_ed0f_4e91_1ca5) % n) as u16,
        }
    }

    /// Whether a failed request may try again elsewhere (the simulator's rule).
    fn may_retry(&self, p: &Pending) -> bool {
        p.tries <= self.retries && self.servers.len() > 1
    }

    /// Sends a failed request again, to the next replica: a fresh try of the same request.
    fn resend(&mut self, mut p: Pending, now: Nanos) {
        if p.tries == 1 {
            self.c.retried_requests += 1;
        }
        self.c.retries += 1;
        self.c.measured_retries += self.in_window(now) as u64;
        p.replica = (p.replica + 1) % self.servers.len() as u16;
        p.tries += 1;
        let (id, session, replica) = (p.id, p.session, p.replica);
        self.pending.insert(id, p);
        self.clients[replica as usize].submit(session, id, now, &mut self.out);
        self.flush(now, replica);
    }

    /// Carries out the decisions of replica `replica`'s clients.
    fn flush(&mut self, now: Nanos, replica: u16) {
        let mut out = std::mem::take(&mut self.out);
        for o in out.drain(..) {
            match o {
                Out::Send { req, demand } => {
                    let Some(p) = self.pending.get(&req) else {
                        continue;
                    };
                    let m = Msg::Request {
                        token: self.tokens[replica as usize][p.session as usize],
                        req_id: req,
                        demand,
                        service_ns: p.service,
                        rtype: p.rtype,
                    };
                    let lag = now.saturating_sub(p.sched) as f64 / 1e3;
                    self.lag_sum += lag;
                    self.c.send_lag_us_max = self.c.send_lag_us_max.max(lag);
                    self.c.sent += 1;
                    self.c.replicas[replica as usize].sent += 1;
                    self.sent_order.push_back((req, now));
                    self.send(&m, replica);
                }
                Out::Drop { req, why } => {
                    if let Some(p) = self.pending.remove(&req) {
                        let measured = self.in_window(now);
                        match why {
                            ClientDrop::Timeout if self.retry_timeouts && self.may_retry(&p) => {
                                // No credit in time: to the next replica (`clients.retry_timeouts`).
                                // Its decisions wait in `pending_resends`: `out` is being drained.
                                self.pending_resends.push(p);
                            }
                            ClientDrop::Timeout => {
                                self.c.client_timeouts += 1;
                                self.w_timeouts += measured as u64;
                                self.ended_dropped(&p, Outcome::ClientTimeout, now);
                            }
                            ClientDrop::Overflow => {
                                self.c.client_overflows += 1;
                                self.w_overflows += measured as u64;
                                self.ended_dropped(&p, Outcome::ClientOverflow, now);
                            }
                        }
                    }
                }
                Out::CreditRequest { session, demand } => {
                    self.c.credit_requests += 1;
                    let token = self.tokens[replica as usize][session as usize];
                    self.send(&Msg::CreditRequest { token, demand }, replica);
                }
                Out::Timer { session, at } => self.timers.push(Reverse((at, replica, session))),
            }
        }
        self.out = out;
        for p in std::mem::take(&mut self.pending_resends) {
            self.resend(p, now);
        }
    }

    /// Keeps `p`'s row, if records are kept.
    fn record(&mut self, p: &Pending, outcome: Outcome, latency_ns: Nanos, server_queue_ns: Nanos, server_service_ns: Nanos) {
        // Created in the measured window: the rows a replay's window statistics compare with.
        let measured = self.in_window(p.sched);
        if let Some(r) = &mut self.records {
            r.push(crate::records::Row {
                id: p.id,
                created_ns: p.sched,
                session: p.session,
                rtype: p.rtype,
                service_ns: p.service,
                replica: p.replica,
                tries: p.tries,
                outcome,
                latency_ns,
                server_queue_ns,
                server_service_ns,
                measured,
            });
        }
    }

    fn ended_dropped(&mut self, p: &Pending, why: Outcome, now: Nanos) {
        self.record(p, why, 0, 0, 0);
        self.iv[2] += 1;
        if self.in_window(now) {
            self.rec.dropped(p.rtype as usize);
        }
    }

    fn on_datagram(&mut self, bytes: &[u8], from: SocketAddr, now: Nanos) {
        self.c.datagrams_in += 1;
        let Some(replica) = self.servers.iter().position(|&a| a == from).map(|i| i as u16) else {
            self.c.bad_datagrams += 1;
            return;
        };
        match decode(bytes) {
            Ok(Msg::Response {
                req_id,
                credits,
                status,
                qdelay_ns,
                service_ns: server_service_ns,
            }) => {
                let Some(p) = self.pending.remove(&req_id) else {
                    self.c.late_responses += 1;
                    return;
                };
                if p.replica != replica {
                    // A late answer of an earlier try, from the replica it left.
                    self.pending.insert(req_id, p);
                    self.c.late_responses += 1;
                    return;
                }
                let measured = self.in_window(now);
                let r = &mut self.c.replicas[replica as usize];
                if status == Status::Ok {
                    r.completed += 1;
                } else {
                    r.failures += 1;
                }
                let f = &mut self.c.failure_replies;
                match status {
                    Status::Ok => {}
                    Status::Dropped => f.aqm_dropped += 1,
                    Status::Rejected => f.rejected += 1,
                    Status::LockDropped => f.lock_dropped += 1,
                    Status::StartDropped => f.start_dropped += 1,
                }
                if status != Status::Ok && self.may_retry(&p) {
                    if status == Status::LockDropped && measured {
                        // Every failure reply of the window, retried ones included (the simulator's).
                        let d = now.saturating_sub(p.sched).max(1);
                        self.failure_reply.saturating_record(d);
                        self.failure_reply_sum += u128::from(d);
                    }
                    let session = p.session;
                    self.clients[replica as usize].on_credits(session, credits, true, now, &mut self.out);
                    self.flush(now, replica);
                    self.resend(p, now);
                    return;
                }
                match status {
                    Status::Ok => {
                        if let Some(s) = &mut self.seda {
                            s.observe(p.session, req_id, p.sched, now);
                        }
                        self.c.completed += 1;
                        self.iv[1] += 1;
                        self.record(&p, Outcome::Ok, now.saturating_sub(p.sched).max(1), qdelay_ns, server_service_ns);
                        if measured {
                            self.rec.completed(
                                p.rtype as usize,
                                now.saturating_sub(p.sched).max(1),
                                qdelay_ns,
                                p.service,
                            );
                        }
                    }
                    Status::Dropped => {
                        self.c.aqm_dropped += 1;
                        self.w_aqm += measured as u64;
                        self.ended_dropped(&p, Outcome::AqmDropped, now);
                    }
                    Status::Rejected => {
                        self.c.rejected += 1;
                        self.ended_dropped(&p, Outcome::Rejected, now);
                    }
                    Status::LockDropped => {
                        self.c.lock_dropped += 1;
                        if measured {
                            let d = now.saturating_sub(p.sched).max(1);
                            self.w_lock += 1;
                            self.failure_reply.saturating_record(d);
                            self.failure_reply_sum += u128::from(d);
                        }
                        self.ended_dropped(&p, Outcome::LockDropped, now);
                    }
                    Status::StartDropped => {
                        self.c.start_dropped += 1;
                        self.w_start += measured as u64;
                        self.ended_dropped(&p, Outcome::StartDropped, now);
                    }
                }
                self.clients[replica as usize].on_credits(p.session, credits, true, now, &mut self.out);
                self.flush(now, replica);
            }
            Ok(Msg::Credit { cookie, credits }) if (cookie as usize) < self.tokens[replica as usize].len() => {
                self.c.credit_messages += 1;
                self.clients[replica as usize].on_credits(cookie, credits, false, now, &mut self.out);
                self.flush(now, replica);
            }
            _ => self.c.bad_datagrams += 1,
        }
    }
}

/// Waits until `fd` is readable or `ns` have passed; false if the time ran out.
fn wait_readable(fd: i32, ns: Nanos) -> bool {
    let ts = libc::timespec {
        tv_sec: (ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (ns % 1_000_000_000) as libc::c_long,
    };
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd, a valid timespec, no signal mask.
    unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) != 0 }
}

/// Connects every session: `Connect` for each, resent every 100 ms to those unanswered, for up
/// to 3 s.
fn connect_all(
    sock: &UdpSocket,
    server: SocketAddr,
    n: u32,
    c: &mut ClientCounters,
) -> Result<Vec<(u64, u32)>, ConfigError> {
    let mut got: Vec<Option<(u64, u32)>> = vec![None; n as usize];
    let start = Instant::now();
    let mut buf = [0u8; 2048];
    let mut left = n;
    let mut last_send: Option<Instant> = None;
    // Sessions the server answered `Full` (and has not connected since).
    let mut full = vec![false; n as usize];
    let secret = crate::auth::Secret::from_env()?;
    while left > 0 {
        if start.elapsed() > Duration::from_secs(3) {
            let refused = full.iter().zip(&got).filter(|(f, g)| **f && g.is_none()).count();
            if refused > 0 {
                return Err(ConfigError(format!(
                    "--addr: the microsched server at {server} is full: it has no free session slot for {refused} of {n} \
                     sessions (still full after 3 s). Its slots are held by other clients (a client gets at most its fair \
                     share of the slots, clients.sessions / clients, from those holding more; idle sessions expire \
                     after the server's runtime.session_idle_ms of silence), or its clients.sessions is below {n}"
                )));
            }
            return Err(ConfigError(format!(
                "--addr: no answer from a microsched server at {server} ({left} of {n} sessions unanswered after 3 s): \
                 is `microsched serve` running there, with clients.sessions >= {n}? (A server started with a \
                 shared secret answers only clients with the same {})", crate::auth::ENV
            )));
        }
        if last_send.is_none_or(|t| t.elapsed() > Duration::from_millis(100)) {
            for (i, g) in got.iter().enumerate() {
                if g.is_none() {
                    c.datagrams_out += 1;
                    let cookie = i as u32;
                    let msg = match &secret {
                        Some(s) => {
                            let stamp_ms = crate::auth::unix_ms();
                            Msg::AuthConnect { cookie, demand: 0, stamp_ms, mac: s.mac(cookie, 0, stamp_ms) }
                        }
                        None => Msg::Connect { cookie, demand: 0 },
                    };
                    let _ = sock.send_to(&encode(&msg), server);
                }
            }
            last_send = Some(Instant::now());
        }
        wait_readable(sock.as_raw_fd(), 10_000_000);
        while let Ok((len, from)) = sock.recv_from(&mut buf) {
            c.datagrams_in += 1;
            match decode(&buf[..len]) {
                Ok(Msg::ConnectAck {
                    cookie,
                    token,
                    credits,
                }) if from == server && cookie < n => {
                    if got[cookie as usize].is_none() {
                        got[cookie as usize] = Some((token, credits));
                        left -= 1;
                    }
                }
                Ok(Msg::Full { cookie }) if from == server && cookie < n => full[cookie as usize] = true,
                _ => c.bad_datagrams += 1,
            }
        }
    }
    Ok(got.into_iter().map(|g| g.expect("all connected")).collect())
}

/// Runs the scenario's load against the server at `opts.addr`. `interrupted` is polled every
/// few milliseconds; when it returns true the run ends early (results so far are returned).
pub fn run(
    loaded: &Loaded,
    opts: &LoadgenOpts,
    interrupted: &dyn Fn() -> bool,
) -> Result<LoadgenResult, ConfigError> {
    let sc = &loaded.scenario;
    let base = &loaded.base_dir;
    check_scenario(sc)?;
    let servers: Vec<SocketAddr> = std::iter::once(opts.addr).chain(opts.more_addrs.iter().copied()).collect();
    for &a in &servers {
        check_loopback(a, opts.allow_remote, "--addr")?;
    }
    if servers.len() != sc.server.replicas as usize {
        return Err(ConfigError(format!(
            "--addr: {} server address(es) given but server.replicas = {}: give one --addr per replica",
            servers.len(),
            sc.server.replicas
        )));
    }
    if let Some(a) = servers.iter().enumerate().find_map(|(i, a)| servers[..i].contains(a).then_some(a)) {
        return Err(ConfigError(format!("--addr: {a} is given twice: each replica is a server of its own")));
    }
    if servers.iter().any(|a| a.is_ipv4() != opts.addr.is_ipv4()) {
        return Err(ConfigError("--addr: mix of IPv4 and IPv6 addresses: the replicas must share one address family".into()));
    }
    let seed = opts.seed.unwrap_or(sc.seed);

    // Workload and arrivals, built by the same code as the simulator's.
    let mut workload = RequestMix::new(sc, base, seed)?;
    for (i, sampler) in workload.samplers().iter().enumerate() {
        if sampler.mean_us() * 1e3 > MAX_SERVICE_NS as f64 {
            return Err(ConfigError(format!(
                "workload.types[{i}].service: a mean of {} µs is not allowed for the real runtime: at most {} µs",
                sampler.mean_us(),
                MAX_SERVICE_NS / 1000
            )));
        }
    }
    let steps = load_steps(sc, base)?;
    for (i, &(_, r)) in steps.iter().enumerate() {
        if r > MAX_RPS {
            let field = if i == 0 {
                "load".to_string()
            } else {
                format!("load.schedule[{}]", i - 1)
            };
            return Err(ConfigError(format!(
                "{field}: an offered load of {r:.0} requests/s is not allowed for the real load generator: at most {MAX_RPS:.0}"
            )));
        }
    }
    let mut arrivals = Arrivals::from_steps(&steps, seed);
    let mut session_rng = stream(seed, "sessions");
    let n = sc.clients.sessions;
    let names: Vec<String> = sc.workload.types.iter().map(|t| t.name.clone()).collect();
    let slo_us = sc.slo_us(base)?;
    // SEDA limits each session at its client; like "none" it sends without credits.
    let credit_based = !matches!(
        sc.policy.overload,
        microsched_core::scenario::OverloadCfg::None | microsched_core::scenario::OverloadCfg::Seda(_)
    );

    let bind: SocketAddr = if opts.addr.is_ipv4() {
        "127.0.0.1:0"
    } else {
        "[::1]:0"
    }
    .parse()
    .expect("literal");
    let bind = if opts.allow_remote && !opts.addr.ip().is_loopback() {
        if opts.addr.is_ipv4() {
            "0.0.0.0:0".parse().expect("literal")
        } else {
            "[::]:0".parse().expect("literal")
        }
    } else {
        bind
    };
    let sock = UdpSocket::bind(bind)
        .map_err(|e| ConfigError(format!("cannot bind the load generator's socket: {e}")))?;
    crate::server::set_socket_buffers(&sock, 8 << 20);
    sock.set_nonblocking(true)
        .map_err(|e| ConfigError(e.to_string()))?;
    tight_timer_slack();
    // Without it the loop waits out a spinning worker's scheduler slice (up to milliseconds)
    // whenever both CPUs are busy, and that wait is latency of the requests it should send.
    let realtime_guard = if sc.runtime.realtime {
        realtime_priority()
    } else {
        None
    };

    let mut counters = ClientCounters {
        realtime: realtime_guard.is_some(),
        ..ClientCounters::default()
    };
    // Every session connects to every replica: a retry may take it anywhere.
    let mut tokens = Vec::with_capacity(servers.len());
    let mut clients = Vec::with_capacity(servers.len());
    for &server in &servers {
        let conn = connect_all(&sock, server, n, &mut counters)?;
        let mut cl = Clients::new(
            n,
            sc.clients.queue_capacity,
            us(sc.clients.timeout_us),
            credit_based,
            Some(CREDIT_RETRY_NS),
        )
        .with_first_request_only(sc.clients.first_request_only);
        for (i, &(_, credits)) in conn.iter().enumerate() {
            cl.set_granted(i as u32, credits);
        }
        tokens.push(conn.iter().map(|&(t, _)| t).collect());
        clients.push(cl);
    }
    counters.replicas = servers.iter().map(|a| ReplicaCounters { addr: a.to_string(), ..Default::default() }).collect();
    let replica_choice = sc.clients.replica_choice;
    let mut g = Gen {
        sock,
        servers: servers.clone(),
        tokens,
        clients,
        retries: sc.clients.retries.min(u8::MAX as u32 - 1) as u8,
        retry_timeouts: sc.clients.retry_timeouts,
        pending: HashMap::with_capacity(1 << 16),
        sent_order: VecDeque::with_capacity(1 << 16),
        timers: BinaryHeap::new(),
        seda_timers: BinaryHeap::new(),
        out: Vec::new(),
        pending_resends: Vec::new(),
        c: counters,
        rec: LatencyRecorder::new(&names, us(slo_us)),
        lag_sum: 0.0,
        schedule_lag: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds"),
        w_aqm: 0,
        w_lock: 0,
        w_start: 0,
        failure_reply: Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds"),
        failure_reply_sum: 0,
        seda: match &sc.policy.overload {
            microsched_core::scenario::OverloadCfg::Seda(c) => {
                let share = steps.first().map_or(0.0, |s| s.1) / n.max(1) as f64;
                Some(Seda::new(c, vec![share; n as usize], sc.seed))
            }
            _ => None,
        },
        w_timeouts: 0,
        w_overflows: 0,
        iv: [0; 3],
        records: sc.metrics.record_requests.then(crate::records::Records::new),
        window: (0, 0),
    };

    let warmup = ms(sc.warmup_ms);
    let end_send = warmup + ms(sc.duration_ms);
    g.window = (warmup, end_send);
    let drain = ms(sc.runtime.drain_ms);
    let req_timeout = ms(sc.runtime.request_timeout_ms);
    let sample_every = us(sc.metrics.sample_interval_us.max(1000.0));
    let clock = Clock::new();
    let wall = Instant::now();
    let mut series = ClientSeries::default();
    let (mut next_sample, mut last_sample) = (sample_every, 0);
    let (mut queued_sum, mut samples) = (0.0, 0u64);
    let mut next_arrival = arrivals.next();
    let mut seq: u64 = 0;
    let mut buf = [0u8; 2048];
    let mut last_check = 0;
    let fd = g.sock.as_raw_fd();
    let mut stopped_early = false;
    let (cpu_start, sleeps_start) = (thread_cpu_ns(), thread_sleeps());
    // The last wake-up (thread CPU at the start of its sleep, whether a datagram ended it) and
    // the CPU per wake-up by cause: [timer, datagram].
    let mut awake: Option<(u64, bool)> = None;
    let mut wakeup_cpu = [crate::clock::WakeupCpuMeter::default(); 2];
    loop {
        // 1. Everything the server sent, each datagram stamped as it is read: one stamp taken
        // before the loop would date the datagrams that arrived while it drained the socket (or
        // while this thread was descheduled) before they arrived, and latencies came out shorter
        // than the server's own queueing + service time for them (seen on a loaded 2-CPU VM).
        while let Ok((len, from)) = g.sock.recv_from(&mut buf) {
            g.on_datagram(&buf[..len], from, clock.now());
        }
        let now = clock.now();
        // 2. Arrivals due.
        while let Some(t) = next_arrival.filter(|&t| t <= now && t < end_send) {
            let session = session_rng.gen_range(0..n);
            let (rtype, service) = workload.draw();
            let service = service.min(MAX_SERVICE_NS);
            let measured = t >= warmup;
            g.c.generated += 1;
            g.schedule_lag.saturating_record(now - t);
            g.iv[0] += 1;
            if measured {
                g.rec.generated(rtype as usize);
            }
            g.pending.insert(
                seq,
                Pending {
                    id: seq,
                    session,
                    rtype,
                    service,
                    sched: t,
                    replica: g.home(session, replica_choice),
                    tries: 1,
                },
            );
            let admit = g.seda.as_mut().map_or(Admit::Send, |s| s.admit(session, seq, t));
            if admit == Admit::Drop {
                // No token (and, artifact, no room to wait): rejected at the client, as the
                // simulator does.
                let p = g.pending.remove(&seq).expect("just inserted");
                g.c.seda_rejected += 1;
                g.ended_dropped(&p, Outcome::SedaRejected, now);
            } else if admit == Admit::Wait {
                if let Some(at) = g.seda.as_mut().and_then(|s| s.next_release(session)) {
                    g.seda_timers.push(Reverse((at, session)));
                }
            } else {
                // The client's clock starts when the client sees the request: the load
                // generator's own lag behind its schedule (milliseconds when the VM's timers
                // overshoot) is not time spent waiting for a credit, so it must not expire
                // requests at the client. Latency still counts from the schedule (`sched`).
                let home = g.home(session, replica_choice);
                g.clients[home as usize].submit(session, seq, now, &mut g.out);
                g.flush(now, home);
            }
            seq += 1;
            next_arrival = arrivals.next();
        }
        if next_arrival.is_some_and(|t| t >= end_send) {
            next_arrival = None;
        }
        // 3. Client timers.
        while let Some(&Reverse((at, replica, session))) = g.timers.peek() {
            if at > now {
                break;
            }
            g.timers.pop();
            g.clients[replica as usize].on_timer(session, now, &mut g.out);
            g.flush(now, replica);
        }
        // 3b. SEDA's waiting requests: sent when a token arrives, dropped after the client wait.
        while let Some(&Reverse((at, session))) = g.seda_timers.peek() {
            if at > now {
                break;
            }
            g.seda_timers.pop();
            let (mut sent, mut dropped) = (Vec::new(), Vec::new());
            let s = g.seda.as_mut().expect("SEDA timers need SEDA");
            s.release(session, now, &mut sent, &mut dropped);
            if let Some(at) = s.next_release(session) {
                g.seda_timers.push(Reverse((at, session)));
            }
            for r in dropped {
                if let Some(p) = g.pending.remove(&r) {
                    g.c.seda_rejected += 1;
                    g.ended_dropped(&p, Outcome::SedaRejected, now);
                }
            }
            let home = g.home(session, replica_choice);
            for r in sent {
                g.clients[home as usize].submit(session, r, now, &mut g.out);
            }
            g.flush(now, home);
        }
        // 4. Requests in flight too long.
        while let Some(&(req, at)) = g.sent_order.front() {
            if now.saturating_sub(at) < req_timeout {
                break;
            }
            g.sent_order.pop_front();
            if let Some(p) = g.pending.remove(&req) {
                g.c.timed_out += 1;
                g.clients[p.replica as usize].forget(p.session);
                g.ended_dropped(&p, Outcome::TimedOut, now);
            }
        }
        // 5. Time series.
        if now >= next_sample {
            let dt = now.saturating_sub(last_sample).max(1) as f64;
            series.unix_ns.push(clock.start_unix_ns() + now);
            series.cols.t_ms.push(now as f64 / 1e6);
            series.cols.arrivals.push(g.iv[0] as f64);
            series.cols.completions.push(g.iv[1] as f64);
            series.cols.drops.push(g.iv[2] as f64);
            series.cols.throughput_rps.push(g.iv[1] as f64 / dt * 1e9);
            series.cols.offered_rps.push(if now < end_send {
                arrivals.rate_at(now as f64)
            } else {
                0.0
            });
            series.cols.in_system.push(g.pending.len() as f64);
            let client_queued: u64 = g.clients.iter().map(|c| c.queued).sum();
            series.cols.client_queued.push(client_queued as f64);
            if now >= warmup && now <= end_send {
                queued_sum += client_queued as f64;
                samples += 1;
            }
            g.iv = [0; 3];
            last_sample = now;
            next_sample += sample_every;
            if next_sample <= now {
                next_sample = now + sample_every;
            }
        }
        // 6. The end: all sent and answered, or the drain period is over.
        if now >= end_send && (g.pending.is_empty() || now >= end_send + drain) {
            break;
        }
        if now.saturating_sub(last_check) > 5_000_000 {
            last_check = now;
            if interrupted() {
                stopped_early = true;
                break;
            }
        }
        // 7. Wait for the next event.
        let mut next = next_sample.min(end_send.max(now + 1_000_000));
        if let Some(t) = next_arrival {
            next = next.min(t);
        }
        if let Some(&Reverse((at, _, _))) = g.timers.peek() {
            next = next.min(at);
        }
        if let Some(&Reverse((at, _))) = g.seda_timers.peek() {
            next = next.min(at);
        }
        if let Some(&(_, at)) = g.sent_order.front() {
            next = next.min(at + req_timeout);
        }
        let now2 = clock.now();
        if next > now2 {
            // A wait that slept and ended readable was ended by the server's datagram (two
            // getrusage calls, well under 1 µs against the tens of µs a sleep costs here).
            let (cpu_now, before) = (thread_cpu_ns(), thread_sleeps());
            let readable = wait_readable(fd, next - now2);
            if thread_sleeps() != before {
                if let Some((start, by_datagram)) = awake.replace((cpu_now, readable)) {
                    wakeup_cpu[by_datagram as usize].add(cpu_now.saturating_sub(start));
                }
                g.c.wakeups_by_datagram += readable as u64;
            }
        }
    }
    let end = clock.now();
    // Whatever is left is in flight or queued at the end.
    let queued: Vec<u64> = g.clients.iter_mut().flat_map(|c| c.take_queued()).collect();
    g.c.queued_end = queued.len() as u64;
    for r in queued {
        if let Some(p) = g.pending.remove(&r) {
            g.ended_dropped(&p, Outcome::QueuedEnd, end);
        }
    }
    g.c.in_flight_end = g.pending.len() as u64;
    let left: Vec<u64> = g.pending.keys().copied().collect();
    for r in left {
        if let Some(p) = g.pending.remove(&r) {
            g.ended_dropped(&p, Outcome::InFlightEnd, end);
        }
    }
    if let Ok(local) = g.sock.local_addr() {
        g.c.kernel_drops = crate::netstat::udp_drops(local).unwrap_or(0);
    }
    for (replica, tokens) in g.tokens.clone().iter().enumerate() {
        for &t in tokens {
            g.send(&Msg::Disconnect { token: t }, replica as u16);
        }
    }
    g.c.schedule_lag_us = LagStats::of(&g.schedule_lag);
    g.c.cpu_ms = thread_cpu_ns().saturating_sub(cpu_start) as f64 / 1e6;
    g.c.timer_wakeup_cpu = wakeup_cpu[0].get();
    g.c.datagram_wakeup_cpu = wakeup_cpu[1].get();
    g.c.wakeups = thread_sleeps().saturating_sub(sleeps_start).max(g.c.wakeups_by_datagram);
    g.c.loop_ms = wall.elapsed().as_secs_f64() * 1e3;
    g.c.send_lag_us_mean = if g.c.sent > 0 {
        g.lag_sum / g.c.sent as f64
    } else {
        0.0
    };

    let window_end = if stopped_early {
        end.min(end_send)
    } else {
        end_send
    };
    let window_ns = window_end.saturating_sub(warmup).max(1);
    let window_s = window_ns as f64 / 1e9;
    let wall_s = wall.elapsed().as_secs_f64();
    let c = &g.c;
    let (allocator, overload) = policy_names(sc);
    let summary = Summary {
        scenario: sc.name.clone(),
        seed,
        allocator,
        overload,
        slo_us,
        requests: Requests {
            generated: c.generated,
            completed: c.completed,
            dropped: c.aqm_dropped
                + c.rejected
                + c.lock_dropped
                + c.start_dropped
                + c.seda_rejected
                + c.client_timeouts
                + c.client_overflows
                + c.timed_out,
            in_flight: c.in_flight_end + c.queued_end,
        },
        credits: credit_based.then(|| Credits {
            client_queued_mean: if samples > 0 {
                queued_sum / samples as f64
            } else {
                0.0
            },
            aqm_drops: g.w_aqm,
            client_drops: g.w_timeouts + g.w_overflows,
            client_timeouts: g.w_timeouts,
            client_overflows: g.w_overflows,
            credit_requests: c.credit_requests,
            credit_messages: c.credit_messages,
            start_drops: crate::startdrop::budget(sc).map(|_| g.w_start),
            ..Credits::default()
        }),
        sim: SimStats {
            events: c.datagrams_in + c.datagrams_out,
            wall_s,
            requests_per_wall_s: if wall_s > 0.0 {
                c.generated as f64 / wall_s
            } else {
                0.0
            },
            interrupted_at_ms: None,
        },
        // The per-lock statistics are the server's (`merge` adds them).
        lock_control: sc.server.lock_control.as_ref().map(|_| microsched_core::summary::LockDrops {
            drops: g.w_lock,
            failure_reply_us: microsched_core::metrics::us_percentiles(&g.failure_reply, g.failure_reply_sum, g.w_lock),
            locks: Vec::new(),
        }),
        ..g.rec.summary(window_s)
    };
    let start_unix = clock.start_unix_ns();
    Ok(LoadgenResult {
        summary,
        client: g.c.clone(),
        timeseries: series,
        latency_cdf: g.rec.latency_cdf(),
        window_unix_ns: (start_unix + warmup, start_unix + window_end),
        addr: opts.addr.to_string(),
        records: g.records.take().map(|mut r| {
            r.sort();
            r
        }),
    })
}

/// The names the policies of `sc` report (the server runs them; the summary names them).
fn policy_names(sc: &microsched_core::scenario::Scenario) -> (String, String) {
    let max_cores = sc.server.max_cores;
    // The names only: a policy that cannot be built here (a Python one without the front) is
    // named by its kind, as the scenario writes it.
    let allocator = microsched_core::alloc::build(&sc.policy.allocator, &microsched_core::env::AllocEnv::unseeded(max_cores))
        .map_or_else(|_| "python".to_string(), |a| a.name().to_string());
    let env = microsched_core::env::OverloadEnv { sessions: 1, max_cores, rtt_ns: 1, seed: sc.seed };
    let overload = match microsched_core::overload::build(&sc.policy.overload, &env) {
        Ok(c) => c.map_or("none", |c| c.name()).to_string(),
        Err(_) => "python".to_string(),
    };
    (allocator, overload)
}
