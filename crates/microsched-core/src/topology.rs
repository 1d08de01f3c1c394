//! Several applications and several server nodes in one scenario.
//!
//! The scenario's top-level `workload`, `load`, `clients` and `slo_us` are its first
//! application (so every single-application scenario keeps its meaning); `[[applications]]`
//! adds co-tenant applications, each with its own workload, load, clients and results, served by
//! the same cores and queues. `server.replicas` runs that many identical server nodes (each with
//! its own cores, queues, locks, core allocator and credit controller); a client session talks
//! to one of them (`clients.replica_choice`) and may resend a request answered with a failure
//! (an AQM drop) to the next replica (`clients.retries`), as Protego's clients do.
//! `server.per_application_cores` instead gives each application a node of its own (its core
//! set, queues and allocator): HarvestContainers' several Primaries, each on its own cpuset.

use std::path::Path;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::scenario::{positive, Clients, Load, Scenario, Workload};
use crate::ScenarioError;

/// A co-tenant application.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplicationCfg {
    /// The application's name, as per-application statistics report it.
    pub name: String,
    /// Its request mix (fields as the top-level `workload`).
    pub workload: Workload,
    /// Its offered load (fields as the top-level `load`).
    pub load: Load,
    /// Its clients (fields as the top-level `clients`).
    #[serde(default)]
    pub clients: Clients,
    /// Its latency objective for goodput; default 10 × (its mean service time + RTT).
    #[serde(default)]
    pub slo_us: Option<f64>,
    /// Its own core allocator, with `server.per_application_cores` (default: `policy.allocator`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allocator: Option<crate::scenario::AllocatorCfg>,
}

/// Which replica a client session talks to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ReplicaChoice {
    /// Sessions hashed over the replicas.
    #[default]
    Hash,
    /// Every session to the first replica; the others only see retries.
    Primary,
}

/// One application as the drivers see it: the first from the top-level keys, the others from
/// `[[applications]]`. `stream_prefix` keeps the first application's random streams named as
/// they always were.
#[derive(Debug, Clone)]
pub struct AppView<'a> {
    pub name: &'a str,
    pub workload: &'a Workload,
    pub load: &'a Load,
    pub clients: &'a Clients,
    pub slo_us: Option<f64>,
    pub stream_prefix: String,
    /// Dotted path of its table in the scenario, for errors ("" for the first).
    pub field: String,
}

impl Scenario {
    /// Every application of the scenario, the first (top-level keys) first.
    pub fn apps(&self) -> Vec<AppView<'_>> {
        let mut out = vec![AppView {
            name: &self.name,
            workload: &self.workload,
            load: &self.load,
            clients: &self.clients,
            slo_us: self.slo_us,
            stream_prefix: String::new(),
            field: String::new(),
        }];
        for (i, a) in self.applications.iter().enumerate() {
            out.push(AppView {
                name: &a.name,
                workload: &a.workload,
                load: &a.load,
                clients: &a.clients,
                slo_us: a.slo_us,
                stream_prefix: format!("app{}.", i + 1),
                field: format!("applications[{i}]."),
            });
        }
        out
    }

    /// Mean CPU work of an application's request, in µs.
    pub fn app_mean_service_us(&self, app: &AppView, base_dir: &Path) -> Result<f64, ScenarioError> {
        let total: f64 = app.workload.types.iter().map(|t| t.ratio).sum();
        let mut mean = 0.0;
        for (i, t) in app.workload.types.iter().enumerate() {
            let field = format!("{}workload.types[{i}].service", app.field);
            let service = crate::dist::Sampler::build(&t.service, base_dir, &field)?.mean_us();
            mean += t.ratio / total * crate::program::mean_work_us(&t.paths, service, base_dir)?;
        }
        Ok(mean)
    }

    /// Requests per second that load 1.0 of an application stands for: the server's worker
    /// cores / the application's mean work (as if it had the server to itself).
    pub fn app_capacity_rps(&self, app: &AppView, base_dir: &Path) -> Result<f64, ScenarioError> {
        Ok(crate::sched::worker_cores(self) as f64 / (self.app_mean_service_us(app, base_dir)? * 1e-6))
    }

    /// An application's goodput SLO in µs.
    pub fn app_slo_us(&self, app: &AppView, base_dir: &Path) -> Result<f64, ScenarioError> {
        match app.slo_us {
            Some(v) => Ok(v),
            None => Ok(10.0 * (self.app_mean_service_us(app, base_dir)? + self.network.rtt_us)),
        }
    }
}

impl Scenario {
    /// Server nodes of the run: one per application with `server.per_application_cores`, else
    /// the replicas.
    pub fn node_count(&self) -> u32 {
        if self.server.per_application_cores {
            1 + self.applications.len() as u32
        } else {
            self.server.replicas
        }
    }

    /// The core allocator of node `index`: its application's own with per-application cores.
    pub fn node_allocator(&self, index: usize) -> &crate::scenario::AllocatorCfg {
        match index.checked_sub(1).and_then(|i| self.applications.get(i)) {
            Some(a) if self.server.per_application_cores => a.allocator.as_ref().unwrap_or(&self.policy.allocator),
            _ => &self.policy.allocator,
        }
    }
}

/// Checks the applications after the first and the replica settings.
pub fn validate(sc: &Scenario, base_dir: &Path) -> Result<(), ScenarioError> {
    if sc.server.replicas == 0 || sc.server.replicas > 64 {
        return Err(ScenarioError::new("server.replicas", format!("{} is not allowed: use 1..=64", sc.server.replicas)));
    }
    for (i, a) in sc.applications.iter().enumerate() {
        let f = format!("applications[{i}]");
        if a.name.is_empty() {
            return Err(ScenarioError::new(format!("{f}.name"), "must not be empty"));
        }
        if a.name == sc.name || sc.applications[..i].iter().any(|o| o.name == a.name) {
            return Err(ScenarioError::new(format!("{f}.name"), format!("`{}` names another application too", a.name)));
        }
        crate::scenario::validate_workload(&a.workload, &format!("{f}."), base_dir)?;
        crate::scenario::validate_load(&a.load, &format!("{f}.load"))?;
        crate::scenario::validate_clients(&a.clients, &format!("{f}.clients"))?;
        if let Some(v) = a.slo_us {
            positive(&format!("{f}.slo_us"), v)?;
        }
        if let Some(c) = &a.allocator {
            if !sc.server.per_application_cores {
                return Err(ScenarioError::new(format!("{f}.allocator"), "needs server.per_application_cores = true (else the applications share one node's cores)"));
            }
            crate::alloc::validate(c, &format!("{f}.allocator"))?;
        }
    }
    if sc.server.per_application_cores {
        // A retry goes to the next node, which would be another application's cores.
        for a in sc.apps() {
            if a.clients.retries > 0 {
                return Err(ScenarioError::new(format!("{}clients.retries", a.field), "must be 0 with server.per_application_cores (a retry would reach another application's cores)"));
            }
        }
    }
    if sc.server.per_application_cores && sc.server.replicas != 1 {
        return Err(ScenarioError::new("server.replicas", format!("{} is not allowed with server.per_application_cores: use 1 (each application gets one node)", sc.server.replicas)));
    }
    Ok(())
}
