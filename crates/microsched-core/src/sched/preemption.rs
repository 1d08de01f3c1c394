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
    /// Cost of sending an interrupt, spent by the sender (a timer or dispatcher core, counted
    /// apart from the workers).
    #[serde(default)]
    pub send_ns: f64,
    /// Time from the send until the interrupt lands; the request keeps running meanwhile.
    #[serde(default)]
    pub propagation_ns: f64,
    /// The worker's cost of taking the interrupt and switching away (overhead on that core).
    #[serde(default)]
    pub receive_ns: f64,
    /// The cost of resuming a preempted request on whichever core takes it again (overhead).
    #[serde(default)]
    pub return_ns: f64,
    /// A named interrupt mechanism whose measured costs (Synergy Table I) replace the four
    /// `*_ns` fields (which must then stay 0): `signal`, `kmod_ipi`, `uintr`, `dune_posted`
    /// (Shinjuku's own dataplane), or `ci` (compiler interrupts: a flag polled at yield points).
    #[serde(default)]
    pub mechanism: Option<Mechanism>,
    /// Where between the mechanism's p50 (0) and p99.9 (1) costs to take each cost.
    #[serde(default)]
    pub percentile: f64,
    /// Extra run time of every request from yield-point checks (compiler interrupts instrument
    /// the code: up to 0.2 in tight loops, Tiny Quanta's measurement). Slowdown still divides by
    /// the nominal service time.
    #[serde(default)]
    pub service_inflation: f64,
}

/// Interrupt mechanisms with their costs in ns, (p50, p99.9) of (send, propagation, receive,
/// return).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mechanism {
    /// POSIX signal (tgkill): Table I.
    Signal,
    /// Synergy's kernel-module IPI: Table I.
    KmodIpi,
    /// Intel user interrupts: Table I.
    Uintr,
    /// Compiler interrupts: the timer core writes a flag, instrumented code polls it at loop
    /// back-edges and switches green threads. No table gives it; the costs here are of the
    /// order Concord's simulator assumes (0.1 µs a preemption), split over propagation (the
    /// polling interval), receive and return.
    Ci,
    /// Dune's posted interrupts (APICv), what Shinjuku sends from its dispatcher in its own
    /// dataplane and on Synergy's testbed (Linux 4.4.185 "to ensure compatibility with Dune",
    /// Synergy §V). Shinjuku (NSDI'19, Table 1, posted IPIs without VM exits) gives the sender
    /// 298 cycles and the receiver 1,212 cycles (Linux signals: 2,084 / 2,523; Dune IPIs with
    /// exits: 2,081 / 2,662). The paper's text is not in `shared/papers` and was not read: the
    /// figures are as two secondary transcriptions of its Table 1 give them, agreeing, and as
    /// github.com/stanford-mast/shinjuku/issues/5 quotes the 1,212 ("In the paper and slides it
    /// is mentioned that 1212 clocks are needed on the receiving core"). They are cycles of
    /// Shinjuku's own machine (its clock is not settled here); taken as cycles at Synergy's
    /// 2.6 GHz testbed they are 115 and 466 ns. Resuming a preempted request is Shinjuku's own
    /// context switch, taken as Synergy's green-thread return (Table I, 100 ns); no tail is
    /// given, so p99.9 = p50, and the propagation is folded into the receive.
    DunePosted,
}

impl Mechanism {
    /// (p50, p99.9) costs: send, propagation, receive, return.
    pub fn costs(self) -> [(f64, f64); 4] {
        match self {
            Mechanism::Signal => [(746.0, 929.0), (2216.0, 2533.0), (1434.0, 3185.0), (641.0, 677.0)],
            Mechanism::KmodIpi => [(490.0, 549.0), (1225.0, 1659.0), (728.0, 2516.0), (100.0, 138.0)],
            Mechanism::Uintr => [(171.0, 236.0), (671.0, 1354.0), (464.0, 1534.0), (45.0, 105.0)],
            Mechanism::Ci => [(0.0, 0.0), (50.0, 200.0), (50.0, 100.0), (50.0, 100.0)],
            Mechanism::DunePosted => [(115.0, 115.0), (0.0, 0.0), (466.0, 466.0), (100.0, 100.0)],
        }
    }
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
    /// Run-time inflation in parts per million.
    pub inflation_ppm: Nanos,
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
            if self.mechanism.is_some() && v != 0.0 {
                return Err(ScenarioError::new(
                    format!("{field}.{name}"),
                    "a named mechanism gives the costs: leave it at 0, or drop `mechanism` to enter your own",
                ));
            }
        }
        if !(0.0..=1.0).contains(&self.percentile) {
            return Err(ScenarioError::new(format!("{field}.percentile"), format!("{} is not allowed: use 0 (p50) ..= 1 (p99.9)", self.percentile)));
        }
        if !(0.0..=10.0).contains(&self.service_inflation) {
            return Err(ScenarioError::new(
                format!("{field}.service_inflation"),
                format!("{} is not allowed: use a fraction in 0..=10", self.service_inflation),
            ));
        }
        Ok(())
    }

    pub fn build(&self) -> Preemption {
        let [send, propagation, receive, ret] = match self.mechanism {
            Some(m) => m.costs().map(|(p50, p999)| p50 + self.percentile * (p999 - p50)),
            None => [self.send_ns, self.propagation_ns, self.receive_ns, self.return_ns],
        };
        Preemption {
            quantum: self.quantum_us.map_or(Nanos::MAX, |q| us(q).max(1)),
            send: send.round() as Nanos,
            propagation: propagation.round() as Nanos,
            receive: receive.round() as Nanos,
            ret: ret.round() as Nanos,
            inflation_ppm: (self.service_inflation * 1e6).round() as Nanos,
        }
    }
}

impl Preemption {
    pub fn enabled(&self) -> bool {
        self.quantum != Nanos::MAX
    }

    /// Run time of `d` nominal nanoseconds of work, instrumentation included.
    #[inline]
    pub fn inflate(&self, d: Nanos) -> Nanos {
        d + d * self.inflation_ppm / 1_000_000
    }
}
