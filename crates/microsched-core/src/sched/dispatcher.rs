//! A dispatcher core, as mechanism (Shinjuku's and Concord's centralized dispatcher): one of
//! the server's cores takes every arriving request off the network in arrival order, spends
//! `cost_ns` on each, and hands it to the queueing policy. It runs no requests. Its throughput
//! limit, 1 / cost, is not a cap written anywhere: it emerges from the serialized stage.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::scenario::non_negative;
use crate::{Nanos, ScenarioError};

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DispatcherCfg {
    /// CPU time of the dispatcher per request.
    pub cost_ns: f64,
}

impl DispatcherCfg {
    pub fn validate(&self, field: &str, max_cores: u32) -> Result<(), ScenarioError> {
        non_negative(&format!("{field}.cost_ns"), self.cost_ns)?;
        if max_cores < 2 {
            return Err(ScenarioError::new(
                field,
                format!("a dispatcher takes one of server.max_cores = {max_cores}: use at least 2 cores"),
            ));
        }
        Ok(())
    }

    pub fn cost(&self) -> Nanos {
        self.cost_ns.round() as Nanos
    }
}
