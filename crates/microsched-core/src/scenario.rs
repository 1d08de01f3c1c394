//! The scenario schema: the one place that says what a scenario may contain.
//!
//! Scenarios are data: a TOML file, or the same structure as a Python dict. Durations are written
//! in human units (`_us`, `_ms`, `_ns` suffixes, fractional allowed) and converted to integer
//! nanoseconds by the drivers. Unknown fields are rejected everywhere, and every error names the
//! dotted path of the field at fault.

use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::ScenarioError;

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
    pub server: Server,
    #[serde(default)]
    pub network: Network,
    #[serde(default)]
    pub clients: Clients,
    pub load: Load,
    pub workload: Workload,
    #[serde(default)]
    pub policy: Policy,
    #[serde(default)]
    pub metrics: MetricsCfg,
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
    /// CPU time to receive and dispatch one request packet, charged before its service time.
    #[serde(default)]
    pub packet_cost_ns: f64,
    /// Time of one fruitless work-search pass (own queue, steal attempts) of an idle core; park
    /// rules that count passes (Shenango: 4) wait at least this many times it.
    #[serde(default = "default_search_pass_ns")]
    pub search_pass_ns: f64,
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
}

impl Default for Clients {
    fn default() -> Self {
        Self {
            sessions: default_sessions(),
            queue_capacity: default_client_queue(),
            timeout_us: default_client_timeout_us(),
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
    #[serde(default)]
    pub fraction: Option<f64>,
    #[serde(default)]
    pub rps: Option<f64>,
    #[serde(default)]
    pub schedule: Vec<LoadStep>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadStep {
    pub at_ms: f64,
    #[serde(default)]
    pub fraction: Option<f64>,
    #[serde(default)]
    pub rps: Option<f64>,
}

// ---------------------------------------------------------------------------------------------
// Workload

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Workload {
    pub types: Vec<RequestType>,
    /// Mutexes that request programs take (see [`crate::program`]).
    #[serde(default)]
    pub locks: Vec<crate::program::LockCfg>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RequestType {
    pub name: String,
    /// Relative weight in the mix (normalised over all types).
    #[serde(default = "default_ratio")]
    pub ratio: f64,
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
    Constant {
        value_us: f64,
    },
    Exponential {
        mean_us: f64,
    },
    /// Two point masses; their probabilities must sum to 1.
    Bimodal {
        modes: Vec<Mode>,
    },
    /// Log-normal with the given mean and sigma of the underlying normal.
    Lognormal {
        mean_us: f64,
        sigma: f64,
    },
    /// Samples (µs) read from a CSV file, path relative to the scenario file. The first column,
    /// or `column` by header name; a header row is detected and skipped.
    Empirical {
        csv: String,
        #[serde(default)]
        column: Option<String>,
    },
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Mode {
    pub value_us: f64,
    pub prob: f64,
}

// ---------------------------------------------------------------------------------------------
// Policies
//
// Each policy's file owns its configuration (parameters, defaults, validation, construction);
// adding a policy adds one line to `AllocatorCfg` or `OverloadCfg` here.

use crate::alloc::{caladan, coresync, delay_range, shenango, static_alloc, utilization_range};
use crate::overload::breakwater;

pub use crate::overload::breakwater::{AlphaMode, PoolTrigger};
/// Breakwater's parameters ([`breakwater::Config`]), under the name they had here.
pub use crate::overload::breakwater::Config as BreakwaterCfg;

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    pub allocator: AllocatorCfg,
    #[serde(default)]
    pub overload: OverloadCfg,
}

/// Core allocation policy. Defaults follow the CoreSync evaluation (§IV-A).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum AllocatorCfg {
    // One line per policy; each variant's schema (fields, defaults, description) is its Config's.
    Static(static_alloc::Config),
    Shenango(shenango::Config),
    Caladan(caladan::Config),
    UtilizationRange(utilization_range::Config),
    DelayRange(delay_range::Config),
    #[serde(rename = "coresync")]
    CoreSync(coresync::Config),
}

impl Default for AllocatorCfg {
    fn default() -> Self {
        AllocatorCfg::Static(static_alloc::Config::default())
    }
}

/// Overload (admission) control.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum OverloadCfg {
    // One line per controller, as for AllocatorCfg; "none" has no parameters and no object.
    /// Everything is admitted; clients send as soon as a request is created.
    #[default]
    None,
    Breakwater(breakwater::Config),
}

// ---------------------------------------------------------------------------------------------
// Real runtime

/// The `[runtime]` table: settings of the real runtime only (the worker count is
/// `server.max_cores`, the poll period before a worker parks is the allocator's `poll_us`).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RuntimeCfg {
    /// UDP port of `microsched serve` and `loadgen` when `--addr` is not given (0: any free port).
    #[serde(default = "default_rt_port")]
    pub port: u16,
    /// Best-effort co-tenant threads at the lowest priority (SCHED_IDLE), counting square roots:
    /// their throughput shows the CPU that parked workers give back. 0: none.
    #[serde(default)]
    pub be_threads: u32,
    /// Target period of the server's controller thread, which ticks the core allocator and the
    /// credit controller and samples the congestion signal (the kernel's sleep granularity may
    /// make the real period longer; the server reports it).
    #[serde(default = "default_rt_tick_us")]
    pub tick_us: f64,
    /// After its last scheduled send, how long the load generator waits for outstanding responses.
    #[serde(default = "default_rt_drain_ms")]
    pub drain_ms: f64,
    /// A request sent without a response after this long counts as timed out at the client.
    #[serde(default = "default_rt_request_timeout_ms")]
    pub request_timeout_ms: f64,
    /// Idle workers call `sched_yield` between work-search passes. Off by default: a spinning
    /// core should burn its CPU as in Caladan; on, spinning workers hand idle time to other
    /// threads (the receive thread, a co-located load generator, but also the best-effort
    /// co-tenant, which then gets CPU from cores that are nominally allocated).
    #[serde(default)]
    pub yield_when_idle: bool,
    /// The server's controller thread and the load generator's thread run under `SCHED_FIFO`
    /// (priority 10) so that they get a CPU as soon as they wake: the controller stands for
    /// Caladan's IOKernel, which has a core of its own, and the load generator for the papers'
    /// client machines. Both sleep between events, so they take only what they use. Off, or
    /// without the privilege (the reports say which), they queue behind spinning workers for
    /// whole scheduler slices. Workers always run under the default scheduler.
    #[serde(default = "default_true")]
    pub realtime: bool,
}

impl Default for RuntimeCfg {
    fn default() -> Self {
        Self {
            port: default_rt_port(),
            be_threads: 0,
            tick_us: default_rt_tick_us(),
            drain_ms: default_rt_drain_ms(),
            request_timeout_ms: default_rt_request_timeout_ms(),
            yield_when_idle: false,
            realtime: true,
        }
    }
}

fn default_rt_port() -> u16 {
    7878
}
fn default_rt_tick_us() -> f64 {
    10.0
}
fn default_rt_drain_ms() -> f64 {
    500.0
}
fn default_rt_request_timeout_ms() -> f64 {
    1000.0
}

impl RuntimeCfg {
    fn validate(&self) -> Result<(), ScenarioError> {
        positive("runtime.tick_us", self.tick_us)?;
        if self.tick_us > 1e6 {
            return Err(ScenarioError::new(
                "runtime.tick_us",
                format!("{} is not allowed: use at most 1000000 (1 s)", self.tick_us),
            ));
        }
        if self.be_threads > 256 {
            return Err(ScenarioError::new(
                "runtime.be_threads",
                format!("{} is not allowed: use 0..=256", self.be_threads),
            ));
        }
        non_negative("runtime.drain_ms", self.drain_ms)?;
        positive("runtime.request_timeout_ms", self.request_timeout_ms)
    }
}

// ---------------------------------------------------------------------------------------------
// Metrics

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MetricsCfg {
    /// Interval of the time series.
    #[serde(default = "default_sample_us")]
    pub sample_interval_us: f64,
    /// Keep one record per request (id, session, type, times) in the result.
    #[serde(default)]
    pub record_requests: bool,
}

impl Default for MetricsCfg {
    fn default() -> Self {
        Self {
            sample_interval_us: default_sample_us(),
            record_requests: false,
        }
    }
}

fn default_sample_us() -> f64 {
    100.0
}

// ---------------------------------------------------------------------------------------------
// Loading, overrides, validation

/// How a scenario's text is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Toml,
    Json,
}

/// A validated scenario plus the directory its relative paths are resolved against.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub scenario: Scenario,
    pub base_dir: PathBuf,
}

impl Scenario {
    /// Parses `text`, applies `--set`-style overrides (`dotted.key=value`, the value parsed as a
    /// TOML literal, else taken as a string), deserialises and validates.
    pub fn load(
        text: &str,
        format: Format,
        base_dir: &Path,
        overrides: &[String],
    ) -> Result<Loaded, ScenarioError> {
        let mut tree: serde_json::Value = match format {
            Format::Toml => {
                let v: toml::Value = toml::from_str(text).map_err(|e| {
                    ScenarioError::new("scenario", format!("invalid TOML: {}", e.message()))
                })?;
                serde_json::to_value(v)
                    .map_err(|e| ScenarioError::new("scenario", e.to_string()))?
            }
            Format::Json => serde_json::from_str(text)
                .map_err(|e| ScenarioError::new("scenario", format!("invalid JSON: {e}")))?,
        };
        for o in overrides {
            apply_override(&mut tree, o)?;
        }
        let scenario: Scenario = serde_path_to_error::deserialize(&tree).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." || path.is_empty() {
                "scenario".to_string()
            } else {
                path
            };
            ScenarioError::new(field, e.into_inner().to_string())
        })?;
        // serde ignores extra keys in a field-less tagged variant (`kind = "static"`); comparing
        // the input with what was understood catches those, and any other quirk, generically.
        let understood = serde_json::to_value(&scenario).expect("scenario serialises");
        reject_unread_keys(&tree, &understood, "")?;
        scenario.validate(base_dir)?;
        Ok(Loaded {
            scenario,
            base_dir: base_dir.to_path_buf(),
        })
    }

    /// Mean service time over the mix, in µs.
    pub fn mean_service_us(&self, base_dir: &Path) -> Result<f64, ScenarioError> {
        let total: f64 = self.workload.types.iter().map(|t| t.ratio).sum();
        let mut mean = 0.0;
        for (i, t) in self.workload.types.iter().enumerate() {
            let field = format!("workload.types[{i}].service");
            mean += t.ratio / total
                * crate::dist::Sampler::build(&t.service, base_dir, &field)?.mean_us();
        }
        Ok(mean)
    }

    /// Requests per second that load 1.0 stands for: max_cores / mean service time.
    pub fn capacity_rps(&self, base_dir: &Path) -> Result<f64, ScenarioError> {
        Ok(self.server.max_cores as f64 / (self.mean_service_us(base_dir)? * 1e-6))
    }

    /// The goodput SLO in µs (explicit, or 10 × (mean service + RTT)).
    pub fn slo_us(&self, base_dir: &Path) -> Result<f64, ScenarioError> {
        match self.slo_us {
            Some(v) => Ok(v),
            None => Ok(10.0 * (self.mean_service_us(base_dir)? + self.network.rtt_us)),
        }
    }

    fn validate(&self, base_dir: &Path) -> Result<(), ScenarioError> {
        positive("duration_ms", self.duration_ms)?;
        non_negative("warmup_ms", self.warmup_ms)?;
        if let Some(v) = self.slo_us {
            positive("slo_us", v)?;
        }
        let s = &self.server;
        if s.max_cores == 0 || s.max_cores > 1024 {
            return Err(ScenarioError::new(
                "server.max_cores",
                format!("{} is not allowed: use 1..=1024", s.max_cores),
            ));
        }
        non_negative("server.steal_cost_ns", s.steal_cost_ns)?;
        non_negative("server.allocation_delay_us", s.allocation_delay_us)?;
        non_negative("server.packet_cost_ns", s.packet_cost_ns)?;
        positive("server.search_pass_ns", s.search_pass_ns)?;
        non_negative("network.rtt_us", self.network.rtt_us)?;
        non_negative("network.jitter_us", self.network.jitter_us)?;
        let c = &self.clients;
        if c.sessions == 0 {
            return Err(ScenarioError::new("clients.sessions", "must be at least 1"));
        }
        if c.queue_capacity == 0 {
            return Err(ScenarioError::new(
                "clients.queue_capacity",
                "must be at least 1",
            ));
        }
        positive("clients.timeout_us", c.timeout_us)?;
        self.validate_load()?;
        if self.workload.types.is_empty() {
            return Err(ScenarioError::new(
                "workload.types",
                "needs at least one request type",
            ));
        }
        if self.workload.types.len() > u16::MAX as usize {
            return Err(ScenarioError::new(
                "workload.types",
                "at most 65535 request types",
            ));
        }
        for (i, t) in self.workload.types.iter().enumerate() {
            positive(&format!("workload.types[{i}].ratio"), t.ratio)?;
            crate::dist::Sampler::build(
                &t.service,
                base_dir,
                &format!("workload.types[{i}].service"),
            )?;
        }
        crate::program::validate(&self.workload, base_dir)?;
        crate::sched::validate(self)?;
        positive(
            "metrics.sample_interval_us",
            self.metrics.sample_interval_us,
        )?;
        crate::alloc::validate(&self.policy.allocator, "policy.allocator")?;
        crate::overload::validate(&self.policy.overload, "policy.overload")?;
        self.runtime.validate()?;
        Ok(())
    }

    fn validate_load(&self) -> Result<(), ScenarioError> {
        one_rate("load", self.load.fraction, self.load.rps)?;
        let mut last = -1.0;
        for (i, step) in self.load.schedule.iter().enumerate() {
            let f = format!("load.schedule[{i}]");
            non_negative(&format!("{f}.at_ms"), step.at_ms)?;
            if step.at_ms <= last {
                return Err(ScenarioError::new(
                    format!("{f}.at_ms"),
                    "steps must be in strictly increasing time order",
                ));
            }
            last = step.at_ms;
            one_rate(&f, step.fraction, step.rps)?;
        }
        Ok(())
    }
}

fn one_rate(field: &str, fraction: Option<f64>, rps: Option<f64>) -> Result<(), ScenarioError> {
    match (fraction, rps) {
        (Some(f), None) => non_negative(&format!("{field}.fraction"), f),
        (None, Some(r)) => non_negative(&format!("{field}.rps"), r),
        _ => Err(ScenarioError::new(
            field,
            "give exactly one of `fraction` (of capacity) and `rps`",
        )),
    }
}

pub(crate) fn positive(field: &str, v: f64) -> Result<(), ScenarioError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(ScenarioError::new(
            field,
            format!("{v} is not allowed: must be a finite number > 0"),
        ))
    }
}

pub(crate) fn non_negative(field: &str, v: f64) -> Result<(), ScenarioError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(ScenarioError::new(
            field,
            format!("{v} is not allowed: must be a finite number >= 0"),
        ))
    }
}

/// Errors on the first key of `input` that `understood` (the deserialised scenario, serialised
/// back) does not have.
fn reject_unread_keys(
    input: &serde_json::Value,
    understood: &serde_json::Value,
    path: &str,
) -> Result<(), ScenarioError> {
    use serde_json::Value;
    let at = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match (input, understood) {
        (Value::Object(i), Value::Object(u)) => {
            for (k, v) in i {
                match u.get(k) {
                    Some(uv) => reject_unread_keys(v, uv, &at(k))?,
                    None => {
                        let allowed: Vec<&str> = u.keys().map(String::as_str).collect();
                        return Err(ScenarioError::new(
                            at(k),
                            format!(
                                "unknown field `{k}`, expected one of `{}`",
                                allowed.join("`, `")
                            ),
                        ));
                    }
                }
            }
            Ok(())
        }
        (Value::Array(i), Value::Array(u)) => {
            for (n, (iv, uv)) in i.iter().zip(u).enumerate() {
                reject_unread_keys(iv, uv, &format!("{path}[{n}]"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Applies one `dotted.key=value` override to the value tree, creating tables as needed.
fn apply_override(tree: &mut serde_json::Value, spec: &str) -> Result<(), ScenarioError> {
    let (key, raw) = spec.split_once('=').ok_or_else(|| {
        ScenarioError::new(
            "--set",
            format!("`{spec}` is not of the form dotted.key=value"),
        )
    })?;
    let key = key.trim();
    if key.is_empty() || key.split('.').any(|p| p.is_empty()) {
        return Err(ScenarioError::new(
            "--set",
            format!("`{key}` is not a dotted key"),
        ));
    }
    let raw = raw.trim();
    let value: serde_json::Value = match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) => serde_json::to_value(t.remove("v").expect("parsed key"))
            .map_err(|e| ScenarioError::new(key, e.to_string()))?,
        Err(_) => serde_json::Value::String(raw.to_string()),
    };
    let mut node = tree;
    let parts: Vec<&str> = key.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        // A list (`[[workload.types]]`, `load.schedule`) is indexed by position:
        // `workload.types.0.service.mean_us=50`.
        if node.is_array() {
            let list = node.as_array_mut().expect("checked: a list");
            let len = list.len();
            let at = parts[..i].join(".");
            let n: usize = part.parse().map_err(|_| {
                ScenarioError::new(
                    &at,
                    format!("is a list: index it by position (0..{len}), e.g. `{at}.0`, not `{part}`"),
                )
            })?;
            let slot = list.get_mut(n).ok_or_else(|| {
                ScenarioError::new(&at, format!("has {len} entries: index {n} is out of range (0..{len})"))
            })?;
            if last {
                *slot = value;
                return Ok(());
            }
            node = slot;
            continue;
        }
        let obj = node.as_object_mut().ok_or_else(|| {
            ScenarioError::new(parts[..i].join("."), "is not a table, cannot set a key inside it")
        })?;
        if last {
            // Switching a policy's kind drops the old kind's parameters: `--set
            // policy.allocator.kind=caladan` on a Shenango scenario means Caladan with its
            // defaults (plus any later overrides), not Caladan with Shenango's leftover keys.
            // The same for a service distribution's `dist`.
            if (*part == "kind" || *part == "dist") && obj.get(*part).is_some_and(|old| *old != value) {
                obj.clear();
            }
            obj.insert(part.to_string(), value);
            return Ok(());
        }
        node = obj.entry(part.to_string()).or_insert_with(|| serde_json::Value::Object(Default::default()));
    }
    unreachable!("a dotted key has at least one part")
}

/// The JSON Schema of a scenario.
pub fn json_schema() -> String {
    serde_json::to_string_pretty(&schemars::schema_for!(Scenario)).expect("schema serialises")
}
