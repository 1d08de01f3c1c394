//! Any scenario either fails to load with an error naming a field, is refused by the cost
//! estimate, or runs with bounded memory: a property test over generated scenarios whose keys
//! take ordinary, extreme and non-finite values.

use std::path::Path;
use std::time::Instant;


use microsched_core::scenario::{Format, Scenario, MAX_SAMPLES};
use proptest::prelude::*;

const VALUES: &[&str] = &[
    "0", "-1", "1e-9", "0.001", "0.5", "1", "3", "50", "1e6", "1e9", "1e15", "1e300", "nan", "inf", "-inf",
    "9223372036854775807", "\"abc\"", "true",
];

fn value() -> impl Strategy<Value = String> {
    prop_oneof![
        // Mostly ordinary values, so that many scenarios load and run.
        1 => prop::sample::select(VALUES).prop_map(str::to_string),
        6 => (1u32..20).prop_map(|v| format!("{v}")),
    ]
}

fn scenario() -> impl Strategy<Value = String> {
    (value(), value(), value(), value(), value(), value(), value(), value()).prop_map(
        |(duration, warmup, fraction, mean, sessions, sample, rtt, cores)| {
            format!(
                "duration_ms = {duration}\nwarmup_ms = {warmup}\n\
                 [server]\nmax_cores = {cores}\n[network]\nrtt_us = {rtt}\n[clients]\nsessions = {sessions}\n\
                 [load]\nfraction = {fraction}\n[metrics]\nsample_interval_us = {sample}\n\
                 [[workload.types]]\nname = \"a\"\nservice = {{ dist = \"exponential\", mean_us = {mean} }}\n"
            )
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn errors_name_a_field_or_the_run_is_bounded(text in scenario()) {
        match Scenario::load(&text, Format::Toml, Path::new("."), &[]) {
            Err(e) => prop_assert!(!e.field.is_empty() && e.field != "scenario", "{e}"),
            Ok(loaded) => match loaded.check_resources(false) {
                Err(e) => prop_assert!(e.message.contains("too large") && !e.field.is_empty(), "{e}"),
                Ok(est) => {
                    prop_assert!(est.samples <= MAX_SAMPLES + 1);
                    // Run at most 0.2 s of wall time: what matters is that it starts and its
                    // memory is bounded, not that it finishes.
                    let start = Instant::now();
                    let r = microsched_sim::run_with(&loaded, None, false, &mut |_, _| start.elapsed().as_secs_f64() < 0.2)
                        .expect("validated");
                    prop_assert!(r.timeseries.t_ms.len() as u64 <= MAX_SAMPLES + 1);
                }
            },
        }
    }
}

/// A run stopped by its check measures the same as a run whose window ends where the stopped
/// one's does: every response it counts landed inside its window (responses booked at their
/// completion land half an RTT after it, past the stop).
#[test]
fn an_interrupted_run_counts_only_responses_that_landed_in_its_window() {
    let sc = |duration_ms: f64| {
        format!(
            r#"
            duration_ms = {duration_ms}
            warmup_ms = 2
            [server]
            max_cores = 4
            [network]
            rtt_us = 40
            [load]
            fraction = 0.7
            [[workload.types]]
            name = "exp"
            service = {{ dist = "exponential", mean_us = 5 }}
            [metrics]
            record_requests = false
            sample_interval_us = 100000
            "#
        )
    };
    let load = |text: &str| Scenario::load(text, Format::Toml, Path::new("."), &[]).expect("valid");
    let stop_at = 30_000_000;
    let cut = microsched_sim::run_with(&load(&sc(100.0)), Some(3), false, &mut |now, _| now < stop_at).expect("runs");
    let stopped = cut.summary.sim.interrupted_at_ms.expect("stopped by its check");
    assert!((30.0..100.0).contains(&stopped), "{stopped}");
    let window_ms = cut.summary.duration_s * 1e3;
    let whole = microsched_sim::run(&load(&sc(window_ms)), Some(3)).expect("runs");
    assert_eq!(cut.summary.requests.completed, whole.summary.requests.completed);
    assert_eq!(cut.summary.latency_us, whole.summary.latency_us);
}
