//! What a policy is built from: a narrow environment per kind, never the whole scenario.
//!
//! A policy sees the facts of the server it decides for (core counts, request types, quantum,
//! whether a dispatcher core runs) and a seed from which it draws random streams of its own.
//! Keeping it narrow is what lets the same policy object run in the simulator, in the real
//! runtime and from Python: each driver can fill these in, and a policy cannot come to depend
//! on a scenario field the other drivers do not have.

use crate::rng::{stream, Stream};
use crate::scenario::{QueueMode, Scenario, Steering};
use crate::time::Nanos;

/// A core allocator's environment.
#[derive(Debug, Clone, PartialEq)]
pub struct AllocEnv {
    /// Cores the application may hold (`server.max_cores`).
    pub max_cores: u32,
    /// The run's seed (the node's, on a multi-node run); see [`AllocEnv::stream`].
    pub seed: u64,
}

impl AllocEnv {
    /// An environment of `max_cores` with seed 0: for drivers and tests whose allocators draw
    /// nothing at random.
    pub fn unseeded(max_cores: u32) -> Self {
        Self { max_cores, seed: 0 }
    }

    /// The random stream `name` of this policy: the same seed and name give the same draws, and
    /// a stream never shares draws with the workload's (arrivals, service times).
    pub fn stream(&self, name: &str) -> Stream {
        stream(self.seed, &format!("policy.allocator.{name}"))
    }
}

/// An overload controller's environment.
#[derive(Debug, Clone, PartialEq)]
pub struct OverloadEnv {
    /// Client sessions connected from the start (`clients.sessions`, all applications).
    pub sessions: u32,
    pub max_cores: u32,
    /// The network round-trip time (`network.rtt_us`): Breakwater's default control period.
    pub rtt_ns: Nanos,
    pub seed: u64,
}

impl OverloadEnv {
    /// The random stream `name` of this controller (see [`AllocEnv::stream`]).
    pub fn stream(&self, name: &str) -> Stream {
        stream(self.seed, &format!("policy.overload.{name}"))
    }
}

/// A request type as a queueing policy may know it.
#[derive(Debug, Clone, PartialEq)]
pub struct TypeInfo {
    pub name: String,
    /// Relative weight in the mix, as the scenario gives it.
    pub ratio: f64,
    /// Mean service time in microseconds; `None` for an empirical distribution (its mean needs
    /// the file, which policies do not read).
    pub mean_us: Option<f64>,
}

/// A queueing policy's environment.
#[derive(Debug, Clone, PartialEq)]
pub struct SchedEnv {
    /// Cores that run requests (the dispatcher's excluded).
    pub workers: u32,
    /// The first application's request types, in the workload's order (a request's `rtype` is
    /// its index here).
    pub types: Vec<TypeInfo>,
    /// `server.preemption.quantum_us` in nanoseconds; `Nanos::MAX` when nothing is preempted.
    pub quantum: Nanos,
    /// Whether a dispatcher core runs (`server.dispatcher`).
    pub dispatcher: bool,
    /// `server.queue`, `server.steal` and `server.steering`: what the default `queue` policy
    /// reads; other policies bring their own queues.
    pub queue: QueueMode,
    pub steal: bool,
    pub steering: Steering,
    pub seed: u64,
}

impl SchedEnv {
    /// The environment of `sc`'s queueing policy on a node whose seed is `seed`.
    pub fn of(sc: &Scenario, seed: u64) -> Self {
        let types = sc
            .workload
            .types
            .iter()
            .map(|t| TypeInfo {
                name: t.name.clone(),
                ratio: t.ratio,
                mean_us: match t.service {
                    crate::scenario::Dist::Empirical { .. } => None,
                    _ => crate::dist::Sampler::build(&t.service, std::path::Path::new("."), "").ok().map(|s| s.mean_us()),
                },
            })
            .collect();
        Self {
            workers: crate::sched::worker_cores(sc),
            types,
            quantum: sc.server.preemption.build().quantum,
            dispatcher: sc.server.dispatcher.is_some(),
            queue: sc.server.queue,
            steal: sc.server.steal,
            steering: sc.server.steering,
            seed,
        }
    }

    /// The stream the built-in policies have always drawn from under `name` ("steal",
    /// "steering"), so that results stay those of the published runs; new policies use
    /// [`SchedEnv::stream`].
    pub fn legacy_stream(&self, name: &str) -> Stream {
        stream(self.seed, name)
    }

    /// The random stream `name` of this policy (see [`AllocEnv::stream`]).
    pub fn stream(&self, name: &str) -> Stream {
        stream(self.seed, &format!("policy.sched.{name}"))
    }
}
