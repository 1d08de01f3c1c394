//! `server.irq.per_request`: the IRQ work each Primary request brings (HarvestContainers §3.5:
//! the NIC's interrupt and the veth pair's softirqs), against the constant stream it replaces
//! in a named condition of the harvest reproduction.

use crate::common;

use common::{harvest_primary, run};
use microsched_core::summary::{Irq, Summary};

/// A container's receive path: 3 handler runs of 1 µs per request.
const PER_REQUEST: &str = "irq = { per_request = { handlers = 3, cost_us = 1 }, steering = \"STEER\" }";
/// NetworkBully's constant stream of experiments/harvest/gen.py.
const CONSTANT: &str = "irq = { rate_per_s = 600000, cost_us = 1, steering = \"STEER\" }";
const STANDALONE: &str = "kind = \"static\"";
const BUFFER_2: &str = "kind = \"harvest_static\"\nbuffer = 2";

fn sim(rps: f64, allocator: &str, irq: &str, steering: &str, seed: u64) -> Summary {
    run(&harvest_primary(rps, 0.3, 0.2, &irq.replace("STEER", steering), allocator), &[], seed).summary
}

/// All the IRQ time of the run, wherever it landed.
fn irq_time(i: &Irq) -> f64 {
    i.in_service_ns as f64 + i.held_idle_ns + i.secondary_ns
}

#[test]
fn per_request_irq_time_doubles_with_the_request_rate_where_the_constant_does_not_move() {
    for seed in 1..=2 {
        let (lo, hi) = (sim(25_000.0, STANDALONE, PER_REQUEST, "spread", seed), sim(50_000.0, STANDALONE, PER_REQUEST, "spread", seed));
        let (il, ih) = (lo.irq.as_ref().unwrap(), hi.irq.as_ref().unwrap());
        let r = irq_time(ih) / irq_time(il);
        // Arrivals over 0.5 s are ~12 500 and ~25 000: the ratio's sampling error is ~1 %.
        assert!((r - 2.0).abs() < 0.1, "seed {seed}: per-request IRQ time grew ×{r}");
        // The rate a held core sees grows with it too (most of both runs' cores are idle).
        let hr = ih.held_core_rate_per_s / il.held_core_rate_per_s;
        assert!((hr - 2.0).abs() < 0.15, "seed {seed}: held-core rate ×{hr}");
        // The same property fails under the constant stream: its IRQ time is the rate's.
        let (cl, ch) = (sim(25_000.0, STANDALONE, CONSTANT, "spread", seed), sim(50_000.0, STANDALONE, CONSTANT, "spread", seed));
        let c = irq_time(ch.irq.as_ref().unwrap()) / irq_time(cl.irq.as_ref().unwrap());
        assert!((c - 1.0).abs() < 0.05, "seed {seed}: constant IRQ time moved ×{c}");
    }
}

#[test]
fn per_request_work_is_the_arrivals_times_the_handlers_and_all_of_it_is_accounted() {
    for alloc in [STANDALONE, BUFFER_2] {
        let s = sim(50_000.0, alloc, PER_REQUEST, "spread", 3);
        let i = s.irq.as_ref().unwrap();
        // 3 handler runs per arrival: 50 k/s over the 0.55 s run, within its Poisson noise.
        assert_eq!(i.per_request_handlers % 3, 0, "{alloc}");
        assert!((i.per_request_rate_per_s / 150_000.0 - 1.0).abs() < 0.03, "{alloc}: {}", i.per_request_rate_per_s);
        // Every handler's µs is somewhere: stretched requests, idle held cores, lent cores.
        let placed = i.per_request_handlers as f64 * 1_000.0;
        assert!((irq_time(i) - placed).abs() < 1.0, "{alloc}: {} vs {placed}", irq_time(i));
        assert!(i.in_service_ns > 0 && i.held_idle_ns > 0.0, "{alloc}");
        // Core time stays conserved.
        let t = &s.core_time;
        assert_eq!(t.busy_ns + t.search_ns + t.parked_ns + t.transition_ns + t.overhead_ns, t.total_ns);
        if alloc == STANDALONE {
            assert_eq!(i.secondary_ns, 0.0, "nothing lent, nothing lands on the Secondary");
        } else {
            assert!(i.secondary_ns > 0.0);
        }
    }
}

#[test]
fn per_request_irqs_inflate_the_tail_and_steering_removes_them() {
    for seed in 1..=3 {
        let none = sim(50_000.0, BUFFER_2, "", "spread", seed);
        let spread = sim(50_000.0, BUFFER_2, PER_REQUEST, "spread", seed);
        let steered = sim(50_000.0, BUFFER_2, PER_REQUEST, "secondary", seed);
        assert!(spread.latency_us.p99 > none.latency_us.p99, "seed {seed}");
        // Steered onto the Secondary's cores, the Primary's requests run as without IRQs.
        assert_eq!(steered.latency_us, none.latency_us, "seed {seed}");
        let i = steered.irq.as_ref().unwrap();
        assert_eq!((i.in_service_ns, i.held_idle_ns, i.held_core_rate_per_s), (0, 0.0, 0.0));
        assert_eq!(i.secondary_ns, i.per_request_handlers as f64 * 1_000.0);
    }
}

#[test]
fn without_per_request_the_constant_model_is_unchanged() {
    // The same scenario with the key absent and with only the constant: identical runs (the
    // goldens check every existing scenario the same way).
    let a = sim(50_000.0, BUFFER_2, CONSTANT, "spread", 4);
    let i = a.irq.as_ref().unwrap();
    assert_eq!((i.per_request_handlers, i.per_request_rate_per_s), (0, 0.0));
    assert!((i.held_core_rate_per_s - 75_000.0).abs() < 1e-9);
    let json = serde_json::to_value(i).unwrap();
    assert!(json.get("per_request_handlers").is_none() && json.get("per_request_rate_per_s").is_none());
}

#[test]
fn per_request_bad_input_names_the_field_and_the_allowed_values() {
    let load = |irq: &str| {
        let s = harvest_primary(50_000.0, 0.3, 0.2, irq, STANDALONE);
        microsched_sim::Scenario::load(&s, microsched_sim::Format::Toml, std::path::Path::new("."), &[]).unwrap_err()
    };
    let e = load("irq = { per_request = { handlers = 0, cost_us = 1 } }");
    assert!(e.field == "server.irq.per_request.handlers" && e.message.contains("1 to 16"), "{e}");
    let e = load("irq = { per_request = { handlers = 3, cost_us = 0 } }");
    assert_eq!(e.field, "server.irq.per_request.cost_us");
    let e = load("irq = { per_request = { handlers = 3, cost_us = 1 }, steering = \"idle_first\" }");
    assert!(e.field == "server.irq.per_request" && e.message.contains("spread") && e.message.contains("secondary"), "{e}");
    let e = load("irq = { per_request = { handlers = 3 } }");
    assert!(e.to_string().contains("cost_us"), "{e}");
}
