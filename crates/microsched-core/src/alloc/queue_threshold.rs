//! Queue threshold: the smallest allocator there is, kept as the worked example of adding a
//! policy in Rust (this file plus its line in [`super`]'s registry; nothing else names it).
//!
//! Every interval it counts the requests waiting across the cores: above `grant_above` per
//! active core it asks for one more core; with nothing waiting, idle cores park by themselves
//! after polling, as Shenango's do. It is no paper's policy; a test checks it runs in the
//! simulator by its `kind` alone.

use super::{AllocAction, AllocView, CoreAllocator, ParkMode, ParkRule};
use crate::time::{us, Nanos};

#[derive(Debug, Clone)]
pub struct QueueThreshold {
    interval: Nanos,
    grant_above: f64,
    poll: Nanos,
    /// Requests waiting per active core at the last tick.
    last: Option<f64>,
}

impl CoreAllocator for QueueThreshold {
    fn interval(&self) -> Option<Nanos> {
        Some(self.interval)
    }

    fn tick(&mut self, obs: &dyn AllocView) -> AllocAction {
        let mut queued = 0u64;
        obs.for_each_queued(&mut |_, c| queued += c.queued as u64);
        let per_core = queued as f64 / obs.active().max(1) as f64;
        self.last = Some(per_core);
        if per_core > self.grant_above && obs.any_parked() {
            AllocAction::Grant
        } else {
            AllocAction::Nothing
        }
    }

    fn park_rule(&self) -> ParkRule {
        ParkRule { mode: ParkMode::AfterPoll, min_poll_ns: self.poll, min_passes: 1 }
    }

    /// Requests waiting per active core at the last tick; unit: requests.
    fn signal(&self) -> Option<f64> {
        self.last
    }

    fn name(&self) -> &'static str {
        "queue_threshold"
    }
}

/// Queue threshold: add a core when more than `grant_above` requests wait per active core;
/// idle cores park after `poll_us`.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Period of the check, µs.
    pub interval_us: f64,
    /// Requests waiting per active core above which a core is added.
    pub grant_above: f64,
    /// Time an idle core polls before it parks, µs.
    pub poll_us: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self { interval_us: 5.0, grant_above: 1.0, poll_us: 2.0 }
    }
}

impl super::AllocatorConfig for Config {
    fn validate(&self, field: &str) -> Result<(), crate::error::ScenarioError> {
        use super::common::{check_non_negative_us, check_positive_us};
        check_positive_us(format!("{field}.interval_us"), self.interval_us)?;
        check_non_negative_us(format!("{field}.poll_us"), self.poll_us)?;
        if !(self.grant_above.is_finite() && self.grant_above >= 0.0) {
            return Err(crate::error::ScenarioError::new(
                format!("{field}.grant_above"),
                format!("{} is not allowed: use a number of requests >= 0", self.grant_above),
            ));
        }
        Ok(())
    }

    fn build(&self, _env: &crate::env::AllocEnv) -> Box<dyn CoreAllocator> {
        Box::new(QueueThreshold { interval: us(self.interval_us), grant_above: self.grant_above, poll: us(self.poll_us), last: None })
    }
}
