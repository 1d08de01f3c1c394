//! Core allocation: which cores the latency-critical (LC) application holds.
//!
//! Mechanism lives in the drivers (the simulator's server, the runtime's workers); policy lives
//! here, one file per policy, each a pure state machine behind [`CoreAllocator`]. The driver
//!
//! 1. calls [`CoreAllocator::tick`] every [`CoreAllocator::interval`] with an [`AllocView`] of the
//!    cores (as stale as the driver's signals are: real systems sample them once per interval),
//!    and carries out the returned [`AllocAction`];
//! 2. when an active core has searched for work without success (its own queue, then stealing)
//!    for at least [`ParkRule::min_poll_ns`] and [`ParkRule::min_passes`] passes, asks
//!    [`CoreAllocator::on_park_attempt`] whether it may park, and parks it if so.

mod common;
pub mod harvest;

/// The registry: one line per policy, `file::Variant`. A line declares the policy's file
/// (`alloc/file.rs`, whose `Config` implements [`AllocatorConfig`]), its `kind` in scenarios (the
/// variant in snake_case, or as a `#[serde(rename)]` before it says) and its row in the scenario
/// schema. Adding a policy is its file and its line here; nothing else names it.
macro_rules! registry {
    ($( $(#[$attr:meta])* $file:ident :: $Variant:ident ),* $(,)?) => {
        $( pub mod $file; )*

        /// Core allocation policy. Defaults follow the CoreSync evaluation (§IV-A).
        #[derive(Debug, Clone, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
        #[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
        pub enum AllocatorCfg {
            $( $(#[$attr])* $Variant($file::Config), )*
            /// A core allocator written in Python (see the "write your own policy" docs page).
            Python(crate::plugin::PythonPolicy),
        }

        impl AllocatorCfg {
            /// The built-in policy's configuration; `None` for a Python one.
            fn registered(&self) -> Option<&dyn AllocatorConfig> {
                match self {
                    $( AllocatorCfg::$Variant(c) => Some(c), )*
                    AllocatorCfg::Python(_) => None,
                }
            }
        }
    };
}

registry! {
    static_alloc::Static,
    shenango::Shenango,
    caladan::Caladan,
    shenango_artifact::ShenangoArtifact,
    utilization_range::UtilizationRange,
    delay_range::DelayRange,
    #[serde(rename = "coresync")]
    coresync::CoreSync,
    harvest_acbf::HarvestAcbf,
    harvest_static::HarvestStatic,
    harvest_cfs::HarvestCfs,
    harvest_smart::HarvestSmart,
    queue_threshold::QueueThreshold,
}

impl Default for AllocatorCfg {
    fn default() -> Self {
        AllocatorCfg::Static(static_alloc::Config::default())
    }
}

/// A policy's `[policy.allocator]` table (its parameters, serde + JSON Schema, defaults and doc
/// comments that become the schema's descriptions): how it is checked and built.
pub trait AllocatorConfig {
    /// Checks the parameters; `field` is the table's dotted path, which errors name.
    fn validate(&self, field: &str) -> Result<(), ScenarioError>;
    /// The allocator; the configuration has passed [`AllocatorConfig::validate`].
    fn build(&self, env: &AllocEnv) -> Box<dyn CoreAllocator>;
}

pub use caladan::CaladanAllocator;
pub use coresync::{CoreSyncAllocator, RRule};
pub use delay_range::DelayRangeAllocator;
pub use shenango::ShenangoAllocator;
pub use static_alloc::StaticAllocator;
pub use utilization_range::UtilizationRangeAllocator;

use crate::env::AllocEnv;
use crate::error::ScenarioError;
use crate::overload::CreditLink;
use crate::time::Nanos;

pub type CoreId = u16;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoreState {
    /// Allocated to the LC application: running a request, or searching for work.
    Active,
    /// Given to the best-effort application.
    Parked,
    /// Granted, but not usable until the allocation delay has passed.
    Waking,
}

/// One core as the driver sees it at a tick. Counters are cumulative since the start of the run,
/// so that a policy can difference them over whatever window it wants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreObs {
    pub state: CoreState,
    /// Requests waiting in this core's queues (not the one it is running).
    pub queued: u32,
    /// Enqueue time of the oldest waiting request, if any (its queueing delay is `now` minus it).
    pub oldest_enqueued_at: Option<Nanos>,
    /// Cumulative requests put into / taken out of this core's queues (steals included), for
    /// Shenango's "still queued since the last check" test.
    pub enqueued_total: u64,
    pub dequeued_total: u64,
    /// Cumulative time spent running requests.
    pub busy_ns: Nanos,
    /// Cumulative time spent active without a request: polling and stealing.
    pub search_ns: Nanos,
}

impl CoreObs {
    /// A core in `state` with empty queues and zero counters, as at the start of a run.
    pub fn new(state: CoreState) -> Self {
        Self { state, queued: 0, oldest_enqueued_at: None, enqueued_total: 0, dequeued_total: 0, busy_ns: 0, search_ns: 0 }
    }
}

/// What a policy sees at a tick. A driver with many cores keeps these aggregates as its cores
/// change, so that a tick costs O(cores with queued work), not O(cores); [`SliceView`] computes
/// them from a slice of observations, for drivers with few cores and for tests.
pub trait AllocView {
    fn now(&self) -> Nanos;
    fn active(&self) -> usize;
    fn waking(&self) -> usize;
    fn parked(&self) -> usize;
    /// Σ over cores of the cumulative (`busy_ns`, `search_ns`) as of now.
    fn busy_search_totals(&self) -> (Nanos, Nanos);
    /// Calls `f` for every core with `queued > 0`, in no particular order.
    fn for_each_queued(&self, f: &mut dyn FnMut(CoreId, &CoreObs));
    /// Calls `f` for every active core, in no particular order.
    fn for_each_active(&self, f: &mut dyn FnMut(CoreId, &CoreObs));
    /// Core `core` as it was at the previous tick (before the first one: at the start of the
    /// run, zero counters), so that a policy can difference counters over the last interval.
    /// Only `state`, `enqueued_total`, `busy_ns` and `search_ns` are defined: a driver need not
    /// keep the rest.
    fn prev(&self, core: CoreId) -> CoreObs;

    /// Calls `f` for every active core with its load, in no particular order: what choosing a
    /// core to revoke reads of each. A driver with many cores computes it without building
    /// whole observations.
    fn for_each_active_load(&self, f: &mut dyn FnMut(CoreId, CoreLoad)) {
        let now = self.now();
        self.for_each_active(&mut |i, c| {
            // saturating: a driver that resets its counters must not make a window wrap around.
            let busy = c.busy_ns.saturating_sub(self.prev(i).busy_ns);
            f(i, CoreLoad { delay: common::core_delay(now, c), queued: c.queued, busy })
        });
    }

    /// Max over cores of the oldest waiting request's age: the delay signal of Caladan and
    /// Breakwater.
    fn max_delay(&self) -> Nanos {
        let now = self.now();
        let mut max = 0;
        self.for_each_queued(&mut |_, c| max = max.max(common::core_delay(now, c)));
        max
    }
    /// Whether a parked core holds queued work (it counts as congestion in every policy).
    fn parked_with_work(&self) -> bool {
        let mut any = false;
        self.for_each_queued(&mut |_, c| any |= c.state == CoreState::Parked);
        any
    }
    /// Whether a Grant can be carried out: the driver only grants parked cores, so the LC
    /// application never exceeds `max_cores`.
    fn any_parked(&self) -> bool {
        self.parked() > 0
    }
    /// Calls `f` for every active core that runs no request (idle, or searching for work): the
    /// harvesting controllers' monitor. A driver that cannot tell reports none, and those
    /// controllers then never lend a core.
    fn for_each_idle(&self, _f: &mut dyn FnMut(CoreId)) {}
}

/// An active core's load, as [`AllocView::for_each_active_load`] reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CoreLoad {
    /// Queueing delay of its oldest waiting request (0 with empty queues).
    pub delay: Nanos,
    pub queued: u32,
    /// Busy time since the previous tick.
    pub busy: Nanos,
}

/// An [`AllocView`] over every core's observation, scanned at each call.
#[derive(Debug, Clone, Copy)]
pub struct SliceView<'a> {
    pub now: Nanos,
    pub cores: &'a [CoreObs],
    /// The cores at the previous tick (the same length as `cores`).
    pub prev: &'a [CoreObs],
}

impl SliceView<'_> {
    fn count(&self, state: CoreState) -> usize {
        self.cores.iter().filter(|c| c.state == state).count()
    }
    fn each(&self, f: &mut dyn FnMut(CoreId, &CoreObs), keep: impl Fn(&CoreObs) -> bool) {
        for (i, c) in self.cores.iter().enumerate().filter(|(_, c)| keep(c)) {
            f(i as CoreId, c);
        }
    }
}

impl AllocView for SliceView<'_> {
    fn now(&self) -> Nanos {
        self.now
    }
    fn active(&self) -> usize {
        self.count(CoreState::Active)
    }
    fn waking(&self) -> usize {
        self.count(CoreState::Waking)
    }
    fn parked(&self) -> usize {
        self.count(CoreState::Parked)
    }
    fn busy_search_totals(&self) -> (Nanos, Nanos) {
        self.cores.iter().fold((0, 0), |(b, s), c| (b + c.busy_ns, s + c.search_ns))
    }
    fn for_each_queued(&self, f: &mut dyn FnMut(CoreId, &CoreObs)) {
        self.each(f, |c| c.queued > 0)
    }
    fn for_each_active(&self, f: &mut dyn FnMut(CoreId, &CoreObs)) {
        self.each(f, |c| c.state == CoreState::Active)
    }
    fn prev(&self, core: CoreId) -> CoreObs {
        self.prev[core as usize]
    }
}

/// A policy's decision at a tick.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllocAction {
    Nothing,
    /// Grant one more core (the driver picks a parked core, preferring one with queued work).
    Grant,
    /// Ask this active core to park at its next idle point (proactive revocation).
    Yield(CoreId),
}

/// When an idle core may park by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParkMode {
    /// Never (static allocation).
    Never,
    /// After the poll period and passes below.
    AfterPoll,
    /// Only when it is the last active core (the range policies: otherwise cores are revoked).
    OnlyLastCore,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParkRule {
    pub mode: ParkMode,
    pub min_poll_ns: Nanos,
    pub min_passes: u32,
}

impl ParkRule {
    /// Cores never park on their own (static allocation; harvesting controllers lend cores
    /// themselves).
    pub const NEVER: ParkRule = ParkRule { mode: ParkMode::Never, min_poll_ns: 0, min_passes: 0 };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParkVerdict {
    Park,
    /// Go on polling; the driver asks again after the next work-search pass.
    KeepPolling,
}

pub trait CoreAllocator: Send {
    /// Period of [`CoreAllocator::tick`]; `None` for a policy that never changes the allocation.
    fn interval(&self) -> Option<Nanos>;

    /// Called every interval; returns at most one change.
    fn tick(&mut self, obs: &dyn AllocView) -> AllocAction;

    fn park_rule(&self) -> ParkRule;

    /// Called when core `core` has met the park rule. `credits` is the RPC layer's credit state
    /// when a credit-based controller runs (CoreSync gates parking on it); `active` counts the
    /// active cores, the caller included. Policies that don't gate parking keep the default.
    fn on_park_attempt(
        &mut self,
        _now: Nanos,
        _core: CoreId,
        _active: usize,
        _credits: Option<&mut dyn CreditLink>,
    ) -> ParkVerdict {
        ParkVerdict::Park
    }

    /// Called when a core that was in a park attempt finds work again, or wakes up after parking
    /// (CoreSync returns the credits it withheld).
    fn on_park_abort(&mut self, _now: Nanos, _core: CoreId, _credits: Option<&mut dyn CreditLink>) {}

    /// The signal the policy decided on at its last tick, for the time series: each policy
    /// documents its unit (delays in nanoseconds, utilization as a fraction in [0, 1]). `None`
    /// before the first tick, and for policies without a signal.
    fn signal(&self) -> Option<f64> {
        None
    }

    /// How long a core granted at this tick takes to become usable, if the policy's own
    /// mechanism sets it (a harvesting controller's eviction latency); `None`: the driver's
    /// allocation delay.
    fn grant_delay(&self) -> Option<Nanos> {
        None
    }

    /// How long work waiting with no held core idle waits for the lent core its thread woke on
    /// (a harvesting controller's `mechanism.lent_wake`), drawn by the driver for each grant
    /// [`CoreAllocator::grant_on_demand`] marks; `None`: every grant takes `grant_delay`.
    fn lent_wake(&self) -> Option<&crate::wake::WakeLatency> {
        None
    }

    /// How Primary work that took a lent core shares it with the Secondary there (a harvesting
    /// controller's `mechanism.timeshare`); `None`: it has the core to itself.
    fn timeshare(&self) -> Option<harvest::Timeshare> {
        None
    }

    /// Whether the core granted at this tick goes to work waiting on a lent core.
    fn grant_on_demand(&self) -> bool {
        false
    }

    /// Extra run time the first request on a core granted at this tick pays (a harvesting
    /// controller's cache refill after the Secondary ran there).
    fn refill_after_grant(&self) -> Nanos {
        0
    }

    /// Whether the Secondary goes on running on a granted core until the core is usable (CFS
    /// preempts it only after its wake-up wait): the allocation delay is then the Secondary's
    /// time, in `be_cores_mean`, not the Primary's.
    fn secondary_runs_while_waking(&self) -> bool {
        false
    }

    /// Why park attempts parked or kept polling, counted from the start (CoreSync's Algorithm 1);
    /// `None` for policies that do not gate parking.
    fn park_gate(&self) -> Option<crate::summary::ParkGate> {
        None
    }

    /// The harvesting controllers' counters, for the summary; `None` for other policies.
    fn harvest_report(&self) -> Option<harvest::HarvestReport> {
        None
    }

    /// Name for results.
    fn name(&self) -> &'static str;
}

/// Checks an allocator configuration; `field` is its dotted path. A Python policy is checked by
/// importing its class and fitting its parameters (through [`crate::plugin`]).
pub fn validate(cfg: &AllocatorCfg, field: &str) -> Result<(), ScenarioError> {
    match cfg.registered() {
        Some(c) => c.validate(field),
        None => match cfg {
            AllocatorCfg::Python(p) => crate::plugin::python_bridge(field)?.validate(crate::plugin::PolicyKind::Allocator, p, field).map(drop),
            _ => unreachable!("every built-in is registered"),
        },
    }
}

/// Builds the policy a configuration names; `cfg` must have passed [`validate`]. A Python
/// policy's constructor may still fail (it runs the user's code): the error names the table.
pub fn build(cfg: &AllocatorCfg, env: &AllocEnv) -> Result<Box<dyn CoreAllocator>, ScenarioError> {
    match cfg {
        AllocatorCfg::Python(p) => crate::plugin::python_bridge("policy.allocator")?.allocator(p, env),
        _ => Ok(cfg.registered().expect("every built-in is registered").build(env)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(cfg: AllocatorCfg) -> ScenarioError {
        validate(&cfg, "policy.allocator").unwrap_err()
    }

    fn defaults() -> [AllocatorCfg; 6] {
        // The serde defaults, as a scenario with only `kind` set gets them.
        ["static", "shenango", "caladan", "utilization_range", "delay_range", "coresync"]
            .map(|k| serde_json::from_value(serde_json::json!({ "kind": k })).unwrap())
    }

    #[test]
    fn defaults_validate_and_build() {
        for cfg in defaults() {
            validate(&cfg, "policy.allocator").unwrap();
            let a = build(&cfg, &AllocEnv::unseeded(16)).unwrap();
            assert_eq!(a.signal(), None, "{}", a.name());
            if a.name() != "static" {
                assert_eq!(a.interval(), Some(5_000), "{}", a.name());
            }
        }
        let a = build(&AllocatorCfg::Caladan(caladan::Config { interval_us: 5.0, delay_threshold_us: 10.0, poll_us: 2.0, ..Default::default() }), &AllocEnv::unseeded(16)).unwrap();
        assert_eq!(a.park_rule().min_poll_ns, 2_000);
    }

    #[test]
    fn bad_parameters_name_their_field() {
        use AllocatorCfg::*;
        let shen = |interval_us, poll_us, min_passes| Shenango(shenango::Config { interval_us, poll_us, min_passes });
        let cal = |interval_us, delay_threshold_us, poll_us| Caladan(caladan::Config { interval_us, delay_threshold_us, poll_us, ..Default::default() });
        let util = |interval_us, lower, upper| UtilizationRange(utilization_range::Config { interval_us, lower, upper });
        let delay = |interval_us, lower_us, upper_us| DelayRange(delay_range::Config { interval_us, lower_us, upper_us });
        let cases = [
            (shen(0.0, 2.0, 4), "policy.allocator.interval_us"),
            (shen(-5.0, 2.0, 4), "policy.allocator.interval_us"),
            (shen(5.0, 2e6, 4), "policy.allocator.poll_us"),
            (shen(5.0, -1.0, 4), "policy.allocator.poll_us"),
            (cal(f64::NAN, 5.0, 2.0), "policy.allocator.interval_us"),
            (cal(5.0, 0.0, 2.0), "policy.allocator.delay_threshold_us"),
            (cal(5.0, 5.0, 1_000_001.0), "policy.allocator.poll_us"),
            (util(5.0, 0.95, 0.75), "policy.allocator.lower"),
            (util(5.0, 0.8, 0.8), "policy.allocator.lower"),
            (util(5.0, -0.1, 0.9), "policy.allocator.lower"),
            (util(5.0, 0.75, 95.0), "policy.allocator.upper"),
            (util(0.0, 0.75, 0.95), "policy.allocator.interval_us"),
            (delay(5.0, 4.0, 1.0), "policy.allocator.lower_us"),
            (delay(5.0, 1.0, 1.0), "policy.allocator.lower_us"),
            (delay(5.0, -1.0, 1.0), "policy.allocator.lower_us"),
            (delay(5.0, 1.0, f64::INFINITY), "policy.allocator.upper_us"),
        ];
        for (cfg, field) in cases {
            let e = err(cfg.clone());
            assert_eq!(e.field, field, "{cfg:?}: {e}");
            assert!(e.message.contains("not allowed"), "{e}");
        }
        // Zero bounds are meaningful: revoke only at zero utilization / delay; poll 0 parks at once.
        validate(&util(5.0, 0.0, 1.0), "a").unwrap();
        validate(&delay(5.0, 0.0, 4.0), "a").unwrap();
        validate(&cal(5.0, 10.0, 0.0), "a").unwrap();
    }
}
