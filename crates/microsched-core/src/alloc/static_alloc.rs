use super::{AllocAction, AllocView, CoreAllocator, ParkRule};
use crate::time::Nanos;

/// Every core allocated and spinning for the whole run: the baseline of every paper.
#[derive(Debug, Clone)]
pub struct StaticAllocator {
    max_cores: u32,
}

impl StaticAllocator {
    pub fn new(max_cores: u32) -> Self {
        Self { max_cores }
    }
    pub fn max_cores(&self) -> u32 {
        self.max_cores
    }
}

impl CoreAllocator for StaticAllocator {
    fn interval(&self) -> Option<Nanos> {
        None
    }
    fn tick(&mut self, _obs: &dyn AllocView) -> AllocAction {
        AllocAction::Nothing
    }
    fn park_rule(&self) -> ParkRule {
        ParkRule::NEVER
    }
    fn name(&self) -> &'static str {
        "static"
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration: the `[policy.allocator]` table of `kind = "static"`.

/// All cores allocated and spinning, never parked.
// No parameters. Unknown keys are denied in the schema only: serde's own error for a struct
// without fields reads "there are no fields"; the loader's unread-key check rejects a stray key
// instead, naming it and the allowed keys (`kind`).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[schemars(deny_unknown_fields)]
pub struct Config {}

impl super::AllocatorConfig for Config {
    fn validate(&self, _field: &str) -> Result<(), crate::error::ScenarioError> {
        Ok(())
    }

    fn build(&self, env: &crate::env::AllocEnv) -> Box<dyn CoreAllocator> {
        let max_cores = env.max_cores;
        Box::new(StaticAllocator::new(max_cores))
    }
}
