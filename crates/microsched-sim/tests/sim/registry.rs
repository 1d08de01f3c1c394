//! A policy added by its file and one registry line runs by its `kind` alone
//! (`alloc/queue_threshold.rs`, the worked example of the policy docs).

use crate::common::run;

const SCENARIO: &str = r#"
    duration_ms = 20
    warmup_ms = 2
    [server]
    max_cores = 8
    queue = "per_core"
    steal = true
    [network]
    rtt_us = 10
    [load]
    fraction = 0.6
    [[workload.types]]
    name = "exp"
    service = { dist = "exponential", mean_us = 10.0 }
"#;

#[test]
fn a_registered_allocator_runs_by_its_kind_and_its_parameter_is_live() {
    let eager = run(SCENARIO, &[r#"policy.allocator={kind="queue_threshold", grant_above=0.0}"#], 3);
    let never = run(SCENARIO, &[r#"policy.allocator={kind="queue_threshold", grant_above=1e9}"#], 3);
    assert_eq!(eager.summary.allocator, "queue_threshold");
    // Granting on any waiting request holds most of the 8 cores at 0.6 load (4.8 busy); never
    // granting keeps the one core a dynamic allocator starts with, which cannot keep up.
    assert!(eager.summary.cores.allocated_mean > 4.8, "{}", eager.summary.cores.allocated_mean);
    assert!(never.summary.cores.allocated_mean < 1.01, "{}", never.summary.cores.allocated_mean);
    assert!(eager.summary.requests.completed > 2 * never.summary.requests.completed);
}

#[test]
fn its_parameters_are_checked_by_name() {
    let err = microsched_sim::Scenario::load(SCENARIO, microsched_sim::Format::Toml, std::path::Path::new("."), &[r#"policy.allocator={kind="queue_threshold", grant_above=-1.0}"#.to_string()])
        .unwrap_err();
    assert_eq!(err.field, "policy.allocator.grant_above", "{err}");
}
