//! `clients.burst = "credits"`: each arrival of a session is a burst of its free credits, sent at
//! once and reaching the server together, without changing the offered rate; off by default.

use std::collections::HashMap;

use crate::common::{run_with, BREAKWATER_16};

/// `common::BREAKWATER_16` at half of capacity with 20 sessions of queue 4, for 30 ms, Breakwater
/// from its pool ceiling (every session holds spare credits, as in the CoreSync reproduction),
/// every request recorded.
const BURSTY: &[&str] = &[
    "duration_ms=30",
    "clients.sessions=20",
    "clients.queue_capacity=4",
    "load.fraction=0.5",
    "policy.overload.initial_pool=4000000000",
    "metrics.record_requests=true",
];

/// Sizes of the groups of requests a session created at the same instant, and whether each
/// group reached the server at one instant, one network trip later.
fn bursts(overrides: &[&str]) -> (Vec<usize>, bool, u64) {
    let r = run_with(BREAKWATER_16, BURSTY, overrides, 5);
    let log = r.requests.expect("record_requests = true");
    let mut groups: HashMap<(u64, u64), Vec<usize>> = HashMap::new();
    for i in 0..log.id.len() {
        groups.entry((log.session[i], log.created_ns[i])).or_default().push(i);
    }
    let together = groups.values().filter(|g| g.len() > 1).all(|g| {
        g.iter().all(|&i| log.server_arrival_ns[i] == log.created_ns[i] + 5_000 && log.dropped[i] == 0)
    });
    (groups.values().map(Vec::len).collect(), together, r.summary.requests.generated)
}

#[test]
fn credit_bursts_reach_the_server_together_at_the_same_offered_rate() {
    let (off, _, generated_off) = bursts(&[]);
    let (on, together, generated_on) = bursts(&["clients.burst=\"credits\""]);
    let n_off: usize = off.iter().sum();
    let n_on: usize = on.iter().sum();
    // Off (the default): Poisson arrivals, one request per instant per session (two arrivals
    // of a session may still fall on the same nanosecond).
    let paired_off: usize = off.iter().filter(|&&g| g > 1).sum();
    assert!((paired_off as f64) < 0.001 * n_off as f64, "{paired_off} of {n_off} requests share an instant without the option");
    // On: every session holds more spare credits than its queue (4) lets it send at once, so
    // nearly every arrival is a full burst of 4 (the last of a run may be cut by its end).
    let full = on.iter().filter(|&&g| g == 4).map(|&g| g).sum::<usize>();
    assert!(full as f64 > 0.9 * n_on as f64, "{full} of {n_on} requests in bursts of 4");
    assert!(on.iter().all(|&g| g <= 4), "a burst never exceeds clients.queue_capacity");
    assert!(together, "a burst is sent at once: every request of it reaches the server one trip after its creation");
    // The offered rate is the same: a burst of k stands for k arrivals of the stream.
    let ratio = generated_on as f64 / generated_off as f64;
    assert!((ratio - 1.0).abs() < 0.03, "generated {generated_on} with bursts, {generated_off} without");
    assert!((n_on as f64 / n_off as f64 - 1.0).abs() < 0.03, "ended {n_on} with bursts, {n_off} without");
}

#[test]
fn a_burst_is_the_sessions_free_credits_when_fewer_than_its_queue() {
    // A pool of 100 credits for 20 sessions (5 each) and a low load: a session's burst is the
    // few credits it holds free, never the queue's 16.
    let (on, _, _) = bursts(&["clients.burst=\"credits\"", "clients.queue_capacity=16",
                              "policy.overload.initial_pool=100", "load.fraction=0.05", "duration_ms=10"]);
    let largest = *on.iter().max().unwrap();
    let in_bursts: usize = on.iter().filter(|&&g| g > 1).sum();
    eprintln!("largest {largest}, {in_bursts} of {} requests in bursts", on.iter().sum::<usize>());
    assert!(in_bursts > 0, "sessions do hold spare credits at times");
    assert!(largest < 16, "bursts of the credits held, not of the queue: largest {largest}");
}
