//! The `[runtime]` table: settings of the real runtime only.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{default_true, non_negative, positive};
use crate::error::ScenarioError;

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
    /// Worker `i` runs only on the `i`-th CPU the process may use, as Caladan's kthreads each
    /// own a core. Off by default: on a machine shared with other work a pinned worker cannot
    /// leave a CPU that another process keeps busy (with `scripts/test --busy`'s CPU hog one of
    /// two pinned workers runs at half speed). Unpinned, the kernel's balancer put both workers
    /// of experiments/real/overload-2x.toml on one CPU in 63 % of 1 ms samples (the workers'
    /// busy time counts it; throughput differs by about 1 %). With more workers than usable CPUs
    /// no worker is pinned (the server report's `pinned_workers` says which happened).
    #[serde(default)]
    pub pin_workers: bool,
    /// The server disconnects a session that has nothing at the server and has sent nothing for
    /// this long, so that vanished clients (or a flood of Connects) cannot hold every slot.
    #[serde(default = "default_rt_session_idle_ms")]
    pub session_idle_ms: f64,
    /// The application the server runs: `program` (the request programs of `workload.types`,
    /// computing and locking as the simulator models them) or `kv` (a small in-memory key-value
    /// store running the same programs for real: a `slab` lock and an `item` lock family, types
    /// `set*` / `get*`, as experiments/protego/memcached-*.toml).
    #[serde(default)]
    pub handler: HandlerKind,
}

/// `runtime.handler`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum HandlerKind {
    #[default]
    Program,
    Kv,
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
            pin_workers: false,
            session_idle_ms: default_rt_session_idle_ms(),
            handler: HandlerKind::Program,
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
fn default_rt_session_idle_ms() -> f64 {
    10_000.0
}
fn default_rt_request_timeout_ms() -> f64 {
    1000.0
}

impl RuntimeCfg {
    pub(super) fn validate(&self) -> Result<(), ScenarioError> {
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
        positive("runtime.session_idle_ms", self.session_idle_ms)?;
        positive("runtime.request_timeout_ms", self.request_timeout_ms)
    }
}
