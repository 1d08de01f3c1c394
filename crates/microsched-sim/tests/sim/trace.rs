//! `--trace`: a traced run writes a timeline that reads back with the run's own counts (core
//! tracks, request slices, parks, credit cuts, core time per activity), and tracing changes
//! nothing of the run's results.

use crate::common;

use std::collections::BTreeMap;

use microsched_sim::{run_traced, SimResult, Trace, TraceRequest};
use serde_json::Value;

/// Caladan at load 0.6 with per-core queues and stealing, RTT 0 so that a response reaches its
/// client the instant it leaves the server (request slices then match completions exactly).
const CALADAN: &str = r#"
    duration_ms = 20
    warmup_ms = 5
    [server]
    max_cores = 8
    queue = "per_core"
    steal = true
    allocation_delay_us = 5
    [network]
    rtt_us = 0
    [clients]
    sessions = 50
    [load]
    fraction = 0.6
    [[workload.types]]
    name = "exp"
    service = { dist = "exponential", mean_us = 10 }
    [policy.allocator]
    kind = "caladan"
    interval_us = 5
    delay_threshold_us = 5
"#;

fn traced(toml: &str, over: &[&str], window_ms: Option<(f64, f64)>, max_events: usize) -> (SimResult, Trace, Value) {
    let loaded = common::load(toml, over);
    let req = TraceRequest { window_ms, max_events };
    let (result, trace) = run_traced(&loaded, Some(3), false, &mut |_, _| true, Some(&req)).expect("runs");
    let trace = trace.expect("a trace was asked for");
    let mut out = Vec::new();
    trace.write_json(&mut out, serde_json::Map::new()).expect("writes to memory");
    let json: Value = serde_json::from_slice(&out).expect("the trace is JSON");
    (result, trace, json)
}

fn events(json: &Value) -> &Vec<Value> {
    json["traceEvents"].as_array().expect("traceEvents")
}

fn ns(v: &Value) -> u64 {
    (v.as_f64().expect("a time") * 1000.0).round() as u64
}

/// Thread names by (pid, tid).
fn threads(json: &Value) -> BTreeMap<(u64, u64), String> {
    events(json)
        .iter()
        .filter(|e| e["ph"] == "M" && e["name"] == "thread_name")
        .map(|e| ((e["pid"].as_u64().unwrap(), e["tid"].as_u64().unwrap()), e["args"]["name"].as_str().unwrap().to_string()))
        .collect()
}

fn count(json: &Value, ph: &str, name: &str) -> usize {
    events(json).iter().filter(|e| e["ph"] == ph && e["name"] == name).count()
}

fn summary_without_wall(r: &SimResult) -> Value {
    let mut v = serde_json::to_value(&r.summary).unwrap();
    v.as_object_mut().unwrap().remove("sim");
    v
}

#[test]
fn tracing_changes_nothing_of_the_results() {
    let plain = common::run(CALADAN, &[], 3);
    let (traced, _, _) = traced(CALADAN, &[], None, 1_000_000);
    assert_eq!(summary_without_wall(&plain), summary_without_wall(&traced));
    assert_eq!(plain.summary.sim.events, traced.summary.sim.events);
}

#[test]
fn a_trace_of_the_measured_window_adds_up_to_the_summary() {
    // The whole run (the summary's core time covers it), of which the measured window is from
    // 5 ms (the summary's parks and throughput cover that).
    let (r, trace, json) = traced(CALADAN, &[], Some((0.0, 25.0)), 10_000_000);
    assert_eq!(trace.window(), (0, 25_000_000));
    let measured = |e: &&Value| ns(&e["ts"]) + e["dur"].as_f64().map_or(0, |_| ns(&e["dur"])) >= 5_000_000;
    let s = &r.summary;
    assert!(json["metadata"]["microsched"]["truncated"].is_null());
    // A track per core, named as the runtime names them.
    let names = threads(&json);
    for k in 0..8 {
        assert!(names.values().any(|n| n == &format!("core {k}")), "core {k} has a track: {names:?}");
    }
    assert_eq!(names.values().filter(|n| n.starts_with("core ")).count(), s.cores.max as usize);
    // Parks and wake-ups in the window are the summary's.
    let parking = s.parking.expect("caladan parks cores");
    assert!(parking.parks > 10, "the run parks cores: {parking:?}");
    let in_window = |name: &str| events(&json).iter().filter(|e| e["ph"] == "i" && e["name"] == name).filter(measured).count() as u64;
    assert_eq!(in_window("park"), parking.parks);
    assert_eq!(in_window("wake"), parking.wakeups);
    // Core time per activity, summed over the core tracks, is the summary's to the nanosecond.
    let mut by: BTreeMap<&str, u64> = BTreeMap::new();
    for e in events(&json).iter().filter(|e| e["ph"] == "X" && e["cat"].is_null()) {
        let name = e["name"].as_str().unwrap();
        let kind = match name.split(' ').next().unwrap() {
            "request" | "busy" | "preempting" | "waiting" => "busy",
            "searching" | "stealing" => "search",
            "parked" => "parked",
            "waking" => "waking",
            other => panic!("unexpected core slice {other}"),
        };
        *by.entry(kind).or_default() += ns(&e["dur"]);
    }
    let ct = &s.core_time;
    assert_eq!(by["busy"], ct.busy_ns + ct.overhead_ns);
    assert_eq!(by["search"], ct.search_ns);
    assert_eq!(by["parked"], ct.parked_ns);
    assert_eq!(by.get("waking").copied().unwrap_or(0), ct.transition_ns);
    // One request slice per request answered in the window: with no network delay, the
    // completions the summary counts in its window (throughput × window).
    let slices = events(&json).iter().filter(|e| e["cat"] == "request").filter(measured).count() as f64;
    let completed = s.throughput_rps * 0.020;
    assert!(slices > 1000.0);
    assert!((slices - completed).abs() < 0.5, "{slices} request slices, {completed} completions in the window");
    // Every request that ran in the window shows on a core as "request N", and each slice of
    // one lies inside that request's own slice.
    let spans: BTreeMap<u64, (u64, u64)> = events(&json)
        .iter()
        .filter(|e| e["cat"] == "request")
        .map(|e| (e["args"]["request"].as_u64().unwrap(), (ns(&e["ts"]), ns(&e["ts"]) + ns(&e["dur"]))))
        .collect();
    let mut checked = 0;
    for e in events(&json).iter().filter(|e| e["ph"] == "X" && e["cat"].is_null() && e["args"]["request"].is_u64()) {
        if let Some(&(a, b)) = spans.get(&e["args"]["request"].as_u64().unwrap()) {
            let (s0, s1) = (ns(&e["ts"]), ns(&e["ts"]) + ns(&e["dur"]));
            assert!(a <= s0 && s1 <= b, "a run slice {s0}..{s1} outside its request {a}..{b}");
            checked += 1;
        }
    }
    assert!(checked > 1000);
    // Counters: cores allocated stays within 0..=max_cores and moves.
    let alloc: Vec<f64> = events(&json)
        .iter()
        .filter(|e| e["ph"] == "C" && e["name"] == "cores allocated")
        .map(|e| e["args"]["value"].as_f64().unwrap())
        .collect();
    assert!(alloc.len() > 10 && alloc.iter().all(|&v| (0.0..=8.0).contains(&v)));
}

#[test]
fn coresync_trace_shows_its_gate_and_credits() {
    let base = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments/coresync/base.toml")).unwrap();
    let (r, _, json) = traced(&base, &["warmup_ms=2", "duration_ms=10", "load.fraction=0.5"], Some((2.0, 12.0)), 10_000_000);
    let parking = r.summary.parking.expect("coresync parks cores");
    let gate = parking.gate.expect("coresync gates parks");
    assert_eq!(count(&json, "i", "park") as u64, parking.parks);
    assert_eq!(count(&json, "i", "credit cut") as u64, gate.cuts);
    assert!(gate.cuts > 0);
    let cut: u64 = events(&json).iter().filter(|e| e["name"] == "credit cut").map(|e| e["args"]["credits"].as_u64().unwrap()).sum();
    assert_eq!(cut, gate.credits_cut);
    assert!(count(&json, "C", "credit pool") > 0 && count(&json, "C", "credits issued") > 0);
    assert_eq!(threads(&json).values().filter(|n| n.starts_with("core ")).count(), 16);
}

#[test]
fn a_dispatcher_gets_its_track() {
    let toml = r#"
        duration_ms = 5
        [server]
        max_cores = 3
        [server.dispatcher]
        cost_ns = 200
        [server.preemption]
        quantum_us = 5
        [load]
        fraction = 0.6
        [[workload.types]]
        name = "long"
        service = { dist = "constant", value_us = 20 }
        [policy.allocator]
        kind = "static"
        [policy.sched]
        kind = "shinjuku"
    "#;
    let (r, _, json) = traced(toml, &[], Some((0.0, 5.0)), 1_000_000);
    assert!(threads(&json).values().any(|n| n == "dispatcher"));
    let dispatched = events(&json).iter().filter(|e| e["ph"] == "X" && e["tid"] == 0 && e["name"].as_str().unwrap().starts_with("dispatching")).count();
    let arrivals = r.summary.sched.as_ref().unwrap().dispatcher.unwrap().arrivals;
    // Dispatches that started before the run's end, against those it finished (one may be cut).
    assert!(dispatched as u64 == arrivals || dispatched as u64 == arrivals + 1, "{dispatched} vs {arrivals}");
    assert!(count(&json, "i", "preemption") as u64 == r.summary.sched.as_ref().unwrap().preemptions);
}

#[test]
fn the_size_cap_cuts_and_says_so() {
    let (_, trace, json) = traced(CALADAN, &[], None, 500);
    assert!(trace.full());
    assert_eq!(events(&json).iter().filter(|e| e["ph"] != "M").count(), 500);
    assert!(json["metadata"]["microsched"]["truncated"]["at_ms"].as_f64().unwrap() >= 5.0);
}

#[test]
fn a_window_after_the_run_is_an_error() {
    let loaded = common::load(CALADAN, &[]);
    let req = TraceRequest { window_ms: Some((30.0, 40.0)), max_events: 10 };
    let err = run_traced(&loaded, Some(3), false, &mut |_, _| true, Some(&req)).unwrap_err();
    assert!(err.to_string().starts_with("--trace-window: starts at 30 ms"), "{err}");
}
