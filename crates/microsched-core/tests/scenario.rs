//! The scenario loader: every error names the field at fault; overrides and both formats work.

use std::path::Path;

use microsched_core::dist::Sampler;
use microsched_core::scenario::{json_schema, Format, Scenario};
use microsched_core::ScenarioError;

const BASE: &str = r#"
    duration_ms = 10
    [server]
    max_cores = 4
    [load]
    fraction = 0.5
    [[workload.types]]
    name = "a"
    service = { dist = "exponential", mean_us = 10 }
"#;

fn load(text: &str, overrides: &[&str]) -> Result<Scenario, ScenarioError> {
    load_in(text, overrides, Path::new("."))
}

fn load_in(text: &str, overrides: &[&str], dir: &Path) -> Result<Scenario, ScenarioError> {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    Scenario::load(text, Format::Toml, dir, &o).map(|l| l.scenario)
}

fn field_of(text: &str, overrides: &[&str]) -> String {
    load(text, overrides).expect_err("must be rejected").field
}

#[test]
fn defaults_fill_in() {
    let s = load(BASE, &[]).unwrap();
    assert_eq!(s.seed, 1);
    assert_eq!(s.clients.sessions, 100);
    assert_eq!(s.network.rtt_us, 10.0);
    assert_eq!(s.slo_us(Path::new(".")).unwrap(), 200.0, "10 × (10 µs + 10 µs RTT)");
    assert!((s.capacity_rps(Path::new(".")).unwrap() - 400_000.0).abs() < 1e-6);
}

#[test]
fn unknown_fields_are_named_at_every_depth() {
    let e = load(&format!("bogus = 1\n{BASE}"), &[]).unwrap_err();
    assert!(e.message.contains("unknown field `bogus`"), "{e}");
    // The path names the key itself, also inside internally tagged tables (where serde
    // reports only the table, the loader finds the key).
    for (set, path) in [
        (vec!["server.bogus=1"], "server.bogus"),
        (vec!["policy.allocator.kind=\"shenango\"", "policy.allocator.bogus=1"], "policy.allocator.bogus"),
        (vec!["workload.types=[{name=\"a\", service={dist=\"constant\", value_us=1, bogus=2}}]"], "workload.types[0].service.bogus"),
    ] {
        let e = load(BASE, &set).unwrap_err();
        assert_eq!(e.field, path, "{set:?}");
        assert!(e.message.contains("`bogus`"), "{e}");
    }
}

#[test]
fn switching_kind_by_override_drops_the_old_kinds_parameters() {
    let file = format!("{BASE}\n[policy.allocator]\nkind = \"shenango\"\nmin_passes = 8\n");
    let s = load(&file, &["policy.allocator.kind=caladan", "policy.allocator.poll_us=10"]).unwrap();
    let a = serde_json::to_value(&s.policy.allocator).unwrap();
    assert_eq!(a["kind"], "caladan");
    assert_eq!(a["poll_us"], 10.0);
    assert!(a.get("min_passes").is_none());
    // Same kind: parameters kept.
    let s = load(&file, &["policy.allocator.kind=shenango"]).unwrap();
    assert_eq!(serde_json::to_value(&s.policy.allocator).unwrap()["min_passes"], 8);
}

#[test]
fn a_flag_may_be_set_to_its_default_explicitly() {
    // The loader compares the input with the scenario as re-serialised: a flag left out of that
    // when false used to be reported as an unknown field.
    for set in ["clients.retry_timeouts=false", "clients.first_request_only=false"] {
        load(BASE, &[set]).unwrap_or_else(|e| panic!("{set}: {e}"));
    }
    assert!(load(BASE, &["clients.first_request_only=true"]).unwrap().clients.first_request_only);
}

#[test]
fn keys_of_field_less_variants_are_rejected_too() {
    for (set, path) in [
        ("policy.allocator.poll_us=5", "policy.allocator.poll_us"),
        ("policy.overload.target_us=5", "policy.overload.target_us"),
    ] {
        let kind = if path.contains("allocator") { "policy.allocator.kind=static" } else { "policy.overload.kind=none" };
        let e = load(BASE, &[kind, set]).unwrap_err();
        let key = path.rsplit('.').next().unwrap();
        let table = &path[..path.len() - key.len() - 1];
        assert!(e.field == path || e.field == table, "{set}: {e}");
        assert!(e.to_string().contains(key), "{e}");
    }
}

#[test]
fn bad_values_name_the_field() {
    for (set, field) in [
        ("server.max_cores=0", "server.max_cores"),
        ("duration_ms=-1", "duration_ms"),
        ("duration_ms=0", "duration_ms"),
        ("warmup_ms=-5", "warmup_ms"),
        ("network.rtt_us=-1", "network.rtt_us"),
        ("clients.sessions=0", "clients.sessions"),
        ("load.rps=1000", "load"),
        ("metrics.sample_interval_us=0", "metrics.sample_interval_us"),
        ("server.queue=\"fifo\"", "server.queue"),
    ] {
        assert_eq!(field_of(BASE, &[set]), field, "{set}");
    }
}

#[test]
fn bimodal_probabilities_must_sum_to_one() {
    let e = load(BASE, &["workload.types=[{name=\"b\", service={dist=\"bimodal\", modes=[{value_us=1, prob=0.5},{value_us=2, prob=0.4}]}}]"])
        .unwrap_err();
    assert_eq!(e.field, "workload.types[0].service.modes");
    assert!(e.message.contains("sum to 0.9"), "{e}");
}

#[test]
fn load_schedule_must_increase() {
    let e = load(BASE, &["load.schedule=[{at_ms=5, fraction=0.1},{at_ms=5, fraction=0.2}]"]).unwrap_err();
    assert_eq!(e.field, "load.schedule[1].at_ms");
}

/// Removed when the guard drops, also when the test fails.
fn temp_dir(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new().prefix(&format!("microsched-scenario-{name}-")).tempdir().unwrap()
}

#[test]
fn empirical_csv_is_read_with_or_without_header() {
    let guard = temp_dir("csv");
    let d = guard.path().to_path_buf();
    std::fs::write(d.join("plain.csv"), "1.0\n3.0\n").unwrap();
    std::fs::write(d.join("named.csv"), "id,svc_us\n1,2.0\n2,4.0\n").unwrap();
    std::fs::write(d.join("bad.csv"), "svc\n1.0\nabc\n").unwrap();
    let emp = |file: &str, col: &str| {
        format!("workload.types=[{{name=\"e\", service={{dist=\"empirical\", csv=\"{file}\"{col}}}}}]")
    };
    let s = load_in(BASE, &[&emp("plain.csv", "")], &d).unwrap();
    assert_eq!(s.mean_service_us(&d).unwrap(), 2.0);
    let s = load_in(BASE, &[&emp("named.csv", ", column=\"svc_us\"")], &d).unwrap();
    assert_eq!(s.mean_service_us(&d).unwrap(), 3.0);
    let e = load_in(BASE, &[&emp("bad.csv", "")], &d).unwrap_err();
    assert_eq!(e.field, "workload.types[0].service.csv");
    assert!(e.message.contains("line 3"), "{e}");
    let e = load_in(BASE, &[&emp("missing.csv", "")], &d).unwrap_err();
    assert!(e.message.contains("cannot read"), "{e}");
    let e = load_in(BASE, &[&emp("named.csv", ", column=\"nope\"")], &d).unwrap_err();
    assert!(e.message.contains("column `nope`"), "{e}");
}

#[test]
fn json_and_toml_give_the_same_scenario() {
    let t = load(BASE, &[]).unwrap();
    let json = serde_json::to_string(&t).unwrap();
    let j = Scenario::load(&json, Format::Json, Path::new("."), &[]).unwrap().scenario;
    assert_eq!(serde_json::to_value(&t).unwrap(), serde_json::to_value(&j).unwrap());
}

#[test]
fn overrides_reach_nested_tables_and_reject_bad_syntax() {
    let s = load(BASE, &["policy.allocator.kind=caladan", "policy.allocator.poll_us=10"]).unwrap();
    assert_eq!(
        serde_json::to_value(&s.policy.allocator).unwrap()["poll_us"],
        serde_json::json!(10.0)
    );
    assert_eq!(field_of(BASE, &["no_equals_sign"]), "--set");
    assert_eq!(field_of(BASE, &["a..b=1"]), "--set");
    assert_eq!(field_of(BASE, &["duration_ms.x=1"]), "duration_ms");
}

#[test]
fn overrides_index_lists_by_position() {
    use microsched_core::scenario::Dist;
    let s = load(BASE, &["workload.types.0.service.mean_us=50"]).unwrap();
    assert!(matches!(s.workload.types[0].service, Dist::Exponential { mean_us } if mean_us == 50.0));
    // Switching the distribution drops the old one's parameters, as switching a policy's kind.
    let s = load(BASE, &["workload.types.0.service.dist=constant", "workload.types.0.service.value_us=3"]).unwrap();
    assert!(matches!(s.workload.types[0].service, Dist::Constant { value_us } if value_us == 3.0));
    // A whole entry can be replaced.
    let s = load(BASE, &["workload.types.0={name=\"b\", service={dist=\"constant\", value_us=1}}"]).unwrap();
    assert_eq!(s.workload.types[0].name, "b");
    let e = load(BASE, &["workload.types.1.service.mean_us=5"]).unwrap_err();
    assert_eq!(e.field, "workload.types");
    assert!(e.message.contains("has 1 entries") && e.message.contains("out of range"), "{e}");
    let e = load(BASE, &["workload.types.first.service.mean_us=5"]).unwrap_err();
    assert_eq!(e.field, "workload.types");
    assert!(e.message.contains("is a list") && e.message.contains("workload.types.0"), "{e}");
}

#[test]
fn samplers_have_the_configured_means() {
    // 200 k draws: the sample mean's standard error is mean·cv/sqrt(n) (cv = 1 exponential, ≈ 0.53
    // lognormal σ = 0.5): 5 standard errors ≈ 1.1 % and 0.6 %.
    use rand::SeedableRng;
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    let s = load(BASE, &[]).unwrap();
    let exp = Sampler::build(&s.workload.types[0].service, Path::new("."), "x").unwrap();
    let n = 200_000;
    let m = (0..n).map(|_| exp.sample(&mut rng) as f64).sum::<f64>() / n as f64;
    assert!((m - 10_000.0).abs() < 5.0 * 10_000.0 / (n as f64).sqrt(), "{m}");
    let s = load(BASE, &["workload.types=[{name=\"l\", service={dist=\"lognormal\", mean_us=4, sigma=0.5}}]"]).unwrap();
    let ln = Sampler::build(&s.workload.types[0].service, Path::new("."), "x").unwrap();
    let m = (0..n).map(|_| ln.sample(&mut rng) as f64).sum::<f64>() / n as f64;
    let sd = 4_000.0 * ((0.25f64).exp() - 1.0).sqrt();
    assert!((m - 4_000.0).abs() < 5.0 * sd / (n as f64).sqrt(), "{m}");
}

#[test]
fn schema_is_json_and_names_the_sections() {
    let v: serde_json::Value = serde_json::from_str(&json_schema()).unwrap();
    let props = &v["properties"];
    for k in ["server", "network", "clients", "load", "workload", "policy", "metrics", "duration_ms"] {
        assert!(props.get(k).is_some(), "{k}");
    }
}

#[test]
fn clients_burst_takes_off_or_credits_and_needs_credits() {
    let bw = "policy.overload.kind=\"breakwater\"";
    assert_eq!(load(BASE, &[]).unwrap().clients.burst, microsched_core::scenario::ClientBurst::Off, "off by default");
    load(BASE, &[bw, "clients.burst=\"off\""]).unwrap();
    let s = load(BASE, &[bw, "clients.burst=\"credits\""]).unwrap();
    assert_eq!(s.clients.burst, microsched_core::scenario::ClientBurst::Credits);
    // A value it does not know: the field and the allowed values.
    let e = load(BASE, &[bw, "clients.burst=\"always\""]).unwrap_err();
    assert!(e.to_string().contains("clients.burst") && e.to_string().contains("credits") && e.to_string().contains("off"), "{e}");
    // Bursts of credits need a controller that issues credits.
    for kind in ["none", "seda"] {
        let e = load(BASE, &[&format!("policy.overload.kind=\"{kind}\""), "clients.burst=\"credits\""]).unwrap_err();
        assert_eq!(e.field, "clients.burst", "{kind}: {e}");
        assert!(e.message.contains("credit-based policy.overload"), "{kind}: {e}");
    }
}

/// A producer and a consumer over condvar `cv` (lock `q`, declared after a 4-lock family so the
/// condvar's mutex id is 4).
const CONDVAR: &str = r#"
    duration_ms = 10
    [server]
    max_cores = 2
    [load]
    rps = 1000
    [[workload.locks]]
    name = "fam"
    count = 4
    [[workload.locks]]
    name = "q"
    [[workload.condvars]]
    name = "cv"
    lock = "q"
    [[workload.types]]
    name = "produce"
    service = { dist = "constant", value_us = 10 }
    paths = [{ steps = [{ op = "signal", condvar = "cv", share = 0.5 }, { op = "compute", share = 0.5 }] }]
    [[workload.types]]
    name = "consume"
    service = { dist = "constant", value_us = 10 }
    paths = [{ steps = [{ op = "wait", condvar = "cv", time = { dist = "constant", value_us = 3 } }] }]
"#;

/// `signal` compiles to Acquire, Compute, Signal, Release and `wait` to Acquire, Wait, Compute,
/// Release on the condvar's own mutex; their work counts in the request's total; ids shift with
/// an application's bases.
#[test]
fn condvar_steps_compile_to_lock_framed_ops() {
    use microsched_core::program::{Op, Programs};
    let sc = load(CONDVAR, &[]).unwrap();
    let mut p = Programs::new(&sc.workload, Path::new("."), 1).unwrap();
    assert_eq!(p.condvars().collect::<Vec<_>>(), vec![("cv", 4)]);
    let mut ops = Vec::new();
    assert_eq!(p.draw(0, 10_000, &mut ops), 10_000);
    assert_eq!(ops, vec![Op::Acquire(4), Op::Compute(5_000), Op::Signal(0), Op::Release(4), Op::Compute(5_000)]);
    ops.clear();
    assert_eq!(p.draw(1, 10_000, &mut ops), 3_000);
    assert_eq!(ops, vec![Op::Acquire(4), Op::Wait { cv: 0, mutex: 4 }, Op::Compute(3_000), Op::Release(4)]);
    let mut w = ops[1];
    w.offset(10, 2);
    assert_eq!(w, Op::Wait { cv: 2, mutex: 14 });
    let mut s = Op::Signal(1);
    s.offset(10, 2);
    assert_eq!(s, Op::Signal(3));
}

/// Condvar declarations: the lock must exist and be one blocking mutex, names are unique, a
/// step names a declared condvar, and a condvar waited on must be signalled (and vice versa).
#[test]
fn condvar_errors_name_the_field_and_the_choices() {
    let cases: [(&[&str], &str, &str); 6] = [
        (&["workload.condvars.0.lock=\"fam\""], "workload.condvars[0].lock", "count = 1"),
        (&["workload.condvars.0.lock=\"zz\""], "workload.condvars[0].lock", "declared: fam, q"),
        (&["workload.locks.1.spin=true"], "workload.condvars[0].lock", "spin = false"),
        (&["workload.condvars.0.name=\"\""], "workload.condvars[0].name", "must not be empty"),
        (&["workload.types.1.paths.0.steps.0.condvar=\"other\""], "workload.types[1].paths[0].steps[0].condvar", "declared: cv"),
        (&["workload.types.0.paths.0.steps.0={op=\"compute\"}"], "workload.types[1].paths[0].steps[0].condvar", "no step signals it"),
    ];
    for (over, field, says) in cases {
        let e = load(CONDVAR, over).unwrap_err();
        assert_eq!(e.field, field, "{over:?}: {e}");
        assert!(e.message.contains(says), "{over:?}: {e}");
    }
    let e = load(CONDVAR, &["workload.types.0.paths.0.steps.0.op=\"sig\""]).unwrap_err();
    assert!(e.to_string().contains("signal") && e.to_string().contains("wait"), "the allowed ops are listed: {e}");
    // The runtime indexes a table by condvar id: more than it holds is refused by name.
    let extra: String = (0..microsched_core::program::MAX_CONDVARS).map(|i| format!("[[workload.condvars]]\nname = \"x{i}\"\nlock = \"q\"\n")).collect();
    let e = load(&format!("{CONDVAR}\n{extra}"), &[]).unwrap_err();
    assert_eq!(e.field, "workload.condvars", "{e}");
    assert!(e.message.contains("at most 65536") && e.message.contains("65537 declared"), "{e}");
}
