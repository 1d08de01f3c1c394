//! A static buffer (HarvestContainers §5.4, Fig. 6's baseline; PerfIso's design): a fixed number
//! of idle Primary cores is always held back and every other idle core is lent to the Secondary,
//! with the shared actuation of [`super::harvest`]. A buffer of every core lends nothing: the
//! Primary runs as if alone.

use super::harvest::{HarvestReport, Harvester, Mechanism};
use super::{AllocAction, AllocView, CoreAllocator, ParkRule};
use crate::time::{us, Nanos};

#[derive(Debug, Clone)]
pub struct StaticBufferAllocator {
    poll: Nanos,
    buffer: usize,
    max_cores: usize,
    h: Harvester,
}

impl CoreAllocator for StaticBufferAllocator {
    fn interval(&self) -> Option<Nanos> {
        Some(self.poll)
    }
    fn tick(&mut self, obs: &dyn AllocView) -> AllocAction {
        let s = self.h.observe(obs);
        self.h.act(&s, self.buffer, self.max_cores)
    }
    fn park_rule(&self) -> ParkRule {
        // Cores are lent by the controller only; the Primary starts holding all of them.
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
    /// The buffer, in cores.
    fn signal(&self) -> Option<f64> {
        Some(self.buffer as f64)
    }
    fn harvest_report(&self) -> Option<HarvestReport> {
        Some(self.h.report())
    }
    fn name(&self) -> &'static str {
        "harvest_static"
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration: the `[policy.allocator]` table of `kind = "harvest_static"`.

/// Harvesting with a fixed buffer of idle Primary cores (HarvestContainers' static baseline).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Idle Primary cores always held back (the buffer); at least server.max_cores lends nothing.
    pub buffer: u32,
    /// Monitor / balancer poll period (the artifact busy-polls; 1 µs stands in for it).
    pub poll_us: f64,
    /// How cores move between Primary and Secondary.
    pub mechanism: Mechanism,
}

impl Default for Config {
    fn default() -> Self {
        // The artifact's static_targetIdleCores (7 of 8): sized for peak demand.
        Self { buffer: 7, poll_us: 1.0, mechanism: Mechanism::default() }
    }
}

impl super::AllocatorConfig for Config {
    fn validate(&self, field: &str) -> Result<(), crate::error::ScenarioError> {
        super::common::check_positive_us(format!("{field}.poll_us"), self.poll_us)?;
        self.mechanism.validate(&format!("{field}.mechanism"))
    }

    fn build(&self, env: &crate::env::AllocEnv) -> Box<dyn CoreAllocator> {
        let max_cores = env.max_cores;
        Box::new(StaticBufferAllocator {
            poll: us(self.poll_us),
            buffer: self.buffer as usize,
            max_cores: max_cores as usize,
            h: Harvester::new(&self.mechanism),
        })
    }
}
