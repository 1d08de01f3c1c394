//! "Shenango" as the CoreSync artifact ran it (issue 12): not original Shenango's standing-queue
//! rule ([`super::shenango`]) but Caladan's `simple` IOKernel policy with the delay rule:
//! `iokerneld simple interval 5`, `runtime_qdelay_us 5`, `RUNTIME_SCHED_MIN_POLL_US = 2`
//! (icnp_2025_scripts/*_param_script.py, baseline `shenango`).
//!
//! A named parameter set of [`super::caladan`] with `waking_skip = "simple"` and the artifact's
//! values as defaults, reported under its own name so that results say which "Shenango" ran.
//! The artifact's `caladan1/2/3` baselines are `kind = "caladan"` with `waking_skip = "ias"` and
//! poll 2/5/10 µs.

use super::caladan::{CaladanAllocator, WakingSkip};
use super::CoreAllocator;

/// The CoreSync artifact's "Shenango": Caladan's `simple` policy, delay rule 5 µs, interval
/// 5 µs, poll 2 µs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Period of the congestion check (`iokerneld ... interval 5`).
    pub interval_us: f64,
    /// Max queueing delay at or above which one core is added (`runtime_qdelay_us 5`).
    pub delay_threshold_us: f64,
    /// Time an idle core polls and steals without work before it parks
    /// (`RUNTIME_SCHED_MIN_POLL_US = 2`).
    pub poll_us: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self { interval_us: 5.0, delay_threshold_us: 5.0, poll_us: 2.0 }
    }
}

impl Config {
    fn caladan(&self) -> super::caladan::Config {
        super::caladan::Config {
            interval_us: self.interval_us,
            delay_threshold_us: self.delay_threshold_us,
            poll_us: self.poll_us,
            waking_skip: WakingSkip::Simple,
        }
    }

    fn allocator(&self) -> CaladanAllocator {
        use crate::time::us;
        let c = self.caladan();
        CaladanAllocator::new(us(c.interval_us), us(c.delay_threshold_us), us(c.poll_us))
            .with_waking_skip(WakingSkip::Simple)
            .with_name("shenango_artifact")
    }
}

impl super::AllocatorConfig for Config {
    /// Checks the parameters; `field` is the table's dotted path.
    fn validate(&self, field: &str) -> Result<(), crate::error::ScenarioError> {
        super::AllocatorConfig::validate(&self.caladan(), field)
    }

    /// The allocator; the configuration must have passed [`Config::validate`].
    fn build(&self, _env: &crate::env::AllocEnv) -> Box<dyn CoreAllocator> {
        Box::new(self.allocator())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alloc::common::test_util::*;
    use crate::alloc::CoreObs;
    use crate::scenario::AllocatorCfg;

    #[test]
    fn is_caladan_simple_with_the_artifact_defaults() {
        let cfg: AllocatorCfg = serde_json::from_value(serde_json::json!({ "kind": "shenango_artifact" })).unwrap();
        crate::alloc::validate(&cfg, "policy.allocator").unwrap();
        let a = crate::alloc::build(&cfg, &crate::env::AllocEnv::unseeded(16)).unwrap();
        assert_eq!(a.name(), "shenango_artifact");
        assert_eq!(a.interval(), Some(5_000));
        assert_eq!(a.park_rule().min_poll_ns, 2_000);
        // Decision for decision the same as caladan simple 5/5/2.
        let mut ours = Driven::new(Config::default().allocator());
        let mut cal = Driven::new(CaladanAllocator::new(5_000, 5_000, 2_000));
        let seqs: [Vec<CoreObs>; 4] = [
            vec![queued(active(), 2, 1_000), parked()],
            vec![queued(active(), 9, 0), parked(), parked()],
            vec![active(), active(), parked()],
            vec![queued(active(), 3, 14_000), parked()],
        ];
        for (i, cores) in seqs.iter().enumerate() {
            let now = 20_000 + 5_000 * i as u64;
            let (x, y) = (ours.tick_at(now, cores), cal.tick_at(now, cores));
            assert_eq!(x, y);
        }
        let e = crate::alloc::validate(
            &serde_json::from_value(serde_json::json!({ "kind": "shenango_artifact", "poll_us": -1 })).unwrap(),
            "policy.allocator",
        )
        .unwrap_err();
        assert_eq!(e.field, "policy.allocator.poll_us");
    }
}
