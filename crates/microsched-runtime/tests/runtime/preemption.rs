//! Time-slice preemption on the real runtime (loopback, at most 2 workers): a timer thread
//! flags the worker whose request exceeded its quantum, the synthetic spin polls the flag and
//! suspends, and the queueing policy places the preempted request (Synergy: its wait queue).
//!
//! The single-worker tests assert orders, not durations, and enforce the order of every step
//! they rely on: the long request runs until the test releases it, and the test waits for the
//! server's live counters (the short request arrived, completed) instead of sleeping and hoping
//! (a 20 ms request against a short one sent 2 ms after it failed on a host that stalled the
//! test for longer). The load test compares two runs made back to back on the same arrivals and
//! asserts a loose, machine-independent margin.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use microsched_core::scenario::Loaded;
use microsched_runtime::handler::{Cx, Handler, Outcome, Request};
use microsched_runtime::loadgen::{self, LoadgenOpts};
use microsched_runtime::{merge, Server, ServerReport};

use crate::common;

use crate::common::{connect, live, opts, serial, wait_until};

fn load(text: &str, base: &Path, overrides: &[&str]) -> Loaded {
    common::load_in(text, base, overrides)
}

const ONE_WORKER: &str = r#"
duration_ms = 1000
[server]
max_cores = 1
[load]
rps = 1000
[runtime]
tick_us = 200
[[workload.types]]
name = "long"
service = { dist = "constant", value_us = 20000 }
[[workload.types]]
name = "short"
service = { dist = "constant", value_us = 2 }
"#;

/// The long request (type 0, declared 20 ms) computes in 50 µs steps, preemptible wherever
/// the policy makes it so, until the test releases it; the short one computes its service time.
#[derive(Default)]
struct LongUntilReleased {
    started: AtomicBool,
    release: AtomicBool,
}

impl Handler for LongUntilReleased {
    fn handle(&self, req: &Request, cx: &mut Cx) -> Outcome {
        if req.rtype == 0 {
            self.started.store(true, Ordering::SeqCst);
            while !self.release.load(Ordering::SeqCst) {
                cx.compute(50_000);
            }
        } else {
            cx.compute(req.service_ns);
        }
        Outcome::Ok
    }
}

/// The long request, then, once it has run alone for 2 ms, a 2 µs one, on one worker:
/// (completion order, report). With `preempts`, the long one is released once the short one has
/// completed (which it can only do by preempting it) and run 20 ms more; without, 20 ms after
/// the short one reached the server (nothing can complete meanwhile: the only worker runs the
/// long one).
fn long_then_short(overrides: &[&str], preempts: bool) -> ([u64; 2], ServerReport) {
    let sc = load(ONE_WORKER, Path::new("."), overrides);
    let long = Arc::new(LongUntilReleased::default());
    let server = Server::start_with(&sc, opts(false), long.clone()).expect("server starts");
    let c = connect(server.addr());
    c.send(1, 0, 20_000_000);
    wait_until("the long request runs", || long.started.load(Ordering::SeqCst));
    std::thread::sleep(Duration::from_millis(2));
    c.send(2, 1, 2_000);
    wait_until("the short request reaches the server", || live(&server, "requests") >= 2);
    if preempts {
        wait_until("the short request completes while the long one runs", || live(&server, "completed") >= 1);
    }
    std::thread::sleep(Duration::from_millis(20));
    long.release.store(true, Ordering::SeqCst);
    let order = [c.ok().0, c.ok().0];
    (order, server.stop())
}

#[test]
fn synergy_preempts_a_long_request_for_a_later_short_one() {
    let _g = serial();
    let (order, rep) = long_then_short(&["policy.sched={kind=\"synergy\"}"], true);
    assert_eq!(order, [2, 1], "the short request completes while the long one waits in the wait queue");
    assert!(rep.counter("preemptions") >= 1, "{:?}", rep.counters);
    // Conditional preemption: the long request ran ~2 ms alone; the expiries meanwhile were avoided.
    assert!(rep.counter("avoided_preemptions") >= 1, "{:?}", rep.counters);
    assert_eq!(rep.counter("coroutines"), 1, "only the long request (feedback: ≥ 10 µs) ran as a coroutine");
    assert_eq!(rep.counter("completed"), 2);
    assert_eq!(rep.queue_policy, "synergy");
}

#[test]
fn without_preemption_the_long_request_completes_first() {
    let _g = serial();
    let (order, rep) = long_then_short(&["policy.sched={kind=\"synergy\",preemption=false}"], false);
    assert_eq!(order, [1, 2]);
    assert_eq!(rep.counter("preemptions"), 0);
    assert_eq!(rep.counter("coroutines"), 0);
}

/// d-FCFS with a fixed quantum (every request preemptible, preempted at every expiry: the
/// preempted request goes to the tail of its worker's run queue, behind the short one).
#[test]
fn a_fixed_quantum_preempts_under_d_fcfs_too() {
    let _g = serial();
    let (order, rep) = long_then_short(&["server.preemption.quantum_us=50"], true);
    assert_eq!(order, [2, 1]);
    // Alone on its worker it is preempted at every expiry and resumed at once: over 22 ms /
    // 50 µs preemptions, fewer because the timer wakes late.
    assert!(rep.counter("preemptions") >= 20, "{:?}", rep.counters);
    assert_eq!(rep.counter("avoided_preemptions"), 0);
    assert_eq!(rep.counter("completed"), 2);
}

fn by_type_p999_slowdown(summary: &serde_json::Value, name: &str) -> f64 {
    summary["by_type"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["name"] == name))
        .and_then(|t| t["slowdown"]["p999"].as_f64())
        .unwrap_or_else(|| panic!("no slowdown for type {name}: {summary}"))
}

/// Real runs of the shipped `experiments/synergy/real-high.toml` with `extra` overrides, Synergy
/// with preemption and then without, on the same arrivals: per run the scenario, the merged
/// summary and the server's preemption count (every request accounted for).
fn real_high_with_and_without_preemption(extra: &[&str]) -> Vec<(Loaded, serde_json::Value, u64)> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/synergy");
    let text = std::fs::read_to_string(dir.join("real-high.toml")).expect("real-high.toml");
    ["true", "false"]
        .iter()
        .map(|preemption| {
            let o = format!("policy.sched.preemption={preemption}");
            let overrides: Vec<&str> = std::iter::once(o.as_str()).chain(extra.iter().copied()).collect();
            let sc = load(&text, &dir, &overrides);
            let server = Server::start(&sc, opts(true)).expect("server starts");
            let lo = LoadgenOpts { addr: server.addr(), more_addrs: Vec::new(), allow_remote: false, seed: None };
            let lg = loadgen::run(&sc, &lo, &|| false).expect("load generator runs");
            let rep = server.wait(|| false);
            assert!(lg.client.conserved());
            let s = merge::merge(&lg, &rep);
            (sc, s, rep.counter("preemptions"))
        })
        .collect()
}

/// `real-high.toml` (2 µs / 200 µs, 50/50), 2 s, on ONE worker at 4 k req/s (two spinning
/// workers, the load generator and the timer would oversubscribe a 2-CPU machine and measure its
/// scheduler instead). Asserted: the real server preempts (and never without preemption), every
/// request is accounted for, and the simulator on the same file cuts the short requests' p99.9
/// slowdown by ≥ 3×. The real cut is only printed here: on an idle machine it measured 1.19–1.8×
/// (p99.9 of ~4 000 short requests: a handful of samples), because a short request's real tail
/// is ~0.5–1 ms of delay outside the worker's queue (README, "Synergy in the real runtime"); the
/// next test asserts it where the long requests are long enough to stand above that.
#[test]
fn preemption_runs_for_real_and_the_simulator_cuts_the_short_requests_tail() {
    let _g = serial();
    let runs = real_high_with_and_without_preemption(&["duration_ms=2000", "warmup_ms=200", "server.max_cores=1", "load.rps=4000"]);
    let real: Vec<_> = runs.iter().map(|(_, s, n)| (by_type_p999_slowdown(s, "short"), *n, s["throughput_rps"].as_f64().unwrap())).collect();
    let sim: Vec<f64> = runs
        .iter()
        .map(|(sc, _, _)| by_type_p999_slowdown(&serde_json::to_value(microsched_sim::run(sc, None).expect("simulates").summary).unwrap(), "short"))
        .collect();
    eprintln!("real (short p99.9 slowdown, preemptions, throughput): with {:?}, without {:?}; sim: {:?}", real[0], real[1], sim);
    assert!(real[0].1 > 0 && real[1].1 == 0);
    assert!(sim[0] * 3.0 <= sim[1], "the simulator agrees in direction: {sim:?}");
}

/// The real cut, where it is large enough to stand above this machine's noise: a short request's
/// real tail carries ~0.5–1 ms of delay outside the worker's queue on an idle machine (loopback,
/// load generator, VM scheduling; several ms on a loaded one), so the long requests are made
/// 20 ms (0.5 % of requests, 20 % of the worker's time) and a short one stuck behind one waits
/// milliseconds without preemption. ONE worker at 2 k req/s, 3 s (~6 000 short requests).
///
/// Asserted on the short requests' MEAN latency, and only its direction. Without preemption
/// about a fifth of them wait behind a 20 ms request (≈ 10 ms each: a mean near 3 ms); with it
/// they do not (a mean of 0.12–0.5 ms on a quiet host). But the latency counts from the load
/// generator's schedule, and its own lag behind that schedule is host noise of up to ~10 ms here
/// (p99 1.6–6 ms in six runs) and more on a CI runner, where one run held short requests 25 ms
/// even with preemption (p99.9 25.6 against 37.1 ms without: a tail cut of only 1.45×). A tail
/// percentile of 6 000 samples is set by a handful of them, i.e. by that noise; the mean moves
/// by the noise's share of the run, and the worst pair measured here still had 2.5 against
/// 3.5 ms. Figures are printed and in the README; without preemption the p99.9 latency must also
/// be at least 2 ms (noise only raises it).
#[test]
fn preemption_cuts_the_real_short_tail_behind_long_requests() {
    let _g = serial();
    let runs = real_high_with_and_without_preemption(&[
        "duration_ms=3000",
        "warmup_ms=300",
        "server.max_cores=1",
        "load.rps=2000",
        "workload.types.0.ratio=0.995",
        "workload.types.1.ratio=0.005",
        "workload.types.1.service.value_us=20000",
    ]);
    let real: Vec<_> = runs
        .iter()
        .map(|(_, s, n)| {
            let short = s["by_type"].as_array().and_then(|a| a.iter().find(|t| t["name"] == "short")).expect("short requests");
            let latency = |key: &str| short["latency_us"][key].as_f64().unwrap_or_else(|| panic!("latency {key}: {short}"));
            (latency("mean"), latency("p999"), by_type_p999_slowdown(s, "short"), *n)
        })
        .collect();
    eprintln!(
        "real short requests behind 20 ms ones (mean µs, p99.9 µs, p99.9 slowdown, preemptions): with {:?}, without {:?}",
        real[0], real[1]
    );
    assert!(real[0].3 > 0 && real[1].3 == 0);
    assert!(real[1].1 >= 2000.0, "without preemption short requests wait behind 20 ms ones: {real:?}");
    assert!(real[0].0 < real[1].0, "preemption cuts the short requests' real mean latency: {real:?}");
}
