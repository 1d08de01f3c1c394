//! The `[policy]` table: which core allocator and which overload controller run.
//!
//! Each policy's file owns its configuration: its parameters (serde + JSON Schema, defaults
//! written once, doc comments that become the schema's descriptions), their validation and the
//! construction of the policy. Adding a policy adds its file and one line to its kind's registry
//! ([`crate::alloc`], [`crate::overload`], [`crate::sched`]), and nothing here.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use crate::alloc::AllocatorCfg;
pub use crate::overload::OverloadCfg;
pub use crate::sched::SchedCfg;

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

