//! The CoreSync artifact's Breakwater v2 details in the simulator: the worker-start drop
//! (`policy.overload.latency_budget_us`) reported as its own counter.

use crate::common;

use common::{run_with, BREAKWATER_16};
use microsched_sim::SimResult;

/// `common::BREAKWATER_16` (1.5× capacity, Breakwater 80/160 µs) with the CoreSync scripts'
/// completion trigger; no warm-up, so the window's counters cover the whole run and can be
/// checked against the conservation counts.
const ARTIFACT: &[&str] = &["warmup_ms=0", "policy.overload.trigger=\"completion\""];

fn run_artifact(overrides: &[&str], seed: u64) -> SimResult {
    run_with(BREAKWATER_16, ARTIFACT, overrides, seed)
}

#[test]
fn worker_start_drops_are_counted_apart_from_aqm_drops() {
    let off = run_artifact(&[], 3).summary;
    let c = off.credits.as_ref().unwrap();
    assert_eq!(c.start_drops, None, "no budget, no counter");
    assert_eq!(off.requests.dropped, c.aqm_drops + c.client_drops);

    // A budget below the AQM threshold: requests admitted on arrival may start too late (and
    // those drops keep the delay below the AQM threshold, which then never fires).
    let on = run_artifact(&["policy.overload.latency_budget_us=20"], 3).summary;
    let c = on.credits.as_ref().unwrap();
    let start = c.start_drops.expect("counted with a budget");
    assert!(start > 0, "{c:?}");
    // Every drop is one of the three kinds, each counted once.
    assert_eq!(on.requests.dropped, c.aqm_drops + start + c.client_drops, "{c:?} {:?}", on.requests);
    assert_eq!(on.nodes.first().and_then(|n| n.credits.as_ref()).and_then(|c| c.start_drops), Some(start));
    // At the artifact's setting (budget = AQM threshold) the start check rarely fires: the
    // arrival check already keeps the delay near it.
    let at = run_artifact(&["policy.overload.latency_budget_us=160"], 3).summary;
    assert!(at.credits.as_ref().unwrap().start_drops.unwrap() < start);
}

#[test]
fn worker_start_drops_cover_the_measured_window_only() {
    let whole = run_artifact(&["policy.overload.latency_budget_us=20"], 5).summary;
    let window = run_artifact(&["policy.overload.latency_budget_us=20", "warmup_ms=10", "duration_ms=10"], 5).summary;
    let (w, a) = (window.credits.unwrap().start_drops.unwrap(), whole.credits.unwrap().start_drops.unwrap());
    assert!(w > 0 && w < a, "window {w} vs whole run {a}");
}
