//! The resumable-request engine against theory and its own invariants: processor sharing from
//! a small quantum, FCFS from an infinite one, a global mutex as an M/G/1 queue, conservation
//! with preemption and locks on, yields and blocking locks that free their core. Tolerances
//! are batch-means standard errors of the run itself (4 of them), as in theory.rs.

use crate::common;

use common::{batch_means, run, window_sojourns};

const Z: f64 = 4.0;
const WARMUP_NS: u64 = 20_000_000;

/// One core, one central queue, no network delay: the server alone.
fn single_server(service: &str, extra: &str) -> String {
    format!(
        r#"
        duration_ms = 1000
        warmup_ms = 20
        [server]
        max_cores = 1
        queue = "central"
        {extra}
        [network]
        rtt_us = 0
        [load]
        fraction = 0.5
        [[workload.types]]
        name = "t"
        service = {service}
        [metrics]
        record_requests = true
    "#
    )
}

fn mean_sojourn(toml: &str, seed: u64) -> (f64, f64) {
    let r = run(toml, &[], seed);
    let t: Vec<f64> = window_sojourns(&r, WARMUP_NS).into_iter().map(|(t, _)| t).collect();
    batch_means(&t, 40)
}

const CONSTANT: &str = r#"{ dist = "constant", value_us = 10 }"#;
const BIMODAL: &str = r#"{ dist = "bimodal", modes = [{ value_us = 1.0, prob = 0.9 }, { value_us = 91.0, prob = 0.1 }] }"#;

#[test]
fn small_quantum_is_processor_sharing_and_insensitive_to_the_service_distribution() {
    // M/G/1-PS at ρ = 0.5: E[T] = E[S] / (1 − ρ) = 20 µs for any service distribution of mean
    // 10 µs. Round robin with a 0.1 µs quantum is PS up to a bias of the order of the quantum.
    let ps_ns = 10_000.0 / 0.5;
    let quantum = "[server.preemption]\nquantum_us = 0.1";
    for (name, service) in [("constant", CONSTANT), ("bimodal", BIMODAL)] {
        let (m, se) = mean_sojourn(&single_server(service, quantum), 3);
        assert!((m - ps_ns).abs() < Z * se + 100.0, "{name}: E[T] = {m:.0} ns, PS {ps_ns:.0} ns, se {se:.0}");
    }
    // Without preemption the same queues are FCFS, whose mean depends on the distribution
    // (Pollaczek–Khinchine): constant 15 µs, bimodal 10 + 0.05 · 829 / 1 = 51.45 µs. The PS
    // result above is not FCFS in disguise.
    for (name, service, fcfs_ns) in [("constant", CONSTANT, 15_000.0), ("bimodal", BIMODAL, 51_450.0)] {
        let (m, se) = mean_sojourn(&single_server(service, ""), 3);
        assert!((m - fcfs_ns).abs() < Z * se, "{name} FCFS: E[T] = {m:.0} ns, P-K {fcfs_ns:.0} ns, se {se:.0}");
    }
}

#[test]
fn an_infinite_quantum_without_costs_is_fcfs_to_the_bit() {
    let strip = |mut s: microsched_core::summary::Summary| {
        s.sim.wall_s = 0.0;
        s.sim.requests_per_wall_s = 0.0;
        s
    };
    for queue in ["central", "per_core"] {
        let base = single_server(BIMODAL, "").replace("queue = \"central\"", &format!("queue = \"{queue}\""));
        let set = ["duration_ms=100", "server.max_cores=4", "load.fraction=0.9"];
        let fcfs = run(&base, &set, 9).summary;
        let mut with_q = set.to_vec();
        with_q.push("server.preemption.quantum_us=1e9");
        let q = run(&base, &with_q, 9).summary;
        assert_eq!(q.sched.as_ref().unwrap().preemptions, 0);
        assert_eq!(strip(fcfs), strip(q), "{queue}");
    }
}

/// Every request holds one global mutex for its whole service time.
fn global_lock(cores: u32, queue: &str) -> String {
    format!(
        r#"
        duration_ms = 1000
        warmup_ms = 20
        [server]
        max_cores = {cores}
        queue = "{queue}"
        [network]
        rtt_us = 0
        [load]
        rps = {rps}
        [[workload.locks]]
        name = "global"
        [[workload.types]]
        name = "t"
        service = {{ dist = "bimodal", modes = [{{ value_us = 1.0, prob = 0.9 }}, {{ value_us = 10.0, prob = 0.1 }}] }}
        paths = [{{ steps = [{{ op = "lock", lock = "global" }}] }}]
        [metrics]
        record_requests = true
    "#,
        // ρ = 0.7 of the mutex: E[S] = 1.9 µs.
        rps = 0.7 / 1.9e-6
    )
}

#[test]
fn a_global_mutex_is_an_mg1_queue_whatever_the_core_count() {
    // Pollaczek–Khinchine: Wq = λ E[S²] / (2 (1 − ρ)), E[S²] = 10.9 µs².
    let lambda_per_us = 0.7 / 1.9;
    let wq_ns = lambda_per_us * 10.9 / (2.0 * 0.3) * 1e3;
    for cores in [1, 4, 16] {
        let r = run(&global_lock(cores, "central"), &[], 5);
        let waits: Vec<f64> = window_sojourns(&r, WARMUP_NS).into_iter().map(|(t, s)| t - s).collect();
        let (m, se) = batch_means(&waits, 40);
        assert!((m - wq_ns).abs() < Z * se, "{cores} cores: E[Wq] = {m:.0} ns, P-K {wq_ns:.0} ns, se {se:.0}");
        let sched = r.summary.sched.as_ref().unwrap();
        // One core runs one request at a time: the runqueue is the queue. More cores: the mutex.
        assert_eq!(sched.lock_waits > 0, cores > 1, "{cores} cores: {sched:?}");
        // The lock wait is queueing: the summary's queueing delay is the same quantity.
        assert!((r.summary.queueing_delay_us.mean * 1e3 - wq_ns).abs() < Z * se + 1.0);
    }
}

#[test]
fn requests_and_core_time_are_conserved_with_preemption_and_locks() {
    let toml = r#"
        duration_ms = 50
        warmup_ms = 5
        [server]
        max_cores = 8
        queue = "per_core"
        [server.preemption]
        quantum_us = 2
        send_ns = 100
        propagation_ns = 300
        receive_ns = 400
        return_ns = 200
        [load]
        fraction = 0.9
        [[workload.locks]]
        name = "items"
        count = 16
        hot = { hot_keys = 0.1, hot_share = 0.9 }
        [[workload.locks]]
        name = "slab"
        spin = true
        [[workload.types]]
        name = "get"
        ratio = 0.8
        service = { dist = "exponential", mean_us = 5 }
        paths = [{ steps = [{ op = "compute", share = 0.5 }, { op = "lock", lock = "items", share = 0.3 }, { op = "yield" }, { op = "compute", share = 0.2 }] }]
        [[workload.types]]
        name = "set"
        ratio = 0.2
        service = { dist = "exponential", mean_us = 10 }
        paths = [
            { prob = 0.5, steps = [{ op = "lock", lock = "slab", time = { dist = "constant", value_us = 0.5 } }, { op = "compute" }] },
            { prob = 0.5, steps = [{ op = "compute" }] },
        ]
    "#;
    for alloc in ["static", "caladan", "shenango"] {
        for queue in ["per_core", "central"] {
            let set = [format!("policy.allocator.kind=\"{alloc}\""), format!("server.queue=\"{queue}\"")];
            let set: Vec<&str> = set.iter().map(String::as_str).collect();
            let s = run(toml, &set, 2).summary;
            let r = &s.requests;
            assert_eq!(r.generated, r.completed + r.dropped + r.in_flight, "{alloc}/{queue}: {r:?}");
            assert!(r.completed > 1000);
            let ct = &s.core_time;
            assert_eq!(ct.busy_ns + ct.search_ns + ct.parked_ns + ct.transition_ns + ct.overhead_ns, ct.total_ns);
            assert_eq!(ct.total_ns, 8 * 55_000_000, "{alloc}/{queue}: cores x time");
            let sc = s.sched.as_ref().unwrap();
            assert!(sc.preemptions > 0 && sc.yields > 0 && sc.lock_waits > 0, "{alloc}/{queue}: {sc:?}");
            assert!(ct.overhead_ns > 0);
            assert_eq!(sc.preempt_send_ns, 100 * sc.preemptions);
        }
    }
}

#[test]
fn yield_points_let_short_requests_through_on_one_core() {
    // One core: long requests (50 µs) either run to completion or yield every 5 µs. Short ones
    // (1 µs) behind a long one wait for all of it, or for one 5 µs piece.
    let toml = |long_steps: &str| {
        format!(
            r#"
            duration_ms = 200
            warmup_ms = 10
            [server]
            max_cores = 1
            queue = "central"
            [network]
            rtt_us = 0
            [load]
            fraction = 0.6
            [[workload.types]]
            name = "short"
            ratio = 0.9
            service = {{ dist = "constant", value_us = 1 }}
            [[workload.types]]
            name = "long"
            ratio = 0.1
            service = {{ dist = "constant", value_us = 50 }}
            paths = [{{ steps = [{long_steps}] }}]
        "#
        )
    };
    let piece = r#"{ op = "compute", share = 0.1 }, { op = "yield" }"#;
    let yielding = toml(&[piece; 10].join(", "));
    let whole = toml(r#"{ op = "compute" }"#);
    let y = run(&yielding, &[], 4).summary;
    let w = run(&whole, &[], 4).summary;
    let (ys, ws) = (&y.by_type[0], &w.by_type[0]);
    assert!(ys.latency_us.p99 * 2.0 < ws.latency_us.p99, "short p99 with yields {} vs without {}", ys.latency_us.p99, ws.latency_us.p99);
    assert!(y.sched.as_ref().unwrap().yields > 0 && w.sched.as_ref().unwrap().yields == 0);
    // The same requests arrive in both runs (common random numbers).
    assert_eq!(y.requests.generated, w.requests.generated);
}

#[test]
fn a_blocking_mutex_frees_its_core_and_a_spin_lock_does_not() {
    // Two cores, every request holds one global lock for half its service: the lock caps
    // throughput. Blocked waiters free their core; spinning ones burn it.
    let toml = |spin: bool| {
        format!(
            r#"
            duration_ms = 100
            warmup_ms = 10
            [server]
            max_cores = 2
            queue = "central"
            [load]
            fraction = 0.8
            [[workload.locks]]
            name = "g"
            spin = {spin}
            [[workload.types]]
            name = "t"
            service = {{ dist = "exponential", mean_us = 10 }}
            paths = [{{ steps = [{{ op = "compute", share = 0.5 }}, {{ op = "lock", lock = "g", share = 0.5 }}] }}]
        "#
        )
    };
    let blocking = run(&toml(false), &[], 6).summary;
    let spinning = run(&toml(true), &[], 6).summary;
    // Offered work is 1.6 cores of which 0.8 under the lock: it fits either way, but spinners
    // add their waits to busy time.
    assert!(spinning.cores.busy_mean > blocking.cores.busy_mean + 0.05, "spin {} vs blocking {}", spinning.cores.busy_mean, blocking.cores.busy_mean);
    assert!((blocking.cores.busy_mean - 1.6).abs() < 0.1, "blocking busy {}", blocking.cores.busy_mean);
}

#[test]
fn program_draws_use_their_own_streams() {
    // Adding a program to one type must not move the arrivals, sessions, types or base service
    // times of the run (common random numbers across workloads).
    let plain = single_server(CONSTANT, "");
    let with_prog = plain.replace(
        "service = { dist = \"constant\", value_us = 10 }",
        "service = { dist = \"constant\", value_us = 10 }\n        paths = [{ prob = 0.5, steps = [{ op = \"compute\" }] }, { prob = 0.5, steps = [{ op = \"compute\", share = 0.5 }, { op = \"yield\" }, { op = \"compute\", share = 0.5 }] }]",
    );
    let set = ["duration_ms=20"];
    let a = run(&plain, &set, 8);
    let b = run(&with_prog, &set, 8);
    // The logs are in completion order, which the programs change: compare by request id.
    let by_id = |r: microsched_sim::SimResult| {
        let l = r.requests.expect("record_requests = true");
        let mut rows: Vec<(u64, u64, u64, u64)> =
            (0..l.id.len()).map(|i| (l.id[i], l.created_ns[i], l.service_ns[i], l.session[i])).collect();
        rows.sort_unstable();
        rows
    };
    let (ra, rb) = (by_id(a), by_id(b));
    assert!(ra.len() > 1000 && ra == rb, "arrivals, service times or sessions moved");
}

#[test]
fn a_dispatcher_core_limits_throughput_by_its_cost_alone() {
    // 8 cores = 7 workers (7 M req/s of 1 µs work) + a dispatcher at 500 ns per request
    // (2 M req/s). Below 2 M req/s everything completes with the dispatch in its latency; above,
    // throughput stops at 2 M req/s though the workers idle.
    let toml = |rps: f64| {
        format!(
            r#"
            duration_ms = 20
            warmup_ms = 2
            [server]
            max_cores = 8
            queue = "central"
            dispatcher = {{ cost_ns = 500 }}
            [network]
            rtt_us = 0
            [load]
            rps = {rps}
            [[workload.types]]
            name = "t"
            service = {{ dist = "constant", value_us = 1 }}
        "#
        )
    };
    let under = run(&toml(1.0e6), &[], 1).summary;
    assert!((under.throughput_rps / 1.0e6 - 1.0).abs() < 0.02, "{}", under.throughput_rps);
    assert!(under.latency_us.p50 >= 1.5, "1 µs of work + 0.5 µs of dispatch: {}", under.latency_us.p50);
    let over = run(&toml(3.0e6), &[], 1).summary;
    // Its loop also handles each completion (500 ns, the arrival cost, unless set): 1 M req/s.
    assert!((over.throughput_rps / 1.0e6 - 1.0).abs() < 0.02, "dispatcher-bound: {}", over.throughput_rps);
    let d = over.sched.as_ref().unwrap().dispatcher.unwrap();
    assert!(d.saturated && d.completions > 0, "{d:?}");
    let arrivals_only = run(&toml(3.0e6), &["server.dispatcher.completion_ns=0"], 1).summary;
    assert!((arrivals_only.throughput_rps / 2.0e6 - 1.0).abs() < 0.02, "{}", arrivals_only.throughput_rps);
    assert!(over.cores.busy_mean < 4.0, "the workers idle: busy {}", over.cores.busy_mean);
    let ct = &over.core_time;
    assert_eq!(ct.total_ns, 8 * 22_000_000, "the dispatcher's core is accounted for");
    assert_eq!(ct.busy_ns + ct.search_ns + ct.parked_ns + ct.transition_ns + ct.overhead_ns, ct.total_ns);
    // Load fractions count worker cores: 1.0 = 7 M req/s here.
    let frac = run(&toml(1.0).replace("rps = 1", "fraction = 0.1"), &[], 1).summary;
    assert!((frac.offered_rps / 0.7e6 - 1.0).abs() < 0.02, "{}", frac.offered_rps);
}

#[test]
fn a_dispatcher_needs_static_workers_and_two_cores() {
    let base = r#"
        duration_ms = 1
        [server]
        max_cores = 1
        dispatcher = { cost_ns = 100 }
        [load]
        fraction = 0.5
        [[workload.types]]
        name = "t"
        service = { dist = "constant", value_us = 1 }
    "#;
    let err = |set: &[&str]| {
        let o: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        microsched_sim::Scenario::load(base, microsched_sim::Format::Toml, std::path::Path::new("."), &o).unwrap_err()
    };
    assert_eq!(err(&[]).field, "server.dispatcher");
    let e = err(&["server.max_cores=4", "policy.allocator.kind=\"caladan\""]);
    assert!(e.field == "server.dispatcher" && e.message.contains("static"), "{e}");
    assert_eq!(err(&["server.max_cores=4", "server.dispatcher.cost_ns=-1"]).field, "server.dispatcher.cost_ns");
}

/// Two applications sharing one M/M/8 central queue, each at 0.4 of capacity.
const TWO_APPS: &str = r#"
    name = "a"
    duration_ms = 500
    warmup_ms = 10
    [server]
    max_cores = 8
    queue = "central"
    [network]
    rtt_us = 0
    [load]
    fraction = 0.4
    [[workload.types]]
    name = "a"
    service = { dist = "exponential", mean_us = 10 }
    [[applications]]
    name = "b"
    load = { fraction = 0.4 }
    workload = { types = [{ name = "b", service = { dist = "exponential", mean_us = 10 } }] }
"#;

#[test]
fn applications_share_the_server_and_each_has_its_results() {
    let s = run(TWO_APPS, &[], 3).summary;
    assert_eq!(s.applications.len(), 2);
    let (a, b) = (&s.applications[0], &s.applications[1]);
    assert_eq!((a.name.as_str(), b.name.as_str()), ("a", "b"));
    // The flat keys are the first application's.
    assert_eq!(s.latency_us, a.latency_us);
    assert_eq!(s.requests, a.requests);
    for app in [a, b] {
        let r = &app.requests;
        assert_eq!(r.generated, r.completed + r.dropped + r.in_flight, "{}", app.name);
        // Each offers 0.4 × 800 k req/s.
        assert!((app.offered_rps / 320e3 - 1.0).abs() < 0.02, "{}: {}", app.name, app.offered_rps);
    }
    // One FCFS queue at total load 0.8: both see the M/M/8 waiting time, Erlang C(8, 6.4) =
    // 0.4576 → E[Wq] = 0.4576 × 10 µs / (8 − 6.4) = 2.860 µs (4 batch-means standard errors).
    let r = run(TWO_APPS, &["metrics.record_requests=true"], 3);
    let log = r.requests.as_ref().unwrap();
    for app in [0u64, 1] {
        let mut rows: Vec<(u64, f64)> = (0..log.id.len())
            .filter(|&i| log.app[i] == app && log.created_ns[i] >= 10_000_000 && log.dropped[i] == 0)
            .map(|i| (log.created_ns[i], log.queued_ns[i] as f64))
            .collect();
        rows.sort_by_key(|r| r.0);
        let q: Vec<f64> = rows.into_iter().map(|r| r.1).collect();
        let (m, se) = common::batch_means(&q, 40);
        assert!((m - 2860.3).abs() < 4.0 * se, "app {app}: E[Wq] = {m:.0} ns, Erlang C 2860 ns, se {se:.0}");
    }
    // The server's cores carry both: 0.8 × 8 busy.
    assert!((s.cores.busy_mean - 6.4).abs() < 0.15, "{}", s.cores.busy_mean);
}

#[test]
fn a_co_tenant_does_not_move_the_first_applications_arrivals() {
    let alone = TWO_APPS.replace("load = { fraction = 0.4 }", "load = { rps = 0 }");
    let set = ["duration_ms=20", "metrics.record_requests=true"];
    let with_b = run(TWO_APPS, &set, 4);
    let without = run(&alone, &set, 4);
    assert_eq!(without.summary.applications[1].requests.generated, 0);
    // Application a's requests (created times, services, sessions) are the same in both runs.
    let of_a = |r: &microsched_sim::SimResult| {
        let l = r.requests.as_ref().unwrap();
        let mut v: Vec<(u64, u64, u64)> =
            (0..l.id.len()).filter(|&i| l.rtype[i] == 0 && l.session[i] < u64::MAX).map(|i| (l.created_ns[i], l.service_ns[i], l.session[i])).collect();
        v.sort_unstable();
        v
    };
    let (x, y) = (of_a(&with_b), of_a(&without));
    assert!(x.len() > 1000);
    // With b, the log holds both applications' type-0 requests: a's are a subset.
    let y_set: std::collections::BTreeSet<_> = y.iter().collect();
    assert_eq!(x.iter().filter(|t| y_set.contains(t)).count(), y.len());
}

/// Two replicas, 8 cores each, exponential 10 µs, Breakwater.
const REPLICAS: &str = r#"
    duration_ms = 100
    warmup_ms = 10
    [server]
    max_cores = 8
    replicas = 2
    [load]
    fraction = 0.6
    [[workload.types]]
    name = "t"
    service = { dist = "exponential", mean_us = 10 }
"#;

#[test]
fn replicas_split_the_sessions_and_account_for_every_core() {
    let s = run(REPLICAS, &[], 5).summary;
    assert_eq!(s.nodes.len(), 2);
    let r = &s.requests;
    assert_eq!(r.generated, r.completed + r.dropped + r.in_flight);
    // Load 0.6 of one node's capacity spread over two: each node ~0.3 busy.
    for n in &s.nodes {
        assert!((n.cores.busy_mean / 8.0 - 0.3).abs() < 0.05, "node {}: {}", n.node, n.cores.busy_mean);
        assert_eq!(n.core_time.total_ns, 8 * 110_000_000);
    }
    assert_eq!(s.cores.max, 16);
    assert_eq!(s.core_time.total_ns, 16 * 110_000_000);
    assert!((s.cores.busy_mean - s.nodes.iter().map(|n| n.cores.busy_mean).sum::<f64>()).abs() < 1e-9);
}

#[test]
fn a_failed_request_is_retried_on_the_next_replica() {
    // Every session on the first replica, offered twice its capacity, Breakwater's AQM dropping
    // the excess: with one retry, dropped requests go to the idle second replica.
    let set = [
        "load.fraction=2.0",
        "clients.replica_choice=\"primary\"",
        "policy.overload.kind=\"breakwater\"",
        "clients.timeout_us=1000",
    ];
    let no_retry = run(REPLICAS, &set, 6).summary;
    let mut with = set.to_vec();
    with.push("clients.retries=1");
    let retry = run(REPLICAS, &with, 6).summary;
    assert_eq!(no_retry.applications[0].retries, 0);
    assert!(no_retry.nodes[1].cores.busy_mean < 1e-9, "the second replica sees nothing without retries");
    let retried = retry.applications[0].retries;
    assert!(retried > 100, "{retried}");
    // The second replica's work is the retried requests' (10 µs each): busy time ≈ retries ×
    // 10 µs over the 100 ms window, within the spread of an exponential sum.
    let work_ns = retry.nodes[1].cores.busy_mean * 100e6;
    let expect_ns = retried as f64 * 10e3;
    let sd = expect_ns / (retried as f64).sqrt();
    assert!((work_ns - expect_ns).abs() < 4.0 * sd + 20e3, "node 1 busy {work_ns:.0} ns for {retried} retries");
    // Fewer requests end dropped.
    assert!(retry.drop_rate < no_retry.drop_rate, "{} vs {}", retry.drop_rate, no_retry.drop_rate);
    let r = &retry.requests;
    assert_eq!(r.generated, r.completed + r.dropped + r.in_flight);
}

#[test]
fn application_and_replica_settings_are_checked() {
    let err = |toml: &str, set: &[&str]| {
        let o: Vec<String> = set.iter().map(|s| s.to_string()).collect();
        microsched_sim::Scenario::load(toml, microsched_sim::Format::Toml, std::path::Path::new("."), &o).unwrap_err()
    };
    assert_eq!(err(REPLICAS, &["server.replicas=0"]).field, "server.replicas");
    assert_eq!(err(REPLICAS, &["clients.retries=100"]).field, "clients.retries");
    assert_eq!(err(TWO_APPS, &["applications.0.name=\"a\""]).field, "applications[0].name");
    assert_eq!(err(TWO_APPS, &["applications.0.load.fraction=-1"]).field, "applications[0].load.fraction");
    let e = err(TWO_APPS, &["applications.0.workload.types.0.service.mean_us=0"]);
    assert_eq!(e.field, "applications[0].workload.types[0].service.mean_us", "{e}");
}
