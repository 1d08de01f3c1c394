//! The agent's options as one JSON object (what the Python CLI passes), checked with errors
//! that name the option.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use crate::agent::{Activity, Opts, PrimaryOpt};
use crate::cpus::parse_list;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PrimaryJson {
    #[serde(default)]
    pids: Vec<i32>,
    cpus: String,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct OptsJson {
    #[serde(default)]
    primaries: Vec<PrimaryJson>,
    #[serde(default)]
    secondaries: Vec<i32>,
    #[serde(default)]
    secondary_cores: String,
    #[serde(default)]
    controller: Option<serde_json::Value>,
    #[serde(default)]
    poll_ms: Option<f64>,
    #[serde(default)]
    activity: Option<String>,
    #[serde(default)]
    busy_fraction: Option<f64>,
    #[serde(default)]
    listen: Option<String>,
    #[serde(default)]
    cgroup_root: Option<String>,
    #[serde(default)]
    cpuset: Option<bool>,
    #[serde(default)]
    irqs: Vec<u32>,
    #[serde(default)]
    duration_s: Option<f64>,
    #[serde(default)]
    status_every_s: Option<f64>,
    #[serde(default)]
    state_file: Option<String>,
}

fn secs(v: f64, field: &str) -> Result<Duration, String> {
    if v.is_finite() && v > 0.0 {
        Ok(Duration::from_secs_f64(v))
    } else {
        Err(format!("{field}: {v} is not allowed: use a number > 0"))
    }
}

impl Opts {
    /// Parses the options object; errors start with the option's name.
    pub fn from_json(text: &str) -> Result<Opts, String> {
        let j: OptsJson = serde_json::from_str(text).map_err(|e| format!("options: {e}"))?;
        let mut o = Opts::default();
        for (i, p) in j.primaries.into_iter().enumerate() {
            let cpus = parse_list(&p.cpus, "--primary-cores")?;
            o.primaries.push(PrimaryOpt { pids: p.pids, cpus, name: p.name.unwrap_or_else(|| format!("primary{i}")) });
        }
        o.secondaries = j.secondaries;
        o.secondary_cores = parse_list(&j.secondary_cores, "--secondary-cores")?;
        if let Some(c) = j.controller {
            o.controller = serde_json::from_value(c).map_err(|e| format!("--controller: {e}"))?;
        }
        if let Some(p) = j.poll_ms {
            o.poll = secs(p / 1e3, "--poll-ms")?;
        }
        o.activity = match j.activity.as_deref() {
            None | Some("tasks") => Activity::Tasks,
            Some("cpu") => Activity::Cpu,
            Some(other) => return Err(format!("--activity: `{other}` is not allowed: use tasks or cpu")),
        };
        if let Some(b) = j.busy_fraction {
            o.busy_fraction = b;
        }
        if let Some(l) = j.listen {
            o.listen = Some(l.parse().map_err(|_| format!("--listen: `{l}` is not allowed: use HOST:PORT, e.g. 127.0.0.1:10101"))?);
        }
        if let Some(r) = j.cgroup_root {
            o.cgroup_root = PathBuf::from(r);
        }
        if let Some(c) = j.cpuset {
            o.cpuset = c;
        }
        o.irqs = j.irqs;
        o.duration = j.duration_s.map(|d| secs(d, "--duration")).transpose()?;
        if let Some(s) = j.status_every_s {
            o.status_every = secs(s, "--status-every")?;
        }
        o.state_file = j.state_file.filter(|s| !s.is_empty()).map(PathBuf::from);
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_errors_name_the_option() {
        let o = Opts::from_json(
            r#"{"primaries":[{"pids":[1],"cpus":"0-1"}],"secondaries":[2],"controller":{"kind":"harvest_static","buffer":1},"poll_ms":2,"listen":"127.0.0.1:0"}"#,
        )
        .unwrap();
        assert_eq!(o.primaries[0].cpus.len(), 2);
        assert_eq!(o.poll, Duration::from_millis(2));
        for (bad, field) in [
            (r#"{"poll_ms":0}"#, "--poll-ms"),
            (r#"{"activity":"x"}"#, "--activity"),
            (r#"{"primaries":[{"cpus":"1-0"}]}"#, "--primary-cores"),
            (r#"{"controller":{"kind":"nope"}}"#, "--controller"),
            (r#"{"listen":"here"}"#, "--listen"),
        ] {
            let e = Opts::from_json(bad).unwrap_err();
            assert!(e.starts_with(field), "{e}");
        }
        // A scheduling controller that is not a harvesting one is refused by name.
        let o = Opts::from_json(r#"{"controller":{"kind":"harvest_cfs"}}"#).unwrap();
        let e = crate::agent::controller_for(&o.controller, o.poll, None).unwrap_err();
        assert!(e.starts_with("--controller.kind"), "{e}");
    }
}
