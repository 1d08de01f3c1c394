//! The `[policy]` table: which core allocator and which overload controller run.
//!
//! Each policy's file owns its configuration: its parameters (serde + JSON Schema, defaults
//! written once, doc comments that become the schema's descriptions), their validation and the
//! construction of the policy. Adding a policy adds one line to [`AllocatorCfg`] or
//! [`OverloadCfg`] here, and nothing else in the scenario module.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::alloc::{caladan, coresync, delay_range, harvest_acbf, harvest_cfs, harvest_smart, harvest_static, shenango, shenango_artifact, static_alloc, utilization_range};
use crate::overload::{breakwater, protego, seda};

pub use crate::overload::breakwater::{AlphaMode, PoolTrigger};
/// Breakwater's parameters ([`breakwater::Config`]), under the name they had here.
pub use crate::overload::breakwater::Config as BreakwaterCfg;

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Policy {
    #[serde(default)]
    pub allocator: AllocatorCfg,
    #[serde(default)]
    pub overload: OverloadCfg,
    /// Queueing policy when it is more than `server.queue` says (Synergy, Tiny Quanta).
    #[serde(default)]
    pub sched: SchedCfg,
}

/// The queueing policy: `queue` (default) is the one `server.queue` names (c-FCFS or d-FCFS);
/// the others bring their own parameters (see [`crate::sched`]).
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SchedCfg {
    /// `server.queue` decides: `central` (c-FCFS) or `per_core` (d-FCFS, `server.steal`).
    #[default]
    Queue,
    Synergy(crate::sched::synergy::Config),
    TinyQuanta(crate::sched::tiny_quanta::Config),
    Darc(crate::sched::darc::Config),
    Shinjuku(crate::sched::shinjuku::Config),
    Concord(crate::sched::concord::Config),
}

/// Core allocation policy. Defaults follow the CoreSync evaluation (§IV-A).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum AllocatorCfg {
    // One line per policy; each variant's schema (fields, defaults, description) is its Config's.
    Static(static_alloc::Config),
    Shenango(shenango::Config),
    Caladan(caladan::Config),
    ShenangoArtifact(shenango_artifact::Config),
    UtilizationRange(utilization_range::Config),
    DelayRange(delay_range::Config),
    #[serde(rename = "coresync")]
    CoreSync(coresync::Config),
    HarvestAcbf(harvest_acbf::Config),
    HarvestStatic(harvest_static::Config),
    HarvestCfs(harvest_cfs::Config),
    HarvestSmart(harvest_smart::Config),
}

impl Default for AllocatorCfg {
    fn default() -> Self {
        AllocatorCfg::Static(static_alloc::Config::default())
    }
}

/// Overload (admission) control.
#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum OverloadCfg {
    // One line per controller, as for AllocatorCfg; "none" has no parameters and no object.
    /// Everything is admitted; clients send as soon as a request is created.
    #[default]
    None,
    Breakwater(breakwater::Config),
    Protego(protego::Config),
    Seda(seda::Config),
}
