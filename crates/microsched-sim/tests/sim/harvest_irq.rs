//! HarvestContainers' NIC IRQ interference and steering (Fig. 8, Table 1) and several Primaries
//! on their own core sets (Fig. 5, §5.6), on scaled-down seeded runs.

use crate::common;

use common::{harvest_primary, run};
use microsched_core::summary::Summary;

/// The harvest Primary at 50 k requests/s in 30 % ON bursts, with `irq` in `[server]`.
fn primary(allocator: &str, irq: &str) -> String {
    harvest_primary(50_000.0, 0.3, 0.2, irq, allocator)
}

/// NetworkBully's load as in experiments/harvest/gen.py: 600 k handlers/s of 1 µs on the node.
fn irq(steering: &str) -> String {
    format!("irq = {{ rate_per_s = 600000, cost_us = 1, steering = \"{steering}\" }}")
}

const STATIC: &str = "kind = \"static\"";
const BUFFER_2: &str = "kind = \"harvest_static\"\nbuffer = 2";

fn sim(allocator: &str, irq: &str, seed: u64) -> Summary {
    run(&primary(allocator, irq), &[], seed).summary
}

fn modes_sum(s: &Summary) -> u64 {
    let t = &s.core_time;
    t.busy_ns + t.search_ns + t.parked_ns + t.transition_ns + t.overhead_ns
}

#[test]
fn irq_core_time_is_conserved() {
    for alloc in [STATIC, BUFFER_2] {
        let with = sim(alloc, &irq("spread"), 3);
        let i = with.irq.as_ref().expect("irq section");
        // Every core-ns is in exactly one mode, IRQ handlers included (they are busy time of the
        // request they interrupt, or the idle / Secondary time they land in).
        assert_eq!(modes_sum(&with), with.core_time.total_ns, "{alloc}");
        assert_eq!(i.in_service_ns, i.in_service_count * 1_000, "{alloc}: handlers of 1 µs");
        // Handlers land on a running request at the per-core rate, nested ones included: the
        // time drawn is rate × cost × busy time (the busy time counts the handlers themselves).
        let lc = i.held_core_rate_per_s * 1e-9 * 1_000.0;
        assert!((i.held_core_rate_per_s - 75_000.0).abs() < 1e-9);
        let expect = lc * with.core_time.busy_ns as f64;
        assert!((i.in_service_ns as f64 / expect - 1.0).abs() < 0.05, "{alloc}: {} vs {expect}", i.in_service_ns);
        // Busy, idle and lent time together receive the node's whole IRQ load.
        let t = with.core_time.total_ns as f64 / 8.0;
        let total = i.in_service_ns as f64 + i.held_idle_ns + i.secondary_ns;
        assert!((total / (600_000.0 * 1e-9 * 1_000.0 * t) - 1.0).abs() < 0.01, "{alloc}: {total}");
        if alloc == STATIC {
            assert_eq!(i.secondary_ns, 0.0);
            // The same requests run on the same cores: the busy time grows by the handlers'
            // time, up to the requests still running at the end.
            let without = sim(alloc, "", 3);
            let grown = with.core_time.busy_ns as f64 - without.core_time.busy_ns as f64;
            assert!((grown / i.in_service_ns as f64 - 1.0).abs() < 0.01, "busy grew {grown}, handlers {}", i.in_service_ns);
            assert_eq!(with.requests.generated, without.requests.generated);
        } else {
            assert!(i.secondary_ns > 0.0 && with.be_cores_mean > 0.0);
        }
    }
}

#[test]
fn steering_lowers_the_primarys_p99_to_its_value_without_irqs() {
    for seed in 1..=3 {
        let none = sim(BUFFER_2, "", seed);
        let spread = sim(BUFFER_2, &irq("spread"), seed);
        let steered = sim(BUFFER_2, &irq("secondary"), seed);
        assert!(
            steered.latency_us.p99 < spread.latency_us.p99,
            "seed {seed}: steered p99 {} spread {}",
            steered.latency_us.p99,
            spread.latency_us.p99
        );
        assert!(spread.latency_us.p99 > none.latency_us.p99);
        // Steered handlers never run on a core the Primary holds: its requests are untouched,
        // while the Secondary's cores absorb the whole load (0.6 cores).
        assert_eq!(steered.latency_us, none.latency_us, "seed {seed}");
        assert_eq!(steered.be_cores_mean, none.be_cores_mean);
        let i = steered.irq.as_ref().unwrap();
        assert_eq!((i.in_service_ns, i.held_idle_ns), (0, 0.0));
        assert!((i.secondary_cores_mean - 0.6).abs() < 1e-9);
    }
}

/// Three Primaries (Memcached-, MySQL-, Xapian-like), each on 8 cores of its own.
fn three(alloc: &str, memcached_rps: f64) -> String {
    let app = |name: &str, mean: u32, sigma: f64, rps: u32, period: u32| {
        format!(
            r#"
        [[applications]]
        name = "{name}"
        workload = {{ types = [{{ name = "{name}", service = {{ dist = "lognormal", mean_us = {mean}, sigma = {sigma} }} }}] }}
        load = {{ rps = {rps}, on_off = {{ period_ms = {period}, duty = 0.3, off_ratio = 0.2 }} }}
        allocator = {{ {alloc} }}
        "#,
            alloc = alloc.replace('\n', ", ")
        )
    };
    let mut s = primary(alloc, "per_application_cores = true").replace("rps = 50000", &format!("rps = {memcached_rps}"));
    s.push_str(&app("mysql", 300, 0.6, 4000, 5));
    s.push_str(&app("xapian", 800, 0.7, 2500, 10));
    s.replace("duration_ms = 500", "duration_ms = 1500")
}

#[test]
fn several_primaries_each_keep_their_standalone_latency_when_nothing_is_lent() {
    let alone = run(&three(STATIC, 50_000.0), &[], 5).summary;
    assert_eq!(alone.nodes.len(), 3);
    assert_eq!(alone.applications.len(), 3);
    // A buffer of every core lends nothing: each Primary's latencies to the nanosecond.
    let held = run(&three("kind = \"harvest_static\"\nbuffer = 8", 50_000.0), &[], 5).summary;
    assert_eq!(held.be_cores_mean, 0.0);
    for (a, b) in alone.applications.iter().zip(&held.applications) {
        assert_eq!(a.latency_us, b.latency_us, "{}", a.name);
    }
    // The first Primary is the one-Primary scenario's, exactly (same streams, its own node).
    let one = run(&primary(STATIC, "").replace("duration_ms = 500", "duration_ms = 1500"), &[], 5).summary;
    assert_eq!(alone.applications[0].latency_us, one.latency_us);
    // The others do not feel the first one's load: core sets are not shared.
    let busier = run(&three(STATIC, 90_000.0), &[], 5).summary;
    for k in 1..3 {
        assert_eq!(alone.applications[k].latency_us, busier.applications[k].latency_us, "{}", alone.applications[k].name);
    }
    assert!(busier.applications[0].requests.generated > alone.applications[0].requests.generated * 3 / 2);
}

#[test]
fn several_primaries_harvests_add_up() {
    let acbf = "kind = \"harvest_acbf\"\nwindow_ms = 20\nobserve_windows = 5";
    let s = run(&three(acbf, 50_000.0), &[], 2).summary;
    let h = s.harvest.as_ref().unwrap();
    let per: Vec<_> = s.nodes.iter().map(|n| n.harvest.clone().unwrap()).collect();
    let be: f64 = s.nodes.iter().map(|n| n.be_cores_mean).sum();
    assert!((s.be_cores_mean - be).abs() < 1e-12 && be > 0.0);
    assert_eq!(h.lends, per.iter().map(|p| p.lends).sum::<u64>());
    assert!((h.buffer_mean - per.iter().map(|p| p.buffer_mean).sum::<f64>()).abs() < 1e-9);
    assert_eq!(modes_sum(&s), s.core_time.total_ns);
    assert_eq!(s.core_time.total_ns, 3 * 8 * 1_550_000_000);
}

#[test]
fn per_application_cores_bad_input_names_the_field() {
    let bad = three(STATIC, 50_000.0).replace("per_application_cores = true", "per_application_cores = true\nreplicas = 2");
    let e = microsched_sim::Scenario::load(&bad, microsched_sim::Format::Toml, std::path::Path::new("."), &[]).unwrap_err();
    assert_eq!(e.field, "server.replicas");
    let bad = three(STATIC, 50_000.0).replace("per_application_cores = true", "");
    let e = microsched_sim::Scenario::load(&bad, microsched_sim::Format::Toml, std::path::Path::new("."), &[]).unwrap_err();
    assert_eq!(e.field, "applications[0].allocator");
    let bad = primary(STATIC, "irq = { rate_per_s = 1e7 }");
    let e = microsched_sim::Scenario::load(&bad, microsched_sim::Format::Toml, std::path::Path::new("."), &[]).unwrap_err();
    assert_eq!(e.field, "server.irq.rate_per_s");
}
