//! Linux cgroups CPU controls as a harvesting baseline (HarvestContainers §2.1 and §5.7): the
//! Secondary may run on every idle Primary core (CFS shares all unused cores, no buffer), up to
//! its CFS bandwidth quota per period; when the quota is spent it is throttled until the period
//! ends (its cores go back at once). Shares are modelled by what they decide here, how long a
//! Primary thread that wakes on a core the Secondary runs on waits before CFS preempts the
//! Secondary: `wakeup_preempt_us` (millisecond scale, the paper's "enforcement occurs on the
//! order of milliseconds"; CFS's wakeup granularity is 1 ms before scaling). During that wait
//! the Secondary still runs on the core: it is the Secondary's time (`be_cores_mean`) and is
//! charged to its quota. A model, not CFS: no vruntime, no per-core runqueues.

use super::harvest::{HarvestReport, Harvester, Mechanism, MechanismKind};
use super::{AllocAction, AllocView, CoreAllocator, ParkRule};
use crate::error::ScenarioError;
use crate::time::{ms, us, Nanos};

#[derive(Debug, Clone)]
pub struct CfsAllocator {
    poll: Nanos,
    period: Nanos,
    quota_ns: f64,
    max_cores: usize,
    h: Harvester,
    period_end: Nanos,
    used_ns: f64,
    last: Option<(Nanos, usize)>,
    throttled: bool,
    /// Periods in which the Secondary was throttled.
    pub throttles: u64,
}

impl CoreAllocator for CfsAllocator {
    fn interval(&self) -> Option<Nanos> {
        Some(self.poll)
    }
    fn tick(&mut self, obs: &dyn AllocView) -> AllocAction {
        let s = self.h.observe(obs);
        // The Secondary runs on its lent cores and, until CFS preempts it, on the cores the
        // Primary has woken on: both spend its quota.
        if let Some((t, running)) = self.last {
            self.used_ns += (s.now - t) as f64 * running as f64;
        }
        self.last = Some((s.now, s.parked + s.waking));
        while s.now >= self.period_end {
            self.period_end += self.period;
            self.used_ns = 0.0;
            self.throttled = false;
        }
        if !self.throttled && self.used_ns >= self.quota_ns {
            self.throttled = true;
            self.throttles += 1;
        }
        let max_lent = if self.throttled { 0 } else { self.max_cores };
        self.h.act(&s, 0, max_lent)
    }
    fn park_rule(&self) -> ParkRule {
        ParkRule::NEVER
    }
    fn grant_delay(&self) -> Option<Nanos> {
        // A throttled Secondary leaves its cores at once; otherwise the Primary waits for CFS.
        Some(if self.throttled { 0 } else { self.h.evict_delay })
    }
    fn refill_after_grant(&self) -> Nanos {
        self.h.refill
    }
    fn secondary_runs_while_waking(&self) -> bool {
        true
    }
    /// Whether the Secondary is throttled (1) or not (0).
    fn signal(&self) -> Option<f64> {
        Some(self.throttled as u8 as f64)
    }
    fn harvest_report(&self) -> Option<HarvestReport> {
        Some(self.h.report())
    }
    fn name(&self) -> &'static str {
        "harvest_cfs"
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration: the `[policy.allocator]` table of `kind = "harvest_cfs"`.

/// cgroups shares / CFS bandwidth quota for the Secondary (HarvestContainers' cgroups baseline).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// CFS bandwidth period, ms (cpu.cfs_period_us: 100 ms by default in Linux).
    pub period_ms: f64,
    /// Secondary quota per period, in cores (quota / period; the paper's "6/8 cores" is 6).
    pub quota_cores: f64,
    /// How long a Primary thread waits for the Secondary on a core before CFS preempts it, µs.
    pub wakeup_preempt_us: f64,
    /// Poll period of the model, µs.
    pub poll_us: f64,
    /// Cache refill the first Primary request pays on a core the Secondary ran on, µs
    /// ([`super::harvest::REFILL_US`] by default).
    pub refill_us: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self { period_ms: 100.0, quota_cores: 6.0, wakeup_preempt_us: 1000.0, poll_us: 1.0, refill_us: super::harvest::REFILL_US }
    }
}

impl super::AllocatorConfig for Config {
    fn validate(&self, field: &str) -> Result<(), ScenarioError> {
        use super::common::{check_non_negative_us, check_positive_us};
        if !(self.period_ms.is_finite() && self.period_ms > 0.0 && self.period_ms <= 1000.0) {
            return Err(ScenarioError::new(
                format!("{field}.period_ms"),
                format!("{} is not allowed: must be a number of ms > 0 and <= 1000", self.period_ms),
            ));
        }
        if !(self.quota_cores.is_finite() && self.quota_cores >= 0.0) {
            return Err(ScenarioError::new(
                format!("{field}.quota_cores"),
                format!("{} is not allowed: must be a number of cores >= 0", self.quota_cores),
            ));
        }
        check_non_negative_us(format!("{field}.wakeup_preempt_us"), self.wakeup_preempt_us)?;
        check_non_negative_us(format!("{field}.refill_us"), self.refill_us)?;
        check_positive_us(format!("{field}.poll_us"), self.poll_us)
    }

    fn build(&self, env: &crate::env::AllocEnv) -> Box<dyn CoreAllocator> {
        let max_cores = env.max_cores;
        let period = ms(self.period_ms);
        let mech = Mechanism {
            kind: MechanismKind::TwoPhaseAffinity,
            lend_us: Some(0.0),
            evict_us: Some(self.wakeup_preempt_us),
            refill_us: self.refill_us,
            // Its own wait (`wakeup_preempt_us`) is every grant's: the allocator draws none.
            ..Mechanism::default()
        };
        Box::new(CfsAllocator {
            poll: us(self.poll_us),
            period,
            quota_ns: self.quota_cores * period as f64,
            max_cores: max_cores as usize,
            h: Harvester::new(&mech),
            period_end: period,
            used_ns: 0.0,
            last: None,
            throttled: false,
            throttles: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::harvest::test_view::View;
    use super::super::{AllocatorConfig, CoreState};
    use super::*;

    #[test]
    fn lends_every_idle_core_until_the_quota_is_spent() {
        // 4 cores, quota 1 core per 10 µs period (poll 1 µs).
        let cfg = Config { period_ms: 0.01, quota_cores: 1.0, wakeup_preempt_us: 50.0, poll_us: 1.0, ..Default::default() };
        let mut a = cfg.build(&crate::env::AllocEnv::unseeded(4));
        let mut v = View::held(0, 4, 2);
        assert_eq!(a.tick(&v), AllocAction::Yield(3));
        v.cores[3] = (CoreState::Parked, false);
        v.now = 1_000;
        assert_eq!(a.tick(&v), AllocAction::Yield(2));
        assert_eq!(a.grant_delay(), Some(50_000));
        v.cores[2] = (CoreState::Parked, false);
        // One core lent from 1 µs, two from 5.5 µs: the 10 core-µs quota is spent at 8.25 µs.
        v.now = 5_500;
        assert_eq!(a.tick(&v), AllocAction::Nothing);
        v.now = 8_500;
        assert_eq!(a.tick(&v), AllocAction::Grant);
        assert_eq!(a.signal(), Some(1.0));
        assert_eq!(a.grant_delay(), Some(0));
        // A new period lifts the throttle.
        v.now = 10_000;
        v.cores[2] = (CoreState::Active, true);
        v.cores[3] = (CoreState::Active, true);
        assert_eq!(a.tick(&v), AllocAction::Yield(3));
    }

    #[test]
    fn the_wake_up_wait_is_the_secondarys_time_and_spends_its_quota() {
        // 4 cores, quota 1 core per 10 µs: core 2 lent, core 3 granted back and waiting for
        // CFS to preempt the Secondary, which runs there meanwhile: 2 cores' worth of quota.
        let cfg = Config { period_ms: 0.01, quota_cores: 1.0, wakeup_preempt_us: 50.0, poll_us: 1.0, ..Default::default() };
        let mut a = cfg.build(&crate::env::AllocEnv::unseeded(4));
        assert!(a.secondary_runs_while_waking());
        let mut v = View::held(0, 4, 2);
        v.cores[2] = (CoreState::Parked, false);
        v.cores[3] = (CoreState::Waking, false);
        assert_eq!(a.tick(&v), AllocAction::Nothing);
        v.now = 4_000;
        assert_eq!(a.tick(&v), AllocAction::Nothing, "8 of 10 core-µs spent");
        v.now = 5_000;
        assert_eq!(a.tick(&v), AllocAction::Grant, "the quota is spent at 5 µs, not 10");
        assert_eq!(a.signal(), Some(1.0));
    }
}
