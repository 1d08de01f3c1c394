//! Loading a scenario: TOML or JSON text → a value tree → `--set` overrides → serde (errors
//! name the field's dotted path) → a check that every input key was understood → validation.

use std::path::{Path, PathBuf};

use super::Scenario;
use crate::error::ScenarioError;

/// How a scenario's text is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    Toml,
    Json,
}

/// A validated scenario plus the directory its relative paths are resolved against.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub scenario: Scenario,
    pub base_dir: PathBuf,
}

impl Scenario {
    /// Parses `text`, applies `--set`-style overrides (`dotted.key=value`, the value parsed as a
    /// TOML literal, else taken as a string), deserialises and validates.
    pub fn load(
        text: &str,
        format: Format,
        base_dir: &Path,
        overrides: &[String],
    ) -> Result<Loaded, ScenarioError> {
        let mut tree: serde_json::Value = match format {
            Format::Toml => {
                let v: toml::Value = toml::from_str(text).map_err(|e| {
                    ScenarioError::new("scenario", format!("invalid TOML: {}", e.message()))
                })?;
                serde_json::to_value(v)
                    .map_err(|e| ScenarioError::new("scenario", e.to_string()))?
            }
            Format::Json => serde_json::from_str(text)
                .map_err(|e| ScenarioError::new("scenario", format!("invalid JSON: {e}")))?,
        };
        for o in overrides {
            apply_override(&mut tree, o)?;
        }
        let scenario: Scenario = serde_path_to_error::deserialize(&tree).map_err(|e| {
            let path = e.path().to_string();
            let field = if path == "." || path.is_empty() {
                "scenario".to_string()
            } else {
                path
            };
            ScenarioError::new(field, e.into_inner().to_string())
        })?;
        // serde ignores extra keys in a field-less tagged variant (`kind = "static"`); comparing
        // the input with what was understood catches those, and any other quirk, generically.
        let understood = serde_json::to_value(&scenario).expect("scenario serialises");
        reject_unread_keys(&tree, &understood, "")?;
        scenario.validate(base_dir)?;
        Ok(Loaded {
            scenario,
            base_dir: base_dir.to_path_buf(),
        })
    }
}

/// Errors on the first key of `input` that `understood` (the deserialised scenario, serialised
/// back) does not have.
fn reject_unread_keys(
    input: &serde_json::Value,
    understood: &serde_json::Value,
    path: &str,
) -> Result<(), ScenarioError> {
    use serde_json::Value;
    let at = |k: &str| {
        if path.is_empty() {
            k.to_string()
        } else {
            format!("{path}.{k}")
        }
    };
    match (input, understood) {
        (Value::Object(i), Value::Object(u)) => {
            for (k, v) in i {
                match u.get(k) {
                    Some(uv) => reject_unread_keys(v, uv, &at(k))?,
                    None => {
                        let allowed: Vec<&str> = u.keys().map(String::as_str).collect();
                        return Err(ScenarioError::new(
                            at(k),
                            format!(
                                "unknown field `{k}`, expected one of `{}`",
                                allowed.join("`, `")
                            ),
                        ));
                    }
                }
            }
            Ok(())
        }
        (Value::Array(i), Value::Array(u)) => {
            for (n, (iv, uv)) in i.iter().zip(u).enumerate() {
                reject_unread_keys(iv, uv, &format!("{path}[{n}]"))?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// Applies one `dotted.key=value` override to the value tree, creating tables as needed.
fn apply_override(tree: &mut serde_json::Value, spec: &str) -> Result<(), ScenarioError> {
    let (key, raw) = spec.split_once('=').ok_or_else(|| {
        ScenarioError::new(
            "--set",
            format!("`{spec}` is not of the form dotted.key=value"),
        )
    })?;
    let key = key.trim();
    if key.is_empty() || key.split('.').any(|p| p.is_empty()) {
        return Err(ScenarioError::new(
            "--set",
            format!("`{key}` is not a dotted key"),
        ));
    }
    let raw = raw.trim();
    let value: serde_json::Value = match toml::from_str::<toml::Table>(&format!("v = {raw}")) {
        Ok(mut t) => serde_json::to_value(t.remove("v").expect("parsed key"))
            .map_err(|e| ScenarioError::new(key, e.to_string()))?,
        Err(_) => serde_json::Value::String(raw.to_string()),
    };
    let mut node = tree;
    let parts: Vec<&str> = key.split('.').collect();
    for (i, part) in parts.iter().enumerate() {
        let last = i + 1 == parts.len();
        // A list (`[[workload.types]]`, `load.schedule`) is indexed by position:
        // `workload.types.0.service.mean_us=50`.
        if node.is_array() {
            let list = node.as_array_mut().expect("checked: a list");
            let len = list.len();
            let at = parts[..i].join(".");
            let n: usize = part.parse().map_err(|_| {
                ScenarioError::new(
                    &at,
                    format!("is a list: index it by position (0..{len}), e.g. `{at}.0`, not `{part}`"),
                )
            })?;
            let slot = list.get_mut(n).ok_or_else(|| {
                ScenarioError::new(&at, format!("has {len} entries: index {n} is out of range (0..{len})"))
            })?;
            if last {
                *slot = value;
                return Ok(());
            }
            node = slot;
            continue;
        }
        let obj = node.as_object_mut().ok_or_else(|| {
            ScenarioError::new(parts[..i].join("."), "is not a table, cannot set a key inside it")
        })?;
        if last {
            // Switching a policy's kind drops the old kind's parameters: `--set
            // policy.allocator.kind=caladan` on a Shenango scenario means Caladan with its
            // defaults (plus any later overrides), not Caladan with Shenango's leftover keys.
            // The same for a service distribution's `dist`.
            if (*part == "kind" || *part == "dist") && obj.get(*part).is_some_and(|old| *old != value) {
                obj.clear();
            }
            obj.insert(part.to_string(), value);
            return Ok(());
        }
        node = obj.entry(part.to_string()).or_insert_with(|| serde_json::Value::Object(Default::default()));
    }
    unreachable!("a dotted key has at least one part")
}

/// The JSON Schema of a scenario.
pub fn json_schema() -> String {
    serde_json::to_string_pretty(&schemars::schema_for!(Scenario)).expect("schema serialises")
}
