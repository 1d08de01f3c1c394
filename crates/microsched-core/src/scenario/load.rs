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
                    ScenarioError::new("scenario", format!("invalid TOML{}: {}", toml_position(text, &e), e.message()))
                })?;
                // JSON has no NaN or infinity: serde_json would turn them into `null`, i.e.
                // "unset", silently. Refuse them here, while the TOML tree still holds them.
                reject_non_finite_toml(&v, "")?;
                serde_json::to_value(v)
                    .map_err(|e| ScenarioError::new("scenario", e.to_string()))?
            }
            Format::Json => {
                let v = serde_json::from_str(text)
                    .map_err(|e| ScenarioError::new("scenario", format!("invalid JSON: {e}")))?;
                reject_non_finite_json(&v, "")?;
                v
            }
        };
        for o in overrides {
            apply_override(&mut tree, o)?;
        }
        let mut scenario: Scenario = deserialize(&tree)?;
        scenario.resolve_python_policies(base_dir);
        // serde ignores extra keys in a field-less tagged variant (`kind = "static"`); comparing
        // the input with what was understood catches those, and any other quirk, generically.
        let understood = serde_json::to_value(&scenario).expect("scenario serialises");
        reject_unread_keys(&tree, &understood, "")?;
        scenario.validate(base_dir)?;
        super::limits::check_times(&understood, "")?;
        scenario.fill_python_params()?;
        Ok(Loaded {
            scenario,
            base_dir: base_dir.to_path_buf(),
        })
    }
}

impl Scenario {
    /// Makes the file paths of Python policies absolute (relative to the scenario's folder), so
    /// that the validated scenario names the same files wherever it runs.
    fn resolve_python_policies(&mut self, base_dir: &Path) {
        let allocators = std::iter::once(&mut self.policy.allocator).chain(self.applications.iter_mut().filter_map(|a| a.allocator.as_mut()));
        for a in allocators {
            if let crate::alloc::AllocatorCfg::Python(p) = a {
                p.resolve(base_dir);
            }
        }
        if let crate::overload::OverloadCfg::Python(p) = &mut self.policy.overload {
            p.resolve(base_dir);
        }
        if let crate::sched::SchedCfg::Python(p) = &mut self.policy.sched {
            p.resolve(base_dir);
        }
    }
}

impl Scenario {
    /// Writes the parameters of each Python policy with its class's defaults filled in, so that
    /// `microsched validate` shows, and results record, every value the policy ran with.
    fn fill_python_params(&mut self) -> Result<(), ScenarioError> {
        use crate::plugin::{python_bridge, PolicyKind};
        let fill = |p: &mut crate::plugin::PythonPolicy, kind: PolicyKind| -> Result<(), ScenarioError> {
            p.params = python_bridge(kind.field())?.validate(kind, p, kind.field())?;
            Ok(())
        };
        let allocators = std::iter::once(&mut self.policy.allocator).chain(self.applications.iter_mut().filter_map(|a| a.allocator.as_mut()));
        for a in allocators {
            if let crate::alloc::AllocatorCfg::Python(p) = a {
                fill(p, PolicyKind::Allocator)?;
            }
        }
        if let crate::overload::OverloadCfg::Python(p) = &mut self.policy.overload {
            fill(p, PolicyKind::Overload)?;
        }
        if let crate::sched::SchedCfg::Python(p) = &mut self.policy.sched {
            fill(p, PolicyKind::Sched)?;
        }
        Ok(())
    }
}

/// Deserialises the value tree; the error names the dotted path of the field at fault.
fn deserialize(tree: &serde_json::Value) -> Result<Scenario, ScenarioError> {
    let fail = |tree: &serde_json::Value| serde_path_to_error::deserialize::<_, Scenario>(tree).err();
    let Some(e) = fail(tree) else {
        return Ok(serde_path_to_error::deserialize(tree).expect("checked: deserialises"));
    };
    let mut path = e.path().to_string();
    if path == "." {
        path.clear();
    }
    let message = e.into_inner().to_string();
    // Internally tagged enums (`kind = ...`, `dist = ...`, `op = ...`) buffer their table, so
    // serde reports the table, not the key inside it. Find the key by elimination: without the
    // culprit the error goes away or changes (to "missing field", say); without any other key
    // it stays the same (serde reports a bad value before it looks for missing fields).
    let same = |t: &serde_json::Value| {
        fail(t).is_some_and(|e| {
            let p = e.path().to_string();
            (p == path || (p == "." && path.is_empty())) && e.into_inner().to_string() == message
        })
    };
    let mut at = pointer_parts(&path);
    // A missing field is found after the table's keys are read: eliminating a key would only
    // swap one missing field for another.
    let missing = message.starts_with("missing field");
    if !missing {
        'descend: loop {
            let node = pointer(tree, &at).cloned();
            let children: Vec<String> = match &node {
                Some(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
                Some(serde_json::Value::Array(a)) => (0..a.len()).map(|i| i.to_string()).collect(),
                _ => break,
            };
            for child in children {
                if matches!(child.as_str(), "kind" | "dist" | "op") {
                    continue;
                }
                let mut t = tree.clone();
                let culprit = match pointer_mut(&mut t, &at) {
                    Some(serde_json::Value::Object(m)) => {
                        m.remove(&child);
                        !same(&t)
                    }
                    // A list element is the culprit if the list holding it alone fails the same way
                    // (blanking another element would make an error of its own).
                    Some(serde_json::Value::Array(a)) => {
                        let i: usize = child.parse().expect("an index");
                        *a = vec![a[i].clone()];
                        same(&t)
                    }
                    _ => false,
                };
                if culprit {
                    at.push(child);
                    continue 'descend;
                }
            }
            break;
        }
    }
    let mut field = dotted(&at);
    let mut message = message;
    if message.starts_with("unknown variant") {
        if let Some(serde_json::Value::Object(m)) = pointer(tree, &at) {
            if let Some(tag) = ["kind", "dist", "op"].into_iter().find(|t| m.contains_key(*t)) {
                field = join(&field, tag);
            }
        }
    }
    if let Some(name) = message.strip_prefix("missing field `").and_then(|m| m.strip_suffix('`')) {
        match pointer(tree, &at) {
            // An internally tagged table given as something else reports its missing tag.
            Some(v) if !v.is_object() && !at.is_empty() => message = format!("expected a table, found {}", kind_of(v)),
            _ => {
                field = join(&field, name);
                message = "missing: this field is required".into();
            }
        }
    }
    Err(ScenarioError::new(if field.is_empty() { "scenario".into() } else { field }, message))
}

fn kind_of(v: &serde_json::Value) -> &'static str {
    match v {
        serde_json::Value::Null => "nothing",
        serde_json::Value::Bool(_) => "a boolean",
        serde_json::Value::Number(_) => "a number",
        serde_json::Value::String(_) => "a string",
        serde_json::Value::Array(_) => "a list",
        serde_json::Value::Object(_) => "a table",
    }
}

/// `a.b[2].c` → ["a", "b", "2", "c"].
fn pointer_parts(path: &str) -> Vec<String> {
    path.split(['.', '['])
        .filter(|p| !p.is_empty())
        .map(|p| p.trim_end_matches(']').to_string())
        .collect()
}

/// ["a", "b", "2", "c"] → `a.b[2].c` (list indices in brackets, as in every other message).
fn dotted(parts: &[String]) -> String {
    let mut out = String::new();
    for p in parts {
        if p.parse::<usize>().is_ok() && !out.is_empty() {
            out.push_str(&format!("[{p}]"));
        } else {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(p);
        }
    }
    out
}

fn pointer<'a>(v: &'a serde_json::Value, parts: &[String]) -> Option<&'a serde_json::Value> {
    parts.iter().try_fold(v, |v, p| match v {
        serde_json::Value::Object(m) => m.get(p),
        serde_json::Value::Array(a) => p.parse::<usize>().ok().and_then(|i| a.get(i)),
        _ => None,
    })
}

fn pointer_mut<'a>(v: &'a mut serde_json::Value, parts: &[String]) -> Option<&'a mut serde_json::Value> {
    parts.iter().try_fold(v, |v, p| match v {
        serde_json::Value::Object(m) => m.get_mut(p),
        serde_json::Value::Array(a) => p.parse::<usize>().ok().and_then(move |i| a.get_mut(i)),
        _ => None,
    })
}

fn non_finite(field: &str, what: &str) -> ScenarioError {
    ScenarioError::new(
        if field.is_empty() { "scenario" } else { field },
        format!("{what} is not allowed: NaN and infinite numbers are not accepted, use a finite number"),
    )
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// Refuses the first NaN or infinity in a TOML tree, naming its field.
fn reject_non_finite_toml(v: &toml::Value, path: &str) -> Result<(), ScenarioError> {
    match v {
        toml::Value::Float(f) if !f.is_finite() => Err(non_finite(path, &f.to_string())),
        toml::Value::Table(t) => t.iter().try_for_each(|(k, v)| reject_non_finite_toml(v, &join(path, k))),
        toml::Value::Array(a) => a.iter().enumerate().try_for_each(|(i, v)| reject_non_finite_toml(v, &format!("{path}[{i}]"))),
        _ => Ok(()),
    }
}

/// JSON cannot carry NaN or infinity; the Python front writes them as `{"$nonfinite": "NaN"}`
/// (or `"inf"`, `"-inf"`), so that they are refused here, by field, as in a TOML file.
pub const NON_FINITE_KEY: &str = "$nonfinite";

fn reject_non_finite_json(v: &serde_json::Value, path: &str) -> Result<(), ScenarioError> {
    match v {
        serde_json::Value::Object(m) => {
            if let Some(what) = m.get(NON_FINITE_KEY) {
                return Err(non_finite(path, what.as_str().unwrap_or("a non-finite number")));
            }
            m.iter().try_for_each(|(k, v)| reject_non_finite_json(v, &join(path, k)))
        }
        serde_json::Value::Array(a) => a.iter().enumerate().try_for_each(|(i, v)| reject_non_finite_json(v, &format!("{path}[{i}]"))),
        _ => Ok(()),
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
        Ok(mut t) => {
            let v = t.remove("v").expect("parsed key");
            reject_non_finite_toml(&v, key)?;
            serde_json::to_value(v).map_err(|e| ScenarioError::new(key, e.to_string()))?
        }
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

/// " at line L, column C" of a TOML syntax error (1-based, columns in characters), so the
/// user can find it; empty when the parser gives no position.
fn toml_position(text: &str, e: &toml::de::Error) -> String {
    let Some(span) = e.span() else { return String::new() };
    let before = text.get(..span.start).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().unwrap_or("").chars().count() + 1;
    format!(" at line {line}, column {column}")
}
