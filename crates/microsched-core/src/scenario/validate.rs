//! Validation of a deserialised scenario: every check names the dotted path of the field at
//! fault. Policies check their own parameters ([`crate::alloc::validate`],
//! [`crate::overload::validate`]).

use std::path::Path;

use super::{Clients, Load, Scenario, Workload};
use crate::error::ScenarioError;

impl Scenario {
    pub(super) fn validate(&self, base_dir: &Path) -> Result<(), ScenarioError> {
        positive("duration_ms", self.duration_ms)?;
        non_negative("warmup_ms", self.warmup_ms)?;
        if let Some(v) = self.slo_us {
            positive("slo_us", v)?;
        }
        let s = &self.server;
        if s.max_cores == 0 || s.max_cores > 1024 {
            return Err(ScenarioError::new(
                "server.max_cores",
                format!("{} is not allowed: use 1..=1024", s.max_cores),
            ));
        }
        non_negative("server.steal_cost_ns", s.steal_cost_ns)?;
        non_negative("server.allocation_delay_us", s.allocation_delay_us)?;
        if let Some(w) = &s.wake_latency {
            w.build(base_dir, "server.wake_latency")?;
        }
        non_negative("server.packet_cost_ns", s.packet_cost_ns)?;
        if let Some(st) = &s.stack {
            st.validate("server.stack")?;
        }
        positive("server.search_pass_ns", s.search_pass_ns)?;
        non_negative("network.rtt_us", self.network.rtt_us)?;
        non_negative("network.jitter_us", self.network.jitter_us)?;
        validate_clients(&self.clients, "clients")?;
        validate_load(&self.load, "load")?;
        validate_workload(&self.workload, "", base_dir)?;
        crate::sched::validate(self)?;
        if let Some(lc) = &self.server.lock_control {
            let mut names: Vec<&str> = self.workload.locks.iter().map(|l| l.name.as_str()).collect();
            for a in &self.applications {
                names.extend(a.workload.locks.iter().map(|l| l.name.as_str()));
            }
            lc.validate("server.lock_control", &names)?;
        }
        crate::topology::validate(self, base_dir)?;
        if let Some(irq) = &self.server.irq {
            irq.validate("server.irq", self.server.max_cores)?;
        }
        positive(
            "metrics.sample_interval_us",
            self.metrics.sample_interval_us,
        )?;
        crate::alloc::validate(&self.policy.allocator, "policy.allocator")?;
        crate::overload::validate(&self.policy.overload, "policy.overload")?;
        self.validate_bursts()?;
        self.runtime.validate()?;
        Ok(())
    }

    /// `clients.burst = "credits"` sizes a burst by the session's credits: it needs a controller
    /// that issues them, and arrivals of its own (a replayed trace fixes each request's session).
    fn validate_bursts(&self) -> Result<(), ScenarioError> {
        use super::{ClientBurst, OverloadCfg};
        for a in self.apps() {
            if a.clients.burst == ClientBurst::Off {
                continue;
            }
            let field = format!("{}clients.burst", a.field);
            if matches!(self.policy.overload, OverloadCfg::None | OverloadCfg::Seda(_)) {
                return Err(ScenarioError::new(
                    field,
                    "\"credits\" needs a credit-based policy.overload (a burst is a session's free credits); use \"off\" without one",
                ));
            }
            if a.workload.replay.is_some() {
                return Err(ScenarioError::new(field, "\"credits\" is not allowed with workload.replay (the trace fixes each request's session and time); use \"off\""));
            }
        }
        Ok(())
    }

}

/// Checks a workload whose table's dotted path is `prefix` ("" for the top level, else ending
/// in a dot): its request types and their programs.
pub(crate) fn validate_workload(w: &Workload, prefix: &str, base_dir: &Path) -> Result<(), ScenarioError> {
    let f = format!("{prefix}workload.types");
    if w.types.is_empty() {
        return Err(ScenarioError::new(f, "needs at least one request type"));
    }
    if w.types.len() > u16::MAX as usize {
        return Err(ScenarioError::new(f, "at most 65535 request types"));
    }
    for (i, t) in w.types.iter().enumerate() {
        positive(&format!("{f}[{i}].ratio"), t.ratio)?;
        crate::dist::Sampler::build(&t.service, base_dir, &format!("{f}[{i}].service"))?;
    }
    if let Some(file) = &w.replay {
        crate::replay::Replay::load(file, base_dir, &format!("{prefix}workload.replay"), w.types.len())?;
    }
    crate::program::validate(w, base_dir).map_err(|mut e| {
        e.field = format!("{prefix}{}", e.field);
        e
    })
}

/// Checks a load table whose dotted path is `field`.
pub(crate) fn validate_load(load: &Load, field: &str) -> Result<(), ScenarioError> {
    one_rate(field, load.fraction, load.rps)?;
    let mut last = -1.0;
    for (i, step) in load.schedule.iter().enumerate() {
        let f = format!("{field}.schedule[{i}]");
        non_negative(&format!("{f}.at_ms"), step.at_ms)?;
        if step.at_ms <= last {
            return Err(ScenarioError::new(
                format!("{f}.at_ms"),
                "steps must be in strictly increasing time order",
            ));
        }
        last = step.at_ms;
        one_rate(&f, step.fraction, step.rps)?;
    }
    if let Some(o) = &load.on_off {
        let f = format!("{field}.on_off");
        positive(&format!("{f}.period_ms"), o.period_ms)?;
        if !(o.duty > 0.0 && o.duty <= 1.0) {
            return Err(ScenarioError::new(format!("{f}.duty"), format!("{} is not allowed: must be in (0, 1]", o.duty)));
        }
        if !(0.0..=1.0).contains(&o.off_ratio) {
            return Err(ScenarioError::new(format!("{f}.off_ratio"), format!("{} is not allowed: must be in [0, 1]", o.off_ratio)));
        }
        non_negative(&format!("{f}.until_ms"), o.until_ms)?;
        if o.until_ms / o.period_ms > 1e6 {
            return Err(ScenarioError::new(format!("{f}.until_ms"), "at most a million periods"));
        }
    }
    Ok(())
}

/// Checks a clients table whose dotted path is `field`.
pub(crate) fn validate_clients(c: &Clients, field: &str) -> Result<(), ScenarioError> {
    if c.sessions == 0 {
        return Err(ScenarioError::new(format!("{field}.sessions"), "must be at least 1"));
    }
    if c.queue_capacity == 0 {
        return Err(ScenarioError::new(format!("{field}.queue_capacity"), "must be at least 1"));
    }
    positive(&format!("{field}.timeout_us"), c.timeout_us)?;
    if c.retries > 16 {
        return Err(ScenarioError::new(format!("{field}.retries"), format!("{} is not allowed: use 0..=16", c.retries)));
    }
    Ok(())
}

fn one_rate(field: &str, fraction: Option<f64>, rps: Option<f64>) -> Result<(), ScenarioError> {
    match (fraction, rps) {
        (Some(f), None) => non_negative(&format!("{field}.fraction"), f),
        (None, Some(r)) => non_negative(&format!("{field}.rps"), r),
        _ => Err(ScenarioError::new(
            field,
            "give exactly one of `fraction` (of capacity) and `rps`",
        )),
    }
}

pub(crate) fn positive(field: &str, v: f64) -> Result<(), ScenarioError> {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err(ScenarioError::new(
            field,
            format!("{v} is not allowed: must be a finite number > 0"),
        ))
    }
}

pub(crate) fn non_negative(field: &str, v: f64) -> Result<(), ScenarioError> {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err(ScenarioError::new(
            field,
            format!("{v} is not allowed: must be a finite number >= 0"),
        ))
    }
}

