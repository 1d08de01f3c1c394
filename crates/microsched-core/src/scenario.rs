//! The scenario schema: the one place that says what a scenario may contain.
//!
//! Scenarios are data: a TOML file, or the same structure as a Python dict. Durations are written
//! in human units (`_us`, `_ms`, `_ns` suffixes, fractional allowed) and converted to integer
//! nanoseconds by the drivers. Unknown fields are rejected everywhere, and every error names the
//! dotted path of the field at fault.
//!
//! This file holds the scenario's tables; the rest is split by concern: `policy` (the `[policy]`
//! table: one line per allocator or overload controller, each policy's file owning its
//! parameters), `runtime` and `metrics` (their tables), `load` (text → value tree → `--set`
//! overrides → serde → unread-key check, and the JSON Schema) and `validate`. Everything is
//! re-exported here: `scenario::{Scenario, Loaded, Format, AllocatorCfg, ...}`.

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::ScenarioError;

mod limits;
mod load;
mod metrics;
mod policy;
mod runtime;
mod validate;

pub use limits::{human_bytes, human_time, sample_interval_ns, Estimate, MAX_EVENTS, MAX_MEMORY_BYTES, MAX_NS, MAX_SAMPLES};
pub use load::{json_schema, Format, Loaded, NON_FINITE_KEY};
pub use metrics::MetricsCfg;
pub use policy::{AllocatorCfg, AlphaMode, BreakwaterCfg, OverloadCfg, Policy, PoolTrigger, SchedCfg};
pub use runtime::{HandlerKind, RuntimeCfg};
pub(crate) use validate::{non_negative, positive, validate_clients, validate_load, validate_workload};

// ---------------------------------------------------------------------------------------------
// Top level

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Free-form name, copied into results.
    #[serde(default)]
    pub name: String,
    /// Seed of every random stream of the run (overridden by `--seed`).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// Length of the measured window, after the warm-up.
    pub duration_ms: f64,
    /// Simulated time before the measured window; excluded from every statistic.
    #[serde(default)]
    pub warmup_ms: f64,
    /// Latency objective for goodput. Default: 10 × (mean service time + RTT), as in Breakwater's
    /// evaluation.
    #[serde(default)]
    pub slo_us: Option<f64>,
    /// The server: its cores, queues, work stealing, preemption and the costs the model charges.
    pub server: Server,
    /// The network between the clients and the server.
    #[serde(default)]
    pub network: Network,
    /// The open-loop clients: sessions, their credit queues, timeouts and retries.
    #[serde(default)]
    pub clients: Clients,
    pub load: Load,
    /// The request mix: request types, their service times and handler paths, and the locks.
    pub workload: Workload,
    /// The policies: the core allocator, the overload controller and the queueing policy.
    #[serde(default)]
    pub policy: Policy,
    /// What a run records besides its summary: the sampled time series and per-request records.
    #[serde(default)]
    pub metrics: MetricsCfg,
    /// Co-tenant applications after the first (whose workload, load, clients and SLO are the
    /// top-level keys); see [`crate::topology`].
    #[serde(default)]
    pub applications: Vec<crate::topology::ApplicationCfg>,
    /// Settings of the real runtime (`microsched serve`, `loadgen`, `real`); the simulator
    /// ignores them.
    #[serde(default)]
    pub runtime: RuntimeCfg,
}

fn default_seed() -> u64 {
    1
}

// ---------------------------------------------------------------------------------------------
// Server

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum QueueMode {
    /// One central FIFO queue served by every allocated core (c-FCFS).
    Central,
    /// One queue per core, sessions hashed to cores as RSS does, optional work stealing.
    PerCore,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Server {
    /// Cores the latency-critical application may use.
    pub max_cores: u32,
    #[serde(default = "default_queue")]
    pub queue: QueueMode,
    /// Idle cores steal half of a victim's queue (per_core mode only).
    #[serde(default = "default_true")]
    pub steal: bool,
    /// Time an idle core spends on one successful steal before the stolen work can run.
    #[serde(default = "default_steal_cost_ns")]
    pub steal_cost_ns: f64,
    /// Time from the decision to grant a core until the core can run work.
    #[serde(default = "default_alloc_delay_us")]
    pub allocation_delay_us: f64,
    /// The core wake-up latency as a distribution (see [`crate::wake`]); absent: every grant
    /// takes `allocation_delay_us`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wake_latency: Option<crate::wake::WakeLatency>,
    /// CPU time to receive and dispatch one request packet, charged before its service time
    /// (an RX cost, added to `stack`'s).
    #[serde(default)]
    pub packet_cost_ns: f64,
    /// The network stack's cost per request: RX, RPC layer, TX, as a named profile with its
    /// source and/or explicit fields (see [`crate::stack`]); absent: free.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stack: Option<crate::stack::Stack>,
    /// Time of one fruitless work-search pass (own queue, steal attempts) of an idle core; park
    /// rules that count passes (Shenango: 4) wait at least this many times it.
    #[serde(default = "default_search_pass_ns")]
    pub search_pass_ns: f64,
    /// How an idle core searches the queues for work: `auto` (default: `probe` for per-core
    /// queues with stealing, else `instant`), `instant` or `probe` (sweeps probe by probe, each
    /// probe costing time; see [`crate::sched::search`]).
    #[serde(default)]
    pub search: crate::sched::search::SearchCfg,
    /// Which per-core queue an arriving request joins: `rss` (default: its session hashed to a
    /// home core, an active one if the home is parked) or `random` (a random active core per
    /// request, as the simulation study's and McClure's simulators do; per_core mode only).
    #[serde(default)]
    pub steering: Steering,
    /// How fresh the congestion signal (max over cores of the oldest queued request's age) is
    /// when an overload controller reads it: `sampled` (default) measures it every core-allocator
    /// interval (every 10 µs, Caladan's IOKernel poll, with a static allocation) and the
    /// controller reads that cached, stale value; `exact` measures it at each decision.
    #[serde(default)]
    pub delay_signal: DelaySignal,
    /// Time slicing: a quantum after which a running request is preempted, and the costs of the
    /// preemption mechanism (see [`crate::sched::preemption`]). Default: run to completion.
    #[serde(default)]
    pub preemption: crate::sched::preemption::PreemptionCfg,
    /// A dispatcher core taken out of the workers (see [`crate::sched::dispatcher`]); absent:
    /// requests go straight from the network to the queueing policy.
    #[serde(default)]
    pub dispatcher: Option<crate::sched::dispatcher::DispatcherCfg>,
    /// Drops at lock steps (Protego's ASQM, or try_lock; see [`crate::sched::asqm`]); absent:
    /// lock steps block until the mutex is handed over.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lock_control: Option<crate::sched::asqm::Config>,
    /// Identical server nodes (replicas), each with its own cores, queues, locks and policies.
    #[serde(default = "default_replicas")]
    pub replicas: u32,
    /// Per-application core sets: each application gets a node of its own (`max_cores` cores,
    /// its own queues and core allocator, `applications[i].allocator` or else
    /// `policy.allocator`), as HarvestContainers' Primaries each own a cpuset; their harvests
    /// add up in the flat keys. Needs `replicas = 1`. See [`crate::topology`].
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub per_application_cores: bool,
    /// NIC interrupt load on the cores and where it is steered (see [`crate::sched::irq`]);
    /// absent: no interrupts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub irq: Option<crate::sched::irq::Config>,
}

fn default_replicas() -> u32 {
    1
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Steering {
    /// The session's home core (RSS), steered to an active core while the home is parked.
    #[default]
    Rss,
    /// A random active core for every request.
    Random,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum DelaySignal {
    /// Measured periodically (allocator interval, or 10 µs), as stale as in Caladan.
    #[default]
    Sampled,
    /// Measured at each controller decision.
    Exact,
}

fn default_queue() -> QueueMode {
    QueueMode::PerCore
}
fn default_true() -> bool {
    true
}
fn default_steal_cost_ns() -> f64 {
    100.0
}
fn default_alloc_delay_us() -> f64 {
    5.0
}
fn default_search_pass_ns() -> f64 {
    250.0
}

// ---------------------------------------------------------------------------------------------
// Network and clients

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Network {
    /// Round-trip time; each one-way trip takes RTT/2.
    #[serde(default = "default_rtt_us")]
    pub rtt_us: f64,
    /// Each one-way trip gets an extra delay drawn uniformly from [0, jitter_us].
    #[serde(default)]
    pub jitter_us: f64,
}

impl Default for Network {
    fn default() -> Self {
        Self {
            rtt_us: default_rtt_us(),
            jitter_us: 0.0,
        }
    }
}

fn default_rtt_us() -> f64 {
    10.0
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Clients {
    /// Client sessions; the open-loop arrivals are spread uniformly over them.
    #[serde(default = "default_sessions")]
    pub sessions: u32,
    /// Requests a session may hold while waiting for credits; a full queue drops its oldest
    /// entry (Breakwater's CRPC_QLEN). Used only with a credit-based overload controller.
    #[serde(default = "default_client_queue")]
    pub queue_capacity: u32,
    /// A request that waited longer than this for a credit is dropped at the client
    /// (Breakwater's CBW_MAX_CLIENT_DELAY_US). Used only with a credit-based controller.
    #[serde(default = "default_client_timeout_us")]
    pub timeout_us: f64,
    /// With replicas: which one a session talks to.
    #[serde(default)]
    pub replica_choice: crate::topology::ReplicaChoice,
    /// A request answered with a failure (an AQM drop) is sent again to the next replica, up
    /// to this many times; the failure counts only when it is the last.
    #[serde(default)]
    pub retries: u32,
    /// A request that timed out waiting for a credit (clients.timeout_us) is retried too, with
    /// its locally generated failure (Protego's Fig. 8 clients); default: it is dropped.
    #[serde(default)]
    pub retry_timeouts: bool,
    /// Only a session's very first request asks the server for credit explicitly (the CoreSync
    /// artifact's Breakwater client); default: also the first request of each later drain
    /// episode. A drained session then waits for the server's wake-up.
    #[serde(default)]
    pub first_request_only: bool,
    /// How a session uses the credits it holds: `off` (default: each request leaves when it is
    /// generated, as the artifacts' open-loop Poisson clients) or `credits` (each of a session's
    /// arrivals is a burst that uses every credit it holds free at once; see [`ClientBurst`]).
    /// Needs a credit-based overload controller; simulator only.
    #[serde(default)]
    pub burst: ClientBurst,
}

/// `clients.burst`: whether a session's requests come as bursts of its free credits.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ClientBurst {
    /// Each request leaves its client when it is generated (credit permitting): the open-loop
    /// Poisson clients of the CoreSync and Breakwater artifacts.
    #[default]
    Off,
    /// Each arrival of a session is a burst of as many requests as the session holds free
    /// credits (granted − outstanding; at least one, at most `clients.queue_capacity`, the
    /// Breakwater client's CRPC_QLEN, which bounds one `writev` of its drain), all sent at once
    /// and reaching the server together. The application's next arrivals are consumed by the
    /// burst (a burst of k stands for k consecutive arrivals), so the offered rate is unchanged.
    /// The clients of CoreSync's §II argument ("all clients send a large burst simultaneously,
    /// fully utilizing the overcommitted credits"), not of its artifact.
    Credits,
}

impl Default for Clients {
    fn default() -> Self {
        Self {
            sessions: default_sessions(),
            queue_capacity: default_client_queue(),
            timeout_us: default_client_timeout_us(),
            replica_choice: Default::default(),
            retries: 0,
            retry_timeouts: false,
            first_request_only: false,
            burst: ClientBurst::Off,
        }
    }
}

fn default_sessions() -> u32 {
    100
}
fn default_client_queue() -> u32 {
    16
}
fn default_client_timeout_us() -> f64 {
    10.0
}

// ---------------------------------------------------------------------------------------------
// Load

/// Offered load: exactly one of `fraction` (of capacity: 1.0 = max_cores / mean service time)
/// and `rps`. `schedule` changes it over time (piecewise constant, times from the start of the
/// simulation, warm-up included).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Load {
    /// Offered load as a fraction of capacity (1.0 = max_cores / mean service time).
    #[serde(default)]
    pub fraction: Option<f64>,
    /// Offered load in requests per second.
    #[serde(default)]
    pub rps: Option<f64>,
    /// Changes of the offered load over time, each from its `at_ms` on.
    #[serde(default)]
    pub schedule: Vec<LoadStep>,
    /// Bursty arrivals: the rate in force (`fraction`/`rps` and the schedule) alternates
    /// between an ON and an OFF level with the same mean.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_off: Option<OnOff>,
}

/// An on/off modulation of the offered load (a Markov-modulated arrival pattern made periodic):
/// each `period_ms`, the first `duty` of the period runs at `1 / (duty + (1 - duty) * off_ratio)`
/// times the rate in force and the rest at `off_ratio` times that, so the mean is unchanged. It
/// stops at `until_ms` (the plain rate holds after).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct OnOff {
    /// Length of one ON and OFF cycle.
    pub period_ms: f64,
    /// Fraction of each period that is ON, in (0, 1].
    pub duty: f64,
    /// OFF rate / ON rate, in [0, 1].
    #[serde(default)]
    pub off_ratio: f64,
    /// End of the modulation (ms from the start, warm-up included).
    #[serde(default = "default_on_off_until_ms")]
    pub until_ms: f64,
}

fn default_on_off_until_ms() -> f64 {
    10_000.0
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadStep {
    /// When the step takes effect (ms from the start of the simulation, warm-up included).
    pub at_ms: f64,
    /// The load from `at_ms` on, as a fraction of capacity (exactly one of `fraction` and `rps`).
    #[serde(default)]
    pub fraction: Option<f64>,
    /// The load from `at_ms` on, in requests per second.
    #[serde(default)]
    pub rps: Option<f64>,
}

// ---------------------------------------------------------------------------------------------
// Workload

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    /// The request types of the mix (at least one).
    pub types: Vec<RequestType>,
    /// Mutexes that request programs take (see [`crate::program`]).
    #[serde(default)]
    pub locks: Vec<crate::program::LockCfg>,
    /// Condition variables that request programs wait on and signal (`wait`/`signal` steps),
    /// each guarded by one of `locks`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub condvars: Vec<crate::program::CondvarCfg>,
    /// Offer exactly the requests of a recorded run instead of drawing them: a CSV file with
    /// columns `created_ns,session,type,service_ns` (one row per request, creation times from
    /// the start of the schedule, in order; `microsched real --record` writes one next to its
    /// Parquet record, and the Python front converts a `.parquet` record). The types still
    /// name the classes (`type` indexes them); the load table only labels the series.
    /// Simulator only ([`crate::replay`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestType {
    /// The type's name, as per-type statistics report it.
    pub name: String,
    /// Relative weight in the mix (normalised over all types).
    #[serde(default = "default_ratio")]
    pub ratio: f64,
    /// The type's service time (CPU time a request needs, µs).
    pub service: Dist,
    /// The handler's paths (compute, critical sections, yield points), one drawn per request;
    /// none: the request computes its service time (see [`crate::program`]).
    #[serde(default)]
    pub paths: Vec<crate::program::PathCfg>,
}

fn default_ratio() -> f64 {
    1.0
}

/// A service-time distribution.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "dist", rename_all = "snake_case", deny_unknown_fields)]
pub enum Dist {
    /// Every request takes `value_us`.
    Constant {
        /// The service time.
        value_us: f64,
    },
    /// Exponentially distributed.
    Exponential {
        /// The mean.
        mean_us: f64,
    },
    /// Two point masses; their probabilities must sum to 1.
    Bimodal {
        /// The two modes, each a service time and its probability.
        modes: Vec<Mode>,
    },
    /// Log-normal with the given mean and sigma of the underlying normal.
    Lognormal {
        /// The distribution's mean (not the underlying normal's).
        mean_us: f64,
        /// σ of the underlying normal.
        sigma: f64,
    },
    /// Samples (µs) read from a CSV file, path relative to the scenario file. The first column,
    /// or `column` by header name; a header row is detected and skipped.
    Empirical {
        /// Path of the CSV file, relative to the scenario file.
        csv: String,
        /// Header name of the column to read; default: the first column.
        #[serde(default)]
        column: Option<String>,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Mode {
    /// The service time of this mode.
    pub value_us: f64,
    /// Its probability.
    pub prob: f64,
}

// ---------------------------------------------------------------------------------------------
// Derived quantities

impl Scenario {
    /// Mean service time over the mix, in µs.
    pub fn mean_service_us(&self, base_dir: &Path) -> Result<f64, ScenarioError> {
        self.app_mean_service_us(&self.apps()[0], base_dir)
    }

    /// Requests per second that load 1.0 stands for: worker cores (max_cores, less a
    /// dispatcher's) / mean work per request.
    pub fn capacity_rps(&self, base_dir: &Path) -> Result<f64, ScenarioError> {
        self.app_capacity_rps(&self.apps()[0], base_dir)
    }

    /// The goodput SLO in µs (explicit, or 10 × (mean service + RTT)).
    pub fn slo_us(&self, base_dir: &Path) -> Result<f64, ScenarioError> {
        self.app_slo_us(&self.apps()[0], base_dir)
    }
}
