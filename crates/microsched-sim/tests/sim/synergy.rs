//! Synergy and Tiny Quanta against theory and against the policies they reduce to: Synergy with
//! preemption and stealing off is d-FCFS (to the bit, on one queue and on several); on one core
//! it is an M/G/1 FCFS queue (Pollaczek–Khinchine); Tiny Quanta on one core with a tiny quantum
//! and no cost is processor sharing, and with one coroutine FCFS. Tolerances are 4 batch-means standard errors of the run.

use crate::common;

use common::{batch_means, run, window_sojourns};

const Z: f64 = 4.0;
const WARMUP_NS: u64 = 20_000_000;
const BIMODAL: &str = r#"{ dist = "bimodal", modes = [{ value_us = 1.0, prob = 0.9 }, { value_us = 91.0, prob = 0.1 }] }"#;

fn server(cores: u32, queue: &str, sched: &str) -> String {
    format!(
        r#"
        duration_ms = 1000
        warmup_ms = 20
        [server]
        max_cores = {cores}
        queue = "{queue}"
        steal = false
        [network]
        rtt_us = 0
        [clients]
        sessions = 64
        [load]
        fraction = 0.5
        [[workload.types]]
        name = "t"
        service = {BIMODAL}
        [metrics]
        record_requests = true
        {sched}
    "#
    )
}

fn strip(mut s: microsched_core::summary::Summary) -> microsched_core::summary::Summary {
    s.sim.wall_s = 0.0;
    s.sim.requests_per_wall_s = 0.0;
    for sc in s.sched.iter_mut().chain(s.nodes.iter_mut().map(|n| &mut n.sched)) {
        sc.queue_policy.clear();
    }
    s
}

const SYNERGY_RTC: &str = "[policy.sched]\nkind = \"synergy\"\npreemption = false\nsteal = false";

#[test]
fn synergy_without_preemption_or_stealing_is_dfcfs_to_the_bit() {
    for cores in [1, 4] {
        let set = ["duration_ms=100", "load.fraction=0.8"];
        let d = run(&server(cores, "per_core", ""), &set, 5).summary;
        let s = run(&server(cores, "per_core", SYNERGY_RTC), &set, 5).summary;
        assert_eq!(s.sched.as_ref().unwrap().queue_policy, "synergy");
        assert_eq!(strip(d), strip(s), "{cores} cores");
    }
}

fn mean_sojourn(toml: &str, seed: u64) -> (f64, f64) {
    let r = run(toml, &[], seed);
    let t: Vec<f64> = window_sojourns(&r, WARMUP_NS).into_iter().map(|(t, _)| t).collect();
    batch_means(&t, 40)
}

#[test]
fn synergy_on_one_queue_without_preemption_is_mg1_fcfs() {
    // Pollaczek–Khinchine at ρ = 0.5, E[S] = 10 µs, E[S²] = 0.9 + 0.1 · 8281 = 829 µs²:
    // E[T] = 10 + 0.5 · 829 / (2 · 10 · 0.5) = 51.45 µs.
    let (m, se) = mean_sojourn(&server(1, "per_core", SYNERGY_RTC), 3);
    assert!((m - 51_450.0).abs() < Z * se, "E[T] = {m:.0} ns, P-K 51450 ns, se {se:.0}");
}

#[test]
fn tiny_quanta_with_one_coroutine_is_mg1_fcfs() {
    // One coroutine: a request is time-sliced alone, so it runs to completion in arrival order
    // whatever the quantum (P-K as above).
    let toml = server(1, "per_core", "[policy.sched]\nkind = \"tiny_quanta\"\ncoroutines = 1\n[server.preemption]\nquantum_us = 2");
    let (m, se) = mean_sojourn(&toml, 3);
    assert!((m - 51_450.0).abs() < Z * se, "E[T] = {m:.0} ns, P-K 51450 ns, se {se:.0}");
}

#[test]
fn tiny_quanta_on_one_core_with_a_tiny_costless_quantum_is_processor_sharing() {
    // M/G/1-PS: E[T] = E[S] / (1 − ρ) = 20 µs whatever the distribution; the bias of round
    // robin is of the order of the quantum (0.1 µs).
    // No coroutine cap and a look at the ring after every run: round robin over everything
    // queued (the artifact's 8 coroutines and 4-run ring period are options away from it).
    let toml = server(
        1,
        "per_core",
        "[policy.sched]\nkind = \"tiny_quanta\"\ncoroutines = 0\nring_poll_quanta = 1\n[server.preemption]\nquantum_us = 0.1",
    );
    let (m, se) = mean_sojourn(&toml, 3);
    assert!((m - 20_000.0).abs() < Z * se + 100.0, "E[T] = {m:.0} ns, PS 20000 ns, se {se:.0}");
}

/// Synergy's scenario as shipped (experiments/synergy/high.toml), shortened.
fn high(sched_extra: &[&str]) -> microsched_core::summary::Summary {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments/synergy/high.toml");
    let text = std::fs::read_to_string(path).expect("high.toml");
    let mut set = vec!["duration_ms=100", "load.fraction=0.8"];
    set.extend_from_slice(sched_extra);
    run(&text, &set, 1).summary
}

#[test]
fn conditional_preemption_avoids_most_interrupts() {
    let s = high(&[]);
    let sc = s.sched.as_ref().unwrap();
    let share = sc.avoided_preemptions as f64 / (sc.avoided_preemptions + sc.preemptions) as f64;
    assert!(share > 0.9, "avoided {share:.3}");
    // Requests and core time are conserved; the workers' utilisation is the offered load plus
    // the mechanism's overhead, spread evenly over 512 flows.
    let r = &s.requests;
    assert_eq!(r.generated, r.completed + r.dropped + r.in_flight);
    let ct = &s.core_time;
    assert_eq!(ct.busy_ns + ct.search_ns + ct.parked_ns + ct.transition_ns + ct.overhead_ns, ct.total_ns);
    let u = &sc.worker_utilization;
    assert!(u.min <= u.mean && u.mean <= u.max && (u.mean - 0.8).abs() < 0.05, "{u:?}");
    // Without conditional preemption every expiry with a short queued or not interrupts.
    let all = high(&["policy.sched.conditional=false"]);
    assert!(all.sched.as_ref().unwrap().preemptions > 10 * sc.preemptions.max(1));
    assert_eq!(all.sched.as_ref().unwrap().avoided_preemptions, 0);
}

#[test]
fn synergy_protects_short_requests_from_long_ones() {
    // High at load 0.8: run to completion (d-FCFS with stealing) leaves shorts behind 100 µs
    // requests; Synergy's feedback and wait queue let them through.
    let syn = high(&[]);
    let rtc = high(&["policy.sched.kind=queue"]);
    let short = |s: &microsched_core::summary::Summary| s.by_type[0].slowdown.p999;
    assert!(short(&syn) * 3.0 < short(&rtc), "synergy {} vs d-fcfs {}", short(&syn), short(&rtc));
}

#[test]
fn lazy_expiries_are_the_same_model_as_one_event_per_expiry() {
    // Only the order of events at the same nanosecond differs, so the runs agree statistically
    // (same requests, same counts and latencies to within their noise), with far fewer events.
    let lazy = high(&[]);
    let eager = high(&["policy.sched.lazy_expiries=false"]);
    assert_eq!(lazy.requests.generated, eager.requests.generated);
    let (l, e) = (lazy.sched.as_ref().unwrap(), eager.sched.as_ref().unwrap());
    let expiries = |s: &microsched_core::summary::Sched| (s.preemptions + s.avoided_preemptions) as f64;
    assert!((expiries(l) / expiries(e) - 1.0).abs() < 0.01, "{l:?} {e:?}");
    assert!((l.preemptions as f64 / e.preemptions as f64 - 1.0).abs() < 0.1, "{l:?} {e:?}");
    assert!((lazy.latency_us.mean / eager.latency_us.mean - 1.0).abs() < 0.01);
    assert!((lazy.by_type[0].slowdown.p99 / eager.by_type[0].slowdown.p99 - 1.0).abs() < 0.03);
    assert!(lazy.sim.events * 3 < eager.sim.events, "{} vs {} events", lazy.sim.events, eager.sim.events);
}
