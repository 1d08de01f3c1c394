//! Harvesting (HarvestContainers, issue 16) on scaled-down seeded runs of the Memcached-like
//! Primary (8 cores, bursty arrivals): properties that must hold whatever the calibration.

use crate::common;

use common::{harvest_primary, run};
use std::path::Path;

use microsched_core::summary::Summary;
use microsched_sim::{Format, Scenario};

/// The harvest Primary with sharper bursts than the base (10 % ON at 6.9× the mean) so that
/// every effect is large in a short run.
fn primary(rps: f64, allocator: &str) -> String {
    harvest_primary(rps, 0.1, 0.05, "", allocator)
}

fn sim(rps: f64, allocator: &str) -> Summary {
    run(&primary(rps, allocator), &[], 7).summary
}

fn static_buffer(buffer: u32, mechanism: &str) -> String {
    format!("kind = \"harvest_static\"\nbuffer = {buffer}\nmechanism = {{ {mechanism} }}")
}

#[test]
fn a_buffer_of_every_core_harvests_nothing_and_is_the_standalone_run() {
    let alone = sim(50_000.0, "kind = \"static\"");
    let h = sim(50_000.0, &static_buffer(8, "kind = \"two_phase_affinity\""));
    assert_eq!(h.be_cores_mean, 0.0);
    assert_eq!(h.core_time.parked_ns, 0);
    let r = h.harvest.as_ref().unwrap();
    assert_eq!((r.lends, r.evictions), (0, 0));
    // Same requests, same cores: the same latencies to the nanosecond.
    assert_eq!(h.latency_us, alone.latency_us);
    assert_eq!(h.queueing_delay_us, alone.queueing_delay_us);
    assert_eq!(h.requests.completed, alone.requests.completed);
}

#[test]
fn a_larger_buffer_lends_fewer_cores_and_costs_less_latency() {
    let alone = sim(100_000.0, "kind = \"static\"");
    let runs: Vec<(u32, Summary)> =
        [1, 2, 4, 6].iter().map(|&b| (b, sim(100_000.0, &static_buffer(b, "kind = \"two_phase_affinity\"")))).collect();
    for w in runs.windows(2) {
        let ((b0, s0), (b1, s1)) = (&w[0], &w[1]);
        assert!(s0.be_cores_mean > s1.be_cores_mean, "buffer {b0}: {} cores lent, buffer {b1}: {}", s0.be_cores_mean, s1.be_cores_mean);
        assert!(
            s0.queueing_delay_us.mean > s1.queueing_delay_us.mean && s0.latency_us.p99 >= s1.latency_us.p99,
            "buffer {b0}: wait {} p99 {}; buffer {b1}: wait {} p99 {}",
            s0.queueing_delay_us.mean, s0.latency_us.p99, s1.queueing_delay_us.mean, s1.latency_us.p99
        );
    }
    // Harvesting never makes the Primary faster than standalone.
    for (b, s) in &runs {
        assert!(s.latency_us.p99 >= alone.latency_us.p99, "buffer {b}: p99 {} < standalone {}", s.latency_us.p99, alone.latency_us.p99);
    }
    // The smallest buffer costs visibly (bursts outrun the 30 µs evictions).
    assert!(runs[0].1.latency_us.p99 > 1.05 * alone.latency_us.p99);
}

#[test]
fn slow_actuation_harvests_less_or_costs_more() {
    let fast = sim(50_000.0, &static_buffer(2, "kind = \"two_phase_affinity\""));
    // cpuset: a lend only happens after a 4 ms surplus.
    let cpuset = sim(50_000.0, &static_buffer(2, "kind = \"cpuset\""));
    assert!(cpuset.be_cores_mean < 0.5 * fast.be_cores_mean, "cpuset {} vs 2PA {}", cpuset.be_cores_mean, fast.be_cores_mean);
    // A millisecond hand-over (an eviction on demand, as earlier versions read the agent, or a
    // scheduler that lets the Secondary run on): the Primary waits for it when a burst outruns
    // the buffer (under 1 % of requests here, so the p99 moves less than the wait).
    let slow_evict = sim(
        50_000.0,
        &static_buffer(2, "kind = \"two_phase_affinity\", evict_us = 1000, lent_wake = { dist = \"constant\", value_us = 1000 }"),
    );
    assert!(slow_evict.latency_us.p99 > 1.1 * fast.latency_us.p99, "{} vs {}", slow_evict.latency_us.p99, fast.latency_us.p99);
    let wait = |s: &Summary| s.harvest.as_ref().unwrap().eviction_wait_ms;
    // Request-time spent waiting on evictions (held cores free up meanwhile).
    assert!(wait(&slow_evict) > 2.0 * wait(&fast), "{} vs {}", wait(&slow_evict), wait(&fast));
    assert!(slow_evict.latency_us.p999 > fast.latency_us.p999, "{} vs {}", slow_evict.latency_us.p999, fast.latency_us.p999);
    assert_eq!(fast.harvest.as_ref().unwrap().evict_us, 30.0);
}

#[test]
fn core_time_is_conserved_between_primary_buffer_secondary_and_actuation() {
    // A constant wait on a lent core, equal to the eviction, so that every hand-over's time is known.
    let even = "mechanism = { lent_wake = { dist = \"constant\", value_us = 30 } }";
    for alloc in [
        static_buffer(2, "kind = \"two_phase_affinity\", lent_wake = { dist = \"constant\", value_us = 30 }"),
        format!("kind = \"harvest_acbf\"\nwindow_ms = 20\nobserve_windows = 5\n{even}"),
        format!("kind = \"harvest_acbf\"\nvariant = \"artifact\"\nwindow_ms = 20\n{even}"),
        "kind = \"harvest_cfs\"\nperiod_ms = 10".to_string(),
        format!("kind = \"harvest_smart\"\nmechanism = {{ kind = \"cpuset\", lent_wake = {{ dist = \"constant\", value_us = 30 }} }}"),
    ] {
        let s = sim(50_000.0, &alloc);
        let t = &s.core_time;
        // Primary running (busy), buffer and idle held cores (search), Secondary (parked),
        // evictions in progress (transition): every core-nanosecond once.
        assert_eq!(t.busy_ns + t.search_ns + t.parked_ns + t.transition_ns + t.overhead_ns, t.total_ns, "{alloc}");
        assert_eq!(t.total_ns, 8 * 550_000_000, "{alloc}"); // warm-up included
        assert!((s.cores.allocated_mean + s.be_cores_mean - 8.0).abs() < 1e-9, "{alloc}");
        // Every eviction costs the mechanism's latency, the last ones possibly cut by the end.
        let h = s.harvest.as_ref().unwrap();
        let evict_ns = (h.evict_us * 1e3) as u64;
        if !alloc.contains("cfs") {
            assert!(t.transition_ns <= h.evictions * evict_ns && t.transition_ns + 8 * evict_ns >= h.evictions * evict_ns, "{alloc}");
        }
        // Lent minus taken back = lent at the end.
        assert!(h.lends >= h.evictions && h.lends - h.evictions <= 8, "{alloc}: {h:?}");
    }
}

#[test]
fn cgroups_harvest_by_making_the_primary_wait_for_cfs() {
    let alone = sim(50_000.0, "kind = \"static\"");
    let cfs = sim(50_000.0, "kind = \"harvest_cfs\"");
    // Every idle core is shared: the Secondary gets nearly all the idle time …
    assert!(cfs.be_cores_mean > 1.0, "{}", cfs.be_cores_mean);
    // … and a Primary request that finds no idle core waits for the 1 ms wakeup preemption.
    assert!(cfs.latency_us.p99 > alone.latency_us.p99 + 900.0, "{} vs {}", cfs.latency_us.p99, alone.latency_us.p99);
    // A quota of zero cores harvests nothing.
    let none = sim(50_000.0, "kind = \"harvest_cfs\"\nquota_cores = 0");
    assert_eq!(none.be_cores_mean, 0.0);
}

#[test]
fn the_first_request_on_a_core_taken_back_pays_the_cache_refill() {
    // Buffer 0 evicts often; a 50 µs refill on each core taken back adds exactly that much busy
    // time per eviction that a request then started on (at most one per eviction), and the
    // Primary's latency grows. With 0 the run is the old model's.
    let run_with = |refill: f64| {
        sim(100_000.0, &static_buffer(0, &format!("kind = \"two_phase_affinity\", refill_us = {refill}, timeshare = {{ turn_us = 0 }}")))
    };
    let (none, cold) = (run_with(0.0), run_with(50.0));
    let evictions = cold.harvest.as_ref().unwrap().evictions;
    assert!(evictions > 100, "{evictions} evictions");
    let extra_busy = cold.core_time.busy_ns as f64 - none.core_time.busy_ns as f64;
    assert!(extra_busy > 0.0 && extra_busy <= evictions as f64 * 50_000.0, "{extra_busy} ns over {evictions} evictions");
    assert!(cold.latency_us.p99 > none.latency_us.p99, "p99 {} vs {}", cold.latency_us.p99, none.latency_us.p99);
}

#[test]
fn work_that_finds_no_held_core_idle_waits_for_the_lent_core_it_woke_on() {
    // Buffer 0 lends every idle core: nearly every request wakes on a lent core and waits the
    // scheduler's hand-over there (`lent_wake`), drawn per wake-up, not the 30 µs eviction.
    let with = |lent: &str| {
        sim(50_000.0, &static_buffer(0, &format!("kind = \"two_phase_affinity\", refill_us = 0, lent_wake = {lent}, timeshare = {{ turn_us = 0 }}")))
    };
    let (short, long) = (with("{ dist = \"constant\", value_us = 10 }"), with("{ dist = \"constant\", value_us = 110 }"));
    let d = long.latency_us.p50 - short.latency_us.p50;
    assert!((60.0..=110.0).contains(&d), "p50 moved by {d} µs for 100 µs more per hand-over");
    let (hs, hl) = (short.harvest.as_ref().unwrap(), long.harvest.as_ref().unwrap());
    assert!(hs.demand_evictions > 1000 && hl.demand_evictions > 1000, "{} / {}", hs.demand_evictions, hl.demand_evictions);
    // The default is the measured distribution: a tail, on the same requests (common random numbers).
    let measured = sim(50_000.0, &static_buffer(0, "kind = \"two_phase_affinity\", refill_us = 0, timeshare = { turn_us = 0 }"));
    let mean_like = with("{ dist = \"constant\", value_us = 20.5 }");
    assert!(measured.latency_us.p999 > mean_like.latency_us.p999, "{} vs {}", measured.latency_us.p999, mean_like.latency_us.p999);
    // And a bad one is refused by name.
    let bad = static_buffer(0, "kind = \"two_phase_affinity\", lent_wake = { dist = \"lognormal\", mean_us = 20, p99_us = 10 }");
    let err = Scenario::load(&primary(50_000.0, &bad), Format::Toml, Path::new("."), &[]).err().expect("refused").to_string();
    assert!(err.contains("policy.allocator.mechanism.lent_wake.p99_us"), "{err}");
}

/// A Xapian-like Primary (log-normal 800 µs) with bursts every 10 ms.
fn long_requests(mechanism: &str) -> Summary {
    long_requests_run(mechanism, &[]).summary
}

fn long_requests_run(mechanism: &str, overrides: &[&str]) -> microsched_sim::SimResult {
    let sc = format!(
        r#"
        duration_ms = 1000
        warmup_ms = 100
        [server]
        max_cores = 8
        queue = "central"
        [network]
        rtt_us = 100
        [load]
        rps = 2500
        on_off = {{ period_ms = 10, duty = 0.3, off_ratio = 0.2 }}
        [[workload.types]]
        name = "xapian"
        service = {{ dist = "lognormal", mean_us = 800, sigma = 0.7 }}
        [policy.allocator]
        {}
    "#,
        static_buffer(0, mechanism)
    );
    run(&sc, overrides, 7)
}

#[test]
fn a_primary_sharing_a_lent_core_waits_out_the_secondarys_turns() {
    // Buffer 0: Primary requests land on lent cores, whose Secondary stays; a request longer
    // than the Primary's turn there waits a whole 4 ms turn of the Secondary.
    let (alone, shared) = (long_requests("timeshare = { turn_us = 0 }"), long_requests(""));
    let h = shared.harvest.as_ref().unwrap();
    assert_eq!(h.timeshare_turn_us, 4000.0);
    assert!(h.secondary_turns > 10, "{h:?}");
    assert_eq!(h.secondary_turn_ms, h.secondary_turns as f64 * 4.0);
    assert_eq!(alone.harvest.as_ref().unwrap().secondary_turns, 0);
    assert!(shared.latency_us.p99 > alone.latency_us.p99 + 2000.0, "p99 {} vs {}", shared.latency_us.p99, alone.latency_us.p99);
    // The turns are the Secondary's progress, not the Primary's busy time; the cores add up.
    assert!((shared.cores.allocated_mean + shared.be_cores_mean - 8.0).abs() < 1e-9);
    // Same requests (common random numbers): the Primary's own busy time hardly moves.
    let (b0, b1) = (alone.cores.busy_mean, shared.cores.busy_mean);
    assert!((b1 - b0).abs() < 0.05 * b0, "busy cores {b1} with turns vs {b0} without");
    // A negative turn is refused by name.
    let bad = static_buffer(0, "timeshare = { turn_us = -1 }");
    let err = Scenario::load(&primary(50_000.0, &bad), Format::Toml, Path::new("."), &[]).err().expect("refused").to_string();
    assert!(err.contains("policy.allocator.mechanism.timeshare.turn_us"), "{err}");
    let bad = static_buffer(0, "timeshare = { first_turn_min_us = 6000, first_turn_max_us = 5000 }");
    let err = Scenario::load(&primary(50_000.0, &bad), Format::Toml, Path::new("."), &[]).err().expect("refused").to_string();
    assert!(err.contains("policy.allocator.mechanism.timeshare.first_turn_min_us") && err.contains("5000"), "{err}");
}

#[test]
fn the_time_series_gives_the_secondarys_turns_to_it_as_they_pass() {
    // 1 ms samples against 4 ms turns: a run's turns, booked at its start, would make an
    // interval's busy cores negative; as they pass, the series agrees with the summary.
    let r = long_requests_run("", &["metrics.sample_interval_us=1000"]);
    let (s, ts) = (&r.summary, &r.timeseries);
    assert!(s.harvest.as_ref().unwrap().secondary_turns > 10);
    let measured: Vec<usize> = (0..ts.t_ms.len()).filter(|&i| ts.t_ms[i] > 100.0).collect();
    for &i in &measured {
        assert!(ts.cores_busy[i] >= -1e-9 && ts.cores_busy[i] <= ts.cores_allocated[i] + 1e-9, "t {} ms: busy {} allocated {}", ts.t_ms[i], ts.cores_busy[i], ts.cores_allocated[i]);
    }
    let mean = |v: &Vec<f64>| measured.iter().map(|&i| v[i]).sum::<f64>() / measured.len() as f64;
    // The summary books a run's turns at its start: the two differ only by the turns of the runs
    // that straddle the window's ends (a few 4 ms turns in 900 ms of 8 cores).
    assert!((mean(&ts.cores_busy) - s.cores.busy_mean).abs() < 0.02, "series {} summary {}", mean(&ts.cores_busy), s.cores.busy_mean);
    assert!((mean(&ts.cores_allocated) - s.cores.allocated_mean).abs() < 0.02, "series {} summary {}", mean(&ts.cores_allocated), s.cores.allocated_mean);
}
