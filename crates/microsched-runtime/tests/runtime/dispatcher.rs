//! The dispatcher thread on loopback (issue 46): Shinjuku, Concord, Tiny Quanta and DARC run on
//! the real runtime with the simulator's policy objects deciding. Each run is short (1 s of load,
//! one or two workers plus the dispatcher on a 2-CPU machine) and asserts only what holds on any
//! machine, loaded or not: every request answered, preemptions counted where the policy preempts
//! (and never where it does not), the dispatcher's work per kind as its policy routes it, its
//! utilisation reported and its blocking when idle, and DARC's class separation (a long request
//! never runs on the core reserved for the short ones).

use std::path::Path;
use std::sync::Arc;

use microsched_core::scenario::Loaded;
use microsched_runtime::handler::{Cx, Handler, Outcome, Request};
use microsched_runtime::loadgen::{self, LoadgenOpts, LoadgenResult};
use microsched_runtime::{merge, Server, ServerReport};
use parking_lot::Mutex;

use crate::common;

use crate::common::{opts, serial};

/// Short and long requests (90 / 10 %), 1 s at 1 000 req/s: about a tenth of one worker's time
/// on long requests, far below any machine's capacity.
const BASE: &str = r#"
duration_ms = 1000
warmup_ms = 100
seed = 46
[server]
max_cores = 2
dispatcher = { cost_ns = 100 }
preemption = { quantum_us = 20 }
[load]
rps = 1000
[runtime]
tick_us = 1000
[[workload.types]]
name = "short"
ratio = 0.9
service = { dist = "constant", value_us = 5 }
[[workload.types]]
name = "long"
ratio = 0.1
service = { dist = "constant", value_us = 300 }
"#;

fn scenario(overrides: &[&str]) -> Loaded {
    common::load_in(BASE, Path::new("."), overrides)
}

fn run(sc: &Loaded, handler: Option<Arc<dyn Handler>>) -> (LoadgenResult, ServerReport, serde_json::Value) {
    let server = match handler {
        Some(h) => Server::start_with(sc, opts(true), h),
        None => Server::start(sc, opts(true)),
    }
    .expect("server starts");
    let lo = LoadgenOpts { addr: server.addr(), more_addrs: Vec::new(), allow_remote: false, seed: None };
    let lg = loadgen::run(sc, &lo, &|| false).expect("load generator runs");
    let rep = server.wait(|| false);
    let m = merge::merge(&lg, &rep);
    (lg, rep, m)
}

/// What every dispatcher run shows: all answered, nothing left behind, the dispatcher took
/// every admitted request and reported a utilisation that is a share, blocked when idle, and
/// did not saturate at a tenth of a worker's load.
fn common_checks(name: &str, rep: &ServerReport, m: &serde_json::Value) {
    let admitted = rep.counter("admitted");
    assert!(admitted >= 500, "{name}: {admitted} admitted");
    assert_eq!(rep.counter("completed"), admitted, "{name}: every admitted request completes");
    assert_eq!(rep.abandoned, 0, "{name}");
    let d = rep.dispatcher.as_ref().unwrap_or_else(|| panic!("{name}: a dispatcher report"));
    eprintln!("{name}: admitted {admitted}, preemptions {}, dispatcher {d:?}, p99 {}", rep.counter("preemptions"), m["latency_us"]["p99"]);
    assert_eq!(d.load.arrivals, admitted, "{name}: the dispatcher steered every admitted request");
    assert!(d.load.utilization > 0.0 && d.load.utilization < 0.9, "{name}: utilisation {}", d.load.utilization);
    assert!(!d.load.saturated, "{name}");
    assert!(d.blocks_when_idle && d.blocks > 0 && d.blocked_ns > 0, "{name}: it blocks when idle: {d:?}");
    // The merged summary carries it under the simulator's key.
    let u = m["sched"]["dispatcher"]["utilization"].as_f64().unwrap_or(-1.0);
    assert!((u - d.load.utilization).abs() < 1e-12, "{name}: sched.dispatcher.utilization {u}");
}

#[test]
fn shinjuku_preempts_through_its_dispatcher() {
    let _g = serial();
    let sc = scenario(&["policy.sched={kind=\"shinjuku\"}"]);
    let (_, rep, m) = run(&sc, None);
    common_checks("shinjuku", &rep, &m);
    let d = rep.dispatcher.as_ref().unwrap();
    let preemptions = rep.counter("preemptions");
    // ~100 requests of 300 µs at a 20 µs quantum: each is preempted at least once.
    assert!(preemptions >= 50, "{preemptions} preemptions");
    // The dispatcher sent the signals, took back every preempted request it was handed, and
    // heard every completion (Shinjuku's routes: all of them).
    assert!(d.load.signals >= preemptions, "{d:?}");
    assert_eq!(d.load.requeues, preemptions, "{d:?}");
    assert_eq!(d.load.completions, rep.counter("completed"), "{d:?}");
    assert_eq!(m["sched"]["queue_policy"], "shinjuku");
}

#[test]
fn concord_preempts_and_its_dispatcher_works_in_its_slack() {
    let _g = serial();
    // Light load first: preemptions through the dispatcher's flag, completions reported.
    let sc = scenario(&["policy.sched={kind=\"concord\"}"]);
    let (_, rep, m) = run(&sc, None);
    common_checks("concord", &rep, &m);
    let d = rep.dispatcher.as_ref().unwrap();
    let preemptions = rep.counter("preemptions");
    assert!(preemptions >= 50, "{preemptions} preemptions");
    assert!(d.load.signals >= preemptions && d.load.requeues == preemptions, "{d:?}");
    assert_eq!(m["sched"]["queue_policy"], "concord");
    // With 10 µs of slack (above the 2 µs threshold) and the worker's mailbox full (long
    // requests of 1 ms arriving faster than one worker serves them), the dispatcher runs
    // requests of its own: counted, and answered like any other.
    let sc = scenario(&[
        "policy.sched={kind=\"concord\",slack_cap_us=10}",
        "workload.types.1.service={dist=\"constant\",value_us=1000}",
        "workload.types.1.ratio=0.5",
        "workload.types.0.ratio=0.5",
        "load.rps=3000",
    ]);
    let (_, rep, _) = run(&sc, None);
    let d = rep.dispatcher.as_ref().unwrap();
    assert!(d.requests > 0 && d.work_ns > 0, "the dispatcher ran requests in its slack: {d:?}");
    assert_eq!(rep.counter("completed") + rep.abandoned, rep.counter("admitted"), "{d:?}");
}

#[test]
fn tiny_quanta_preempts_on_its_workers_own_timer() {
    let _g = serial();
    let sc = scenario(&["policy.sched={kind=\"tiny_quanta\"}"]);
    let (_, rep, m) = run(&sc, None);
    common_checks("tiny_quanta", &rep, &m);
    let d = rep.dispatcher.as_ref().unwrap();
    assert!(rep.counter("preemptions") >= 50, "{}", rep.counter("preemptions"));
    // Its dispatcher only steers arrivals (ARRIVALS_ONLY): no signals, requeues or completions.
    assert_eq!((d.load.signals, d.load.requeues, d.load.completions), (0, 0, 0), "{d:?}");
    assert_eq!(m["sched"]["queue_policy"], "tiny-quanta");
}

/// Records on which worker each request type ran.
#[derive(Default)]
struct WhereRan {
    runs: Mutex<Vec<(String, u16)>>,
}

impl Handler for WhereRan {
    fn handle(&self, req: &Request, cx: &mut Cx) -> Outcome {
        cx.compute(req.service_ns);
        let name = std::thread::current().name().unwrap_or("?").to_string();
        self.runs.lock().push((name, req.rtype));
        Outcome::Ok
    }
}

#[test]
fn darc_keeps_long_requests_off_the_short_ones_core() {
    let _g = serial();
    // Two workers and the dispatcher. Shorts (10 µs, 75 %) have 7.5 of 12.5 µs of CPU time per
    // request: 1.2 cores → 1 (worker 0); longs (20 µs, 25 %) 0.8 → the other (worker 1), no
    // spillway. Shorts may also run on the longs' core, never the reverse.
    let sc = scenario(&[
        "policy.sched={kind=\"darc\"}",
        "server.max_cores=3",
        // A quantum shorter than every request: DARC must ignore it (a preempted request would
        // go back to its worker's own queue, which DARC never reads).
        "server.preemption={quantum_us=5}",
        "workload.types.0={name=\"short\",ratio=0.75,service={dist=\"constant\",value_us=10}}",
        "workload.types.1={name=\"long\",ratio=0.25,service={dist=\"constant\",value_us=20}}",
        "load.rps=4000",
    ]);
    let h = Arc::new(WhereRan::default());
    let (_, rep, m) = run(&sc, Some(h.clone()));
    common_checks("darc", &rep, &m);
    let d = rep.dispatcher.as_ref().unwrap();
    assert_eq!(rep.counter("preemptions"), 0, "DARC never preempts");
    assert_eq!((d.load.signals, d.load.requeues), (0, 0), "{d:?}");
    assert_eq!(d.load.completions, rep.counter("completed"), "DARC's dispatcher hears every completion: {d:?}");
    let runs = h.runs.lock();
    let long_on = |w: &str| runs.iter().filter(|(n, t)| n == w && *t == 1).count();
    let longs = runs.iter().filter(|(_, t)| *t == 1).count();
    assert!(longs >= 500, "{longs} long requests");
    assert_eq!(long_on("worker-0"), 0, "a long request ran on the shorts' reserved core");
    assert_eq!(long_on("worker-1"), longs);
    assert_eq!(m["sched"]["queue_policy"], "darc");
}
