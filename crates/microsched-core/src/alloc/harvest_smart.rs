//! A SmartHarvest-like predictor (Wang et al., EuroSys'21, as HarvestContainers §5.8 describes
//! it): every `window_ms` (25 ms) the Primary is given the cores it is predicted to need in the
//! next window and the rest are lent for the whole window. SmartHarvest learns the prediction
//! online (a cost-sensitive Vowpal Wabbit classifier over the last windows' usage); modelled
//! here by what §5.8 shows of it: the prediction is the peak number of cores the Primary used
//! (running or waiting for a core) over the last `history_windows` windows, plus
//! `safety_cores`, so a transient burst at the end of one window inflates the next window's
//! prediction. As in SmartHarvest, a Primary that runs out of cores takes a lent one back at
//! once (the safeguard), paying the eviction latency. The default mechanism is `cpuset`, the
//! Linux equivalent the paper used to simulate SmartHarvest's cpugroups.

use std::collections::VecDeque;

use super::harvest::{HarvestReport, Harvester, Mechanism};
use super::{AllocAction, AllocView, CoreAllocator, ParkRule};
use crate::error::ScenarioError;
use crate::time::{ms, us, Nanos};

#[derive(Debug, Clone)]
pub struct SmartAllocator {
    cfg: Config,
    poll: Nanos,
    window: Nanos,
    max_cores: usize,
    h: Harvester,
    window_end: Nanos,
    peak: usize,
    history: VecDeque<usize>,
    predicted: usize,
}

impl CoreAllocator for SmartAllocator {
    fn interval(&self) -> Option<Nanos> {
        Some(self.poll)
    }
    fn tick(&mut self, obs: &dyn AllocView) -> AllocAction {
        let s = self.h.observe(obs);
        self.peak = self.peak.max(s.demand(self.max_cores));
        if s.now >= self.window_end {
            self.window_end += self.window;
            if self.history.len() == self.cfg.history_windows as usize {
                self.history.pop_front();
            }
            self.history.push_back(std::mem::take(&mut self.peak));
            let peak = self.history.iter().copied().max().unwrap_or(self.max_cores);
            self.predicted = (peak + self.cfg.safety_cores as usize).min(self.max_cores);
        }
        // The held cores are the prediction: idle ones among them are not lent.
        self.h.act(&s, 0, self.max_cores - self.predicted)
    }
    fn park_rule(&self) -> ParkRule {
        ParkRule::NEVER
    }
    fn grant_delay(&self) -> Option<Nanos> {
        Some(self.h.evict_delay)
    }
    fn refill_after_grant(&self) -> Nanos {
        self.h.refill
    }
    fn lent_wake(&self) -> Option<&crate::wake::WakeLatency> {
        Some(&self.h.lent_wake)
    }
    fn timeshare(&self) -> Option<super::harvest::Timeshare> {
        self.h.timeshare.is_on().then_some(self.h.timeshare)
    }
    fn grant_on_demand(&self) -> bool {
        self.h.last_grant_demand
    }
    /// Cores predicted for the Primary in this window.
    fn signal(&self) -> Option<f64> {
        Some(self.predicted as f64)
    }
    fn harvest_report(&self) -> Option<HarvestReport> {
        // No buffer: the held cores are the prediction (the signal); buffer_mean reads 0.
        Some(self.h.report())
    }
    fn name(&self) -> &'static str {
        "harvest_smart"
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration: the `[policy.allocator]` table of `kind = "harvest_smart"`.

/// SmartHarvest-like harvesting: per-window demand prediction from the last windows' peak.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Prediction window, ms (SmartHarvest's 25 ms).
    pub window_ms: f64,
    /// Windows whose peak usage makes the prediction.
    pub history_windows: u32,
    /// Cores added to the prediction.
    pub safety_cores: u32,
    /// Monitor poll period, µs.
    pub poll_us: f64,
    /// How cores move between Primary and Secondary (default: cpuset).
    pub mechanism: Mechanism,
}

impl Default for Config {
    fn default() -> Self {
        Self { window_ms: 25.0, history_windows: 1, safety_cores: 0, poll_us: 1.0, mechanism: Mechanism::cpuset() }
    }
}

impl super::AllocatorConfig for Config {
    fn validate(&self, field: &str) -> Result<(), ScenarioError> {
        super::common::check_window_ms(format!("{field}.window_ms"), self.window_ms)?;
        if self.history_windows == 0 {
            return Err(ScenarioError::new(format!("{field}.history_windows"), "0 is not allowed: must be at least 1"));
        }
        super::common::check_positive_us(format!("{field}.poll_us"), self.poll_us)?;
        self.mechanism.validate(&format!("{field}.mechanism"))
    }

    fn build(&self, env: &crate::env::AllocEnv) -> Box<dyn CoreAllocator> {
        let max_cores = env.max_cores;
        let window = ms(self.window_ms);
        Box::new(SmartAllocator {
            cfg: self.clone(),
            poll: us(self.poll_us),
            window,
            max_cores: max_cores as usize,
            h: Harvester::new(&self.mechanism),
            window_end: window,
            peak: 0,
            history: VecDeque::new(),
            // Nothing is lent before the first prediction.
            predicted: max_cores as usize,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::harvest::test_view::View;
    use super::super::AllocatorConfig;
    use super::*;

    #[test]
    fn a_burst_at_the_end_of_a_window_blocks_the_next_windows_harvest() {
        let cfg = Config { window_ms: 0.01, mechanism: Mechanism { lend_us: Some(0.0), ..Mechanism::cpuset() }, ..Default::default() };
        let mut a = cfg.build(&crate::env::AllocEnv::unseeded(8));
        // Window 1: 2 cores busy, then a transient burst to 8 just before its end.
        for t in 0..9 {
            assert_eq!(a.tick(&View::held(t * 1_000, 8, 2)), AllocAction::Nothing, "no prediction yet");
        }
        a.tick(&View::held(9_500, 8, 8));
        a.tick(&View::held(10_000, 8, 2));
        assert_eq!(a.signal(), Some(8.0));
        // Window 2 lends nothing although 6 cores sit idle.
        assert_eq!(a.tick(&View::held(11_000, 8, 2)), AllocAction::Nothing);
        for t in 12..20 {
            a.tick(&View::held(t * 1_000, 8, 2));
        }
        a.tick(&View::held(20_000, 8, 2));
        assert_eq!(a.signal(), Some(2.0));
        assert_eq!(a.tick(&View::held(21_000, 8, 2)), AllocAction::Yield(7));
    }
}
