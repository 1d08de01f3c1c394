//! Condition variables in request programs (`workload.condvars`, `wait`/`signal` steps): a wait
//! that finds an item never blocks, one that finds none leaves its core until a signal, ASQM
//! refuses a wait past the budget (the request dropped as at a lock), `try_lock` never refuses
//! one, and a signal with no waiter keeps its item (no lost wake-ups).

use crate::common::run;
use microsched_core::summary::{CondvarSummary, Summary};

/// Producers and consumers over one condvar on 2 cores, 40 µs of work each, at `rps`:
/// `consume` of the requests consume. `extra` adds top-level keys (e.g. `[server.lock_control]`
/// must come after `server`).
fn producer_consumer(rps: f64, consume: f64, server: &str) -> String {
    format!(
        r#"
        duration_ms = 400
        warmup_ms = 50
        [server]
        max_cores = 2
        {server}
        [network]
        rtt_us = 10
        [load]
        rps = {rps}
        [[workload.locks]]
        name = "q"
        [[workload.condvars]]
        name = "cv"
        lock = "q"
        [[workload.types]]
        name = "produce"
        ratio = {p}
        service = {{ dist = "constant", value_us = 40 }}
        paths = [{{ steps = [
            {{ op = "compute", share = 0.5 }},
            {{ op = "signal", condvar = "cv", share = 0.25 }},
            {{ op = "compute", share = 0.25 }},
        ] }}]
        [[workload.types]]
        name = "consume"
        ratio = {consume}
        service = {{ dist = "constant", value_us = 40 }}
        paths = [{{ steps = [
            {{ op = "compute", share = 0.5 }},
            {{ op = "wait", condvar = "cv", share = 0.25 }},
            {{ op = "compute", share = 0.25 }},
        ] }}]
        "#,
        p = 1.0 - consume
    )
}

fn cv(s: &Summary) -> &CondvarSummary {
    assert_eq!(s.condvars.len(), 1, "one condvar reported");
    &s.condvars[0]
}

fn conserved(s: &Summary) {
    let r = &s.requests;
    assert_eq!(r.generated, r.completed + r.dropped + r.in_flight, "{r:?}");
}

/// A request that signals and then waits always finds an item (its own or another's): no wait
/// ever blocks, every request completes, and every signal is counted.
#[test]
fn a_wait_that_finds_an_item_does_not_block() {
    let toml = r#"
        duration_ms = 200
        warmup_ms = 0
        [server]
        max_cores = 2
        [load]
        rps = 20000
        [[workload.locks]]
        name = "q"
        [[workload.condvars]]
        name = "cv"
        lock = "q"
        [[workload.types]]
        name = "both"
        service = { dist = "constant", value_us = 10 }
        paths = [{ steps = [
            { op = "signal", condvar = "cv", share = 0.5 },
            { op = "wait", condvar = "cv", share = 0.5 },
        ] }]
    "#;
    let s = run(toml, &[], 1).summary;
    let c = cv(&s);
    assert_eq!((c.waits, c.wakeups, c.drops), (0, 0, 0), "{c:?}");
    assert!(c.signals > 3000, "{c:?}");
    assert_eq!(c.items_left, 0, "every item signalled was taken by its own wait");
    conserved(&s);
}

/// Consumers that find the queue empty wait (off their core) until a producer signals: waits
/// and wake-ups are counted, wake-ups never outnumber signals, the woken waits took time, and the
/// consumers' latency is far above the producers' (they waited for items). Nothing is lost:
/// items left + items taken = signals, every request completes or is still in flight.
#[test]
fn a_wait_without_an_item_blocks_until_a_signal() {
    let s = run(&producer_consumer(5000.0, 0.5, ""), &[], 3).summary;
    let c = cv(&s);
    assert!(c.waits > 20 && c.wakeups > 20, "{c:?}");
    // Each wake-up is a signal's (a waiter may have begun waiting before the window).
    assert!(c.wakeups <= c.signals, "{c:?}");
    assert!(c.wait_us.p50 > 40.0, "a woken consumer waited for a producer: {c:?}");
    assert_eq!(c.drops, 0, "no lock_control: no refusal");
    let by = |n: &str| s.applications[0].by_type.iter().find(|t| t.name == n).expect("type").latency_us.p99;
    assert!(by("consume") > 5.0 * by("produce"), "consume p99 {} vs produce {}", by("consume"), by("produce"));
    conserved(&s);
    assert!(s.lock_control.is_none());
}

/// With more consumers than producers, waiters pile up without ASQM (waits grow with the run);
/// under ASQM a consumer whose accumulated delay plus the oldest waiter's age exceeds the
/// budget is refused and dropped, so woken waits stay near the budget. try_lock never refuses a
/// wait (its drops are at held locks only).
#[test]
fn asqm_refuses_waits_past_the_budget_and_try_lock_never_does() {
    let plain = run(&producer_consumer(5000.0, 0.6, ""), &[], 5).summary;
    let asqm = run(&producer_consumer(5000.0, 0.6, "lock_control = { mode = \"asqm\", budget_us = 500 }"), &[], 5).summary;
    let try_lock = run(&producer_consumer(5000.0, 0.6, "lock_control = { mode = \"try_lock\" }"), &[], 5).summary;
    let (p, a, t) = (cv(&plain), cv(&asqm), cv(&try_lock));
    assert_eq!(p.drops, 0);
    assert!(p.wait_us.p99 > 20_000.0, "without ASQM the excess consumers' waits grow: {p:?}");
    assert!(a.drops > 100, "{a:?}");
    let lc = asqm.lock_control.as_ref().expect("lock_control summary");
    assert!(lc.drops >= a.drops, "condvar refusals are drops of the lock_control total: {} < {}", lc.drops, a.drops);
    // The oldest waiter's age is a lower bound of a joiner's wait (it waits for every waiter
    // ahead of it too), so woken waits exceed the budget, but not by the plain run's orders.
    assert!(a.wait_us.p99 * 5.0 < p.wait_us.p99, "ASQM bounds the waits: {a:?} vs without {p:?}");
    assert_eq!(t.drops, 0, "try_lock never refuses a condvar wait: {t:?}");
    assert!(t.waits > 100, "{t:?}");
    for s in [&plain, &asqm, &try_lock] {
        conserved(s);
    }
}

/// Same seed, same run (the condvar state is deterministic).
#[test]
fn condvar_runs_are_deterministic() {
    let toml = producer_consumer(5000.0, 0.6, "lock_control = { mode = \"asqm\", budget_us = 500 }");
    let (a, b) = (run(&toml, &[], 9).summary, run(&toml, &[], 9).summary);
    assert_eq!(a.condvars, b.condvars);
    assert_eq!(a.requests, b.requests);
}

/// Bad condvar declarations and steps are refused with the field named.
#[test]
fn condvar_validation_names_the_field() {
    use microsched_core::scenario::{Format, Scenario};
    let base = producer_consumer(5000.0, 0.5, "");
    let cases: [(&str, &str, &str, &str); 5] = [
        ("lock = \"q\"", "lock = \"nope\"", "workload.condvars[0].lock", "declared: q"),
        ("{ op = \"wait\", condvar = \"cv\", share = 0.25 }", "{ op = \"wait\", condvar = \"other\", share = 0.25 }", "workload.types[1].paths[0].steps[1].condvar", "declared: cv"),
        ("{ op = \"signal\", condvar = \"cv\", share = 0.25 }", "{ op = \"compute\", share = 0.25 }", "workload.types[1].paths[0].steps[1].condvar", "no step signals it"),
        ("{ op = \"wait\", condvar = \"cv\", share = 0.25 }", "{ op = \"compute\", share = 0.25 }", "workload.types[0].paths[0].steps[1].condvar", "no step waits on it"),
        ("name = \"q\"\n", "name = \"q\"\n        count = 4\n", "workload.condvars[0].lock", "count = 1"),
    ];
    for (from, to, field, says) in cases {
        let text = base.replacen(from, to, 1);
        assert_ne!(text, base, "the case edits the scenario");
        let e = Scenario::load(&text, Format::Toml, std::path::Path::new("."), &[]).err().expect("refused");
        assert_eq!(e.field, field, "{e}");
        assert!(e.to_string().contains(says), "{e}");
    }
    assert!(Scenario::load(&base, Format::Toml, std::path::Path::new("."), &[]).is_ok());
}

/// A second application's condvar and lock are numbered after the first's: each application's
/// waits and wake-ups land on its own condvar, and both keep their items apart.
#[test]
fn applications_have_their_own_condvars() {
    let second = r#"
        [[applications]]
        name = "b"
        load = { rps = 3000 }
        workload = { locks = [{ name = "q2" }], condvars = [{ name = "cv2", lock = "q2" }], types = [
            { name = "bp", ratio = 0.5, service = { dist = "constant", value_us = 20 }, paths = [{ steps = [{ op = "signal", condvar = "cv2" }] }] },
            { name = "bc", ratio = 0.5, service = { dist = "constant", value_us = 20 }, paths = [{ steps = [{ op = "wait", condvar = "cv2" }] }] },
        ] }
    "#;
    let s = run(&(producer_consumer(3000.0, 0.5, "") + second), &[], 4).summary;
    let names: Vec<&str> = s.condvars.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names, ["cv", "cv2"]);
    for c in &s.condvars {
        assert!(c.waits > 10 && c.wakeups > 10 && c.wakeups <= c.signals, "{c:?}");
    }
    // Each application's signals are its producers' (about half its requests).
    let generated = |i: usize| s.applications[i].requests.generated as f64;
    for (i, c) in s.condvars.iter().enumerate() {
        let share = c.signals as f64 / generated(i);
        assert!((0.3..0.7).contains(&share), "{}: {} signals of {} requests", c.name, c.signals, generated(i));
    }
    conserved(&s);
}

/// A woken waiter's wait joins its accumulated delay (the artifact's `condvar_signal`): a
/// consumer that waited past the budget for its item is then dropped at the next lock step,
/// although that lock is free (ASQM drops a request already past its budget at any lock).
/// With `seed = "measured"` nothing but the request's own waits counts.
#[test]
fn a_woken_waiters_wait_joins_its_accumulated_delay() {
    let base = producer_consumer(5000.0, 0.6, "lock_control = { mode = \"asqm\", budget_us = 500, seed = \"measured\" }");
    let consume_tail = "{ op = \"wait\", condvar = \"cv\", share = 0.25 },\n            { op = \"compute\", share = 0.25 },";
    assert!(base.contains(consume_tail));
    let text = base
        .replace(consume_tail, "{ op = \"wait\", condvar = \"cv\", share = 0.25 },\n            { op = \"lock\", lock = \"after\", share = 0.25 },")
        .replacen("[[workload.condvars]]", "[[workload.locks]]\n        name = \"after\"\n        [[workload.condvars]]", 1);
    let s = run(&text, &[], 6).summary;
    let c = cv(&s);
    let lc = s.lock_control.as_ref().expect("lock_control");
    let after = lc.locks.iter().find(|l| l.name == "after").expect("lock after");
    assert!(c.wait_us.p99 > 500.0, "some woken waits passed the budget: {c:?}");
    assert!(after.drops > 10, "consumers whose condvar wait passed the budget are dropped at the free lock: {after:?} ({c:?})");
    assert_eq!(lc.drops, c.drops + after.drops + lc.locks.iter().find(|l| l.name == "q").map_or(0, |l| l.drops));
    conserved(&s);
}

/// Without a warm-up the measured window is the whole run: the locks' statistics, the drops at
/// them and the condvars' counts start at 0 (no window-start event is scheduled). They were
/// all zero in such a run before the window was started at 0.
#[test]
fn a_run_without_warm_up_counts_locks_drops_and_condvars() {
    let text = producer_consumer(5000.0, 0.6, "lock_control = { mode = \"asqm\", budget_us = 500 }");
    let s = run(&text, &["warmup_ms=0"], 5).summary;
    conserved(&s);
    let lc = s.lock_control.as_ref().expect("lock_control statistics");
    assert!(lc.drops > 0, "{lc:?}");
    assert!(lc.locks.iter().any(|l| l.name == "q" && l.acquisitions > 1000), "{lc:?}");
    assert!(cv(&s).waits > 0 && cv(&s).signals > 0, "{:?}", cv(&s));
}
