//! What the server counts and reports: per-reason rejection counters (every datagram that is not
//! served is counted under exactly one reason), request counters, core time, the best-effort
//! co-tenant's work, and a time series sampled by the controller thread.

use std::sync::atomic::{AtomicU64, Ordering};

use microsched_core::timeseries::TimeSeries;
use serde::{Deserialize, Serialize};

macro_rules! counters {
    ($(#[$m:meta])* $name:ident { $($(#[$fm:meta])* $f:ident),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Default)]
        pub struct $name { $($(#[$fm])* pub $f: AtomicU64,)* }
        impl $name {
            pub fn snapshot(&self) -> serde_json::Map<String, serde_json::Value> {
                let mut m = serde_json::Map::new();
                $(m.insert(stringify!($f).to_string(), self.$f.load(Ordering::Relaxed).into());)*
                m
            }
        }
    };
}

counters!(
    /// Server counters, bumped with relaxed atomics on the hot path.
    Counters {
        /// Datagrams received.
        datagrams,
        /// Malformed datagrams, by decoder reason.
        short, bad_magic, bad_version, unknown_kind, bad_length, bad_status,
        /// A token no live session has.
        unknown_token,
        /// A valid token from another address than its session's (spoofing).
        wrong_peer,
        /// A kind only the server sends (ConnectAck, Response, Credit).
        unexpected_kind,
        /// A connect when every session slot is taken (answered with `Full`).
        no_slot,
        /// Sessions disconnected by the server after `runtime.session_idle_ms` of silence.
        expired_sessions,
        /// With a shared secret: a plain Connect (no MAC), never answered.
        unauthenticated,
        /// With a shared secret: an AuthConnect whose MAC is wrong, or stale, or replayed.
        bad_mac,
        /// A request of an unknown type or with a service time above the server's cap.
        bad_request,
        /// Requests with a valid token that reached the server: admitted + aqm_dropped + rejected_no_credit.
        requests,
        admitted,
        aqm_dropped,
        rejected_no_credit,
        completed,
        connects,
        disconnects,
        credit_requests,
        credit_messages,
        send_errors,
        /// Requests run as coroutines (they have a program, or the handler asked for one).
        coroutines,
        /// Yield points reached (the request went back to its worker's run queue).
        yields,
        /// Requests that gave up their worker at a preempt flag (time-slice preemption).
        preemptions,
        /// Quantum deadlines the timer found expired; those at which the policy let the request
        /// run another quantum (Synergy's conditional preemption); and the timer's lateness
        /// after the deadlines, summed (ns).
        quantum_expiries,
        avoided_preemptions,
        preempt_late_ns,
        /// Mutex acquisitions (lock steps reached).
        lock_acquisitions,
        /// Mutex acquisitions that found the mutex taken (the request waited off its worker).
        mutex_waits,
        /// Time those waiters spent waiting, summed (ns).
        mutex_wait_ns,
        /// Starts postponed because every coroutine stack was in use.
        stack_waits,
        /// Lock steps refused by `server.lock_control` (ASQM or try_lock).
        lock_drops,
        /// Failure replies sent for requests dropped inside the application (wire `LockDropped`).
        lock_dropped,
        /// Failure replies of requests dropped at worker start (`latency_budget_us`, wire
        /// `StartDropped`).
        start_dropped,
        /// Locks taken by a request after its failure reply (cleanups, never dropped).
        lock_cleanups,
        /// Lock waits that ended with the waiter's accumulated delay past the ASQM budget.
        waits_over_budget,
        /// Condition-variable waits (the waiter released its mutex and left its worker), the
        /// waiters a notify made runnable again, and `wait_if_uncongested` refusals.
        condvar_waits,
        condvar_wakeups,
        condvar_drops,
    }
);

impl Counters {
    #[inline]
    pub fn bump(c: &AtomicU64) {
        c.fetch_add(1, Ordering::Relaxed);
    }
    pub fn get(c: &AtomicU64) -> u64 {
        c.load(Ordering::Relaxed)
    }
    /// Datagrams dropped as malformed or unauthorised (never trusted, never answered).
    pub fn rejected_total(&self) -> u64 {
        [
            &self.short,
            &self.bad_magic,
            &self.bad_version,
            &self.unknown_kind,
            &self.bad_length,
            &self.bad_status,
            &self.unknown_token,
            &self.wrong_peer,
            &self.unexpected_kind,
            &self.no_slot,
            &self.unauthenticated,
            &self.bad_mac,
            &self.bad_request,
        ]
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .sum()
    }
}

/// Server-side time series: one row per sample interval, values at the sample time or means
/// over the interval (cores). The simulator's columns are `cols` (the server fills t_ms, the core,
/// queue, allocator and credit columns; the client columns stay empty: the load generator has
/// them), flattened into the JSON; the rest only the real runtime has.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerSeries {
    /// Wall-clock time of each sample, ns since the Unix epoch (to align with the load generator).
    pub unix_ns: Vec<u64>,
    #[serde(flatten)]
    pub cols: TimeSeries,
    /// Granted cores not yet running (the real allocation delay), part of cores_allocated.
    pub cores_waking: Vec<f64>,
    pub be_ops_per_s: Vec<f64>,
    /// Cumulative core time per phase at the sample: busy, search, parked, waking (ns).
    pub core_ns: Vec<[u64; 4]>,
    /// Cumulative best-effort square roots at the sample.
    pub be_ops: Vec<u64>,
    /// Cumulative requests completed by the server at the sample.
    #[serde(default)]
    pub completed: Vec<u64>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct CoreReport {
    pub max: u32,
    pub allocated_mean: f64,
    pub busy_mean: f64,
    pub parked_mean: f64,
    pub waking_mean: f64,
    /// busy, search, parked, waking: ns over the whole run, summed over cores.
    pub busy_ns: u64,
    pub search_ns: u64,
    pub parked_ns: u64,
    pub waking_ns: u64,
    pub total_ns: u64,
    /// Core grants carried out, parks.
    pub grants: u64,
    pub parks: u64,
    /// Parks decided while some session held no credits (counted at the decision, under the
    /// RPC lock; CoreSync's rule (1) forbids them).
    #[serde(default)]
    pub parks_while_drained: u64,
    /// Requests run per worker.
    pub completed_per_worker: Vec<u64>,
    /// The measured core wake-up latency: grant to the worker running again, over all workers
    /// (`None` without any wake-up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_us: Option<WakeReport>,
}

/// The runtime's core wake-up latencies (µs), as `server.wake_latency` can take them.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct WakeReport {
    pub count: u64,
    pub mean: f64,
    pub p50: f64,
    pub p99: f64,
    pub max: f64,
}

impl WakeReport {
    pub fn from_histogram(h: &hdrhistogram::Histogram<u64>) -> Option<Self> {
        (!h.is_empty()).then(|| WakeReport {
            count: h.len(),
            mean: h.mean() / 1e3,
            p50: h.value_at_quantile(0.5) as f64 / 1e3,
            p99: h.value_at_quantile(0.99) as f64 / 1e3,
            max: h.max() as f64 / 1e3,
        })
    }
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct BeReport {
    pub threads: u32,
    /// Whether the threads run under SCHED_IDLE (else nice 19).
    pub sched_idle: bool,
    pub ops: u64,
    pub ops_per_s: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ControllerReport {
    pub target_tick_us: f64,
    pub ticks: u64,
    /// Mean real period between ticks.
    pub mean_tick_us: f64,
    pub alloc_ticks: u64,
    /// Whether the controller thread got `SCHED_FIFO` (`runtime.realtime`).
    #[serde(default)]
    pub realtime: bool,
}

/// What `microsched serve` prints at the end (JSON).
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct ServerReport {
    pub addr: String,
    pub scenario: String,
    pub allocator: String,
    pub overload: String,
    /// The queueing policy (`d-fcfs+steal`, `d-fcfs`, `c-fcfs`).
    #[serde(default)]
    pub queue_policy: String,
    pub workers: u32,
    pub start_unix_ns: u64,
    pub duration_s: f64,
    /// Why the server stopped: "duration", "clients_gone", "stopped".
    pub stop_reason: String,
    pub counters: serde_json::Map<String, serde_json::Value>,
    /// Malformed or unauthorised datagrams, all reasons together.
    pub rejected_total: u64,
    /// Admitted requests still queued when the server stopped (never answered).
    pub abandoned: u64,
    /// Datagrams the kernel dropped at the server's socket (receive buffer full): never seen.
    #[serde(default)]
    pub kernel_drops: u64,
    pub cores: CoreReport,
    pub be: BeReport,
    pub controller: ControllerReport,
    pub timeseries: ServerSeries,
    /// Per lock family (whole run), with `server.lock_control`.
    #[serde(default)]
    pub locks: Vec<microsched_core::summary::LockSummary>,
}

impl ServerReport {
    pub fn counter(&self, name: &str) -> u64 {
        self.counters
            .get(name)
            .and_then(|v| v.as_u64())
            .unwrap_or(0)
    }
}
