//! Time slicing, as mechanism: a quantum after which a running request's core is interrupted,
//! and what the interruption costs. The costs follow the preemptive-scheduling papers' split
//! (Synergy Table I): `send` is spent by whoever sends the interrupt (a timer or dispatcher core,
//! outside the worker cores, counted apart), `propagation` elapses before the interrupt lands
//! (the request keeps running meanwhile), `receive` is the worker's cost of taking it and
//! switching away, `return` the cost of resuming a preempted request on whichever core takes it
//! again. Receive and return are charged to the worker core as overhead time.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::scenario::{non_negative, positive};
use crate::time::us;
use crate::{Nanos, ScenarioError};

#[derive(Debug, Clone, Default, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PreemptionCfg {
    /// Run time after which a request is preempted; absent: requests run to completion (or to
    /// a blocking lock or yield point).
    #[serde(default)]
    pub quantum_us: Option<f64>,
    #[serde(default)]
    pub send_ns: f64,
    #[serde(default)]
    pub propagation_ns: f64,
    #[serde(default)]
    pub receive_ns: f64,
    #[serde(default)]
    pub return_ns: f64,
}

/// The mechanism in integer nanoseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Preemption {
    /// `Nanos::MAX`: no preemption.
    pub quantum: Nanos,
    pub send: Nanos,
    pub propagation: Nanos,
    pub receive: Nanos,
    pub ret: Nanos,
}

impl PreemptionCfg {
    pub fn validate(&self, field: &str) -> Result<(), ScenarioError> {
        if let Some(q) = self.quantum_us {
            positive(&format!("{field}.quantum_us"), q)?;
        }
        for (name, v) in [
            ("send_ns", self.send_ns),
            ("propagation_ns", self.propagation_ns),
            ("receive_ns", self.receive_ns),
            ("return_ns", self.return_ns),
        ] {
            non_negative(&format!("{field}.{name}"), v)?;
        }
        Ok(())
    }

    pub fn build(&self) -> Preemption {
        Preemption {
            quantum: self.quantum_us.map_or(Nanos::MAX, |q| us(q).max(1)),
            send: self.send_ns.round() as Nanos,
            propagation: self.propagation_ns.round() as Nanos,
            receive: self.receive_ns.round() as Nanos,
            ret: self.return_ns.round() as Nanos,
        }
    }
}

impl Preemption {
    pub fn enabled(&self) -> bool {
        self.quantum != Nanos::MAX
    }
}
