//! The dispatcher core does all the work its system's loop does: arrivals, and where the policy
//! routes them through it, completions, preempted requests to requeue and preemption signals to
//! send, each at its `server.dispatcher` cost. Each test fails if that cost were not charged.

use crate::common;

use common::run;

const BASE: &str = r#"
    duration_ms = 30
    warmup_ms = 5
    [server]
    max_cores = 5
    [server.dispatcher]
    cost_ns = 100
    [server.preemption]
    quantum_us = 5
    [network]
    rtt_us = 10
    [clients]
    sessions = 64
    [load]
    fraction = 0.7
    [[workload.types]]
    name = "short"
    ratio = 0.9
    service = { dist = "constant", value_us = 1 }
    [[workload.types]]
    name = "long"
    ratio = 0.1
    service = { dist = "constant", value_us = 50 }
    [policy.allocator]
    kind = "static"
    [policy.sched]
    kind = "shinjuku"
"#;

fn load(over: &[&str]) -> microsched_core::summary::DispatcherLoad {
    let s = run(BASE, over, 3).summary;
    s.sched.as_ref().and_then(|s| s.dispatcher).expect("a dispatcher's load in the summary")
}

#[test]
fn shinjukus_dispatcher_pays_per_kind_what_it_is_set_to() {
    let d = load(&["server.dispatcher.completion_ns=200", "server.dispatcher.requeue_ns=300", "server.dispatcher.signal_ns=400"]);
    assert!(d.arrivals > 1000 && d.completions > 1000 && d.requeues > 100, "{d:?}");
    assert_eq!(d.arrival_ns, 100 * d.arrivals);
    assert_eq!(d.completion_ns, 200 * d.completions);
    assert_eq!(d.requeue_ns, 300 * d.requeues);
    assert_eq!(d.signal_ns, 400 * d.signals);
    // One signal and one requeue per preemption (the window may cut between the two).
    assert!(d.signals.abs_diff(d.requeues) <= 1, "{d:?}");
    // Its busy time is that work (the window, `duration_ms` after the warm-up, cuts at most
    // one item at each end).
    let window_ns = 30_000_000.0;
    let work = (d.arrival_ns + d.completion_ns + d.requeue_ns + d.signal_ns) as f64;
    assert!((d.utilization * window_ns - work).abs() <= 1_000.0, "{} vs {work}", d.utilization * window_ns);
    assert!(!d.saturated);
}

#[test]
fn unset_completion_and_requeue_costs_are_the_arrival_cost_and_the_signal_is_the_mechanisms_send() {
    let d = load(&["server.preemption.mechanism=kmod_ipi"]);
    assert_eq!(d.completion_ns, 100 * d.completions);
    assert_eq!(d.requeue_ns, 100 * d.requeues);
    // kmod_ipi's p50 send (Synergy Table I): 490 ns, now spent on the dispatcher.
    assert!(d.signals > 100);
    assert_eq!(d.signal_ns, 490 * d.signals);
}

#[test]
fn completions_delay_arrivals_at_the_dispatcher() {
    // Completions cost the dispatcher core time that arrivals then wait for: with a costly
    // completion the dispatcher is busier and short requests wait longer in front of it.
    let cheap = run(BASE, &["server.dispatcher.completion_ns=0"], 3).summary;
    let dear = run(BASE, &["server.dispatcher.completion_ns=600"], 3).summary;
    let (dc, dd) = (cheap.sched.as_ref().unwrap().dispatcher.unwrap(), dear.sched.as_ref().unwrap().dispatcher.unwrap());
    assert!(dd.utilization > dc.utilization + 0.2, "{} vs {}", dd.utilization, dc.utilization);
    // The median request is a short one: its latency is mostly the network and the wait.
    assert!(dear.latency_us.p50 > cheap.latency_us.p50, "{} vs {}", dear.latency_us.p50, cheap.latency_us.p50);
}

#[test]
fn a_dispatcher_past_its_capacity_shows_as_saturated() {
    // 4 workers at 0.7 of their capacity (≈ 0.47 MRPS of 5.95 µs requests); 2.5 µs of
    // completion work each caps the dispatcher below that.
    let d = load(&["server.dispatcher.completion_ns=2500"]);
    assert!(d.saturated && d.utilization >= 0.99, "{d:?}");
    assert!(d.queued_end > 100, "{d:?}");
}

#[test]
fn tiny_quantas_dispatcher_only_steers_arrivals() {
    let d = load(&["policy.sched.kind=tiny_quanta", "server.preemption.quantum_us=2", "server.dispatcher.completion_ns=500"]);
    assert!(d.arrivals > 1000);
    assert_eq!((d.completions, d.requeues, d.signals), (0, 0, 0), "{d:?}");
}

#[test]
fn darcs_dispatcher_handles_completions_only() {
    let d = load(&["policy.sched.kind=darc", "server.preemption.quantum_us=1e6"]);
    assert!(d.completions > 1000, "{d:?}");
    assert_eq!((d.requeues, d.signals), (0, 0));
}

/// DARC never preempts, even where the scenario sets a quantum (BASE's 5 µs, shorter than its
/// 50 µs requests): a preempted request would go back to its core's own queue, which DARC's
/// workers never read, and stay there to the end of the run.
#[test]
fn darc_ignores_a_quantum_and_strands_nothing() {
    let s = run(BASE, &["policy.sched.kind=darc"], 3).summary;
    assert_eq!(s.sched.as_ref().unwrap().preemptions, 0);
    // At load 0.7 on 4 workers, what is left at the end is at most what was in service or
    // just queued, not the tenth of requests that are long.
    assert!(s.requests.in_flight * 100 < s.requests.generated, "{:?}", s.requests);
    let w = microsched_core::sched::warnings(&microsched_sim::Scenario::load(BASE, microsched_sim::Format::Toml, std::path::Path::new("."), &["policy.sched.kind=darc".to_string()]).unwrap().scenario);
    assert!(w.iter().any(|m| m.contains("quantum_us") && m.contains("never preempts")), "{w:?}");
}

#[test]
fn a_negative_dispatcher_cost_is_refused_by_name() {
    let o = vec!["server.dispatcher.requeue_ns=-1".to_string()];
    let e = microsched_sim::Scenario::load(BASE, microsched_sim::Format::Toml, std::path::Path::new("."), &o).expect_err("rejected");
    assert!(e.to_string().contains("server.dispatcher.requeue_ns"), "{e}");
}

#[test]
fn no_dispatcher_no_dispatcher_section() {
    let text = BASE.replace("[server.dispatcher]\n    cost_ns = 100\n", "").replace("kind = \"shinjuku\"", "kind = \"queue\"");
    let s = run(&text, &[], 3).summary;
    assert!(s.sched.as_ref().unwrap().dispatcher.is_none());
}
