//! The `[metrics]` table: what a run records.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

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
