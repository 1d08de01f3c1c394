//! The simulator against queueing theory. Tolerances come from the run itself: batch-means
//! standard errors, and a two-sided bound of 4 standard errors (a false alarm rate below 1e-3
//! even with the t distribution's heavier tails at 20–40 batches), never from a picked number.

use crate::common;

use common::{batch_means, run, window_qdelays};

const MMC: &str = include_str!("../../../../experiments/validation/mmc.toml");
const Z: f64 = 4.0;

fn erlang_c(c: u32, a: f64) -> f64 {
    let mut term = 1.0;
    let mut sum = 0.0;
    for k in 0..c {
        if k > 0 {
            term *= a / k as f64;
        }
        sum += term;
    }
    let last = term * a / c as f64 * c as f64 / (c as f64 - a);
    last / (sum + last)
}

#[test]
fn mmc_matches_erlang_c() {
    // 1 s measured at 1.28 M req/s: 1.28 M requests in 32 batches of 40 k (the M/M/16 queue at
    // ρ = 0.8 forgets its state within a few hundred µs, far shorter than a 31 ms batch).
    let r = run(MMC, &["duration_ms=1000", "warmup_ms=20", "metrics.record_requests=true"], 7);
    let q = window_qdelays(&r, 20_000_000);
    let (c, a) = (16, 12.8);
    let p_wait = erlang_c(c, a);
    let wq_ns = p_wait / (c as f64 * 1e-4 - 1.28e-3 * 1.0) ; // C / (cμ − λ), rates per ns
    let (m, se) = batch_means(&q, 32);
    assert!((m - wq_ns).abs() < Z * se, "E[Wq] = {m:.1} ns, Erlang C {wq_ns:.1} ns, se {se:.1}");
    let waited: Vec<f64> = q.iter().map(|&d| if d > 0.0 { 1.0 } else { 0.0 }).collect();
    let (pw, se_pw) = batch_means(&waited, 32);
    assert!((pw - p_wait).abs() < Z * se_pw, "P(wait) = {pw:.4}, Erlang C {p_wait:.4}, se {se_pw:.4}");
    // The summary's mean is the same quantity over the same window (responses in the window).
    assert!((r.summary.queueing_delay_us.mean * 1e3 - wq_ns).abs() < Z * se);
}

#[test]
fn mg1_matches_pollaczek_khinchine() {
    // One core, bimodal service 1 µs (p = 0.9) / 10 µs (p = 0.1): E[S] = 1.9 µs, E[S²] = 10.9 µs²,
    // load 0.7. Wq = λ E[S²] / (2 (1 − ρ)).
    let toml = r#"
        duration_ms = 1000
        warmup_ms = 20
        [server]
        max_cores = 1
        queue = "central"
        [load]
        fraction = 0.7
        [[workload.types]]
        name = "bimodal"
        service = { dist = "bimodal", modes = [{ value_us = 1.0, prob = 0.9 }, { value_us = 10.0, prob = 0.1 }] }
        [metrics]
        record_requests = true
    "#;
    let r = run(toml, &[], 11);
    let q = window_qdelays(&r, 20_000_000);
    let lambda_per_us = 0.7 / 1.9;
    let wq_ns = lambda_per_us * 10.9 / (2.0 * 0.3) * 1e3;
    let (m, se) = batch_means(&q, 40);
    assert!((m - wq_ns).abs() < Z * se, "E[Wq] = {m:.1} ns, P-K {wq_ns:.1} ns, se {se:.1}");
    // Utilisation of the single core is ρ: busy fraction over 1 s, standard error ~ 1e-3.
    assert!((r.summary.cores.busy_mean - 0.7).abs() < 0.01, "busy {}", r.summary.cores.busy_mean);
}
