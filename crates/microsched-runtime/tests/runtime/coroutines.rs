//! Requests as coroutines on the real runtime (loopback, one or two workers): a request that
//! yields, or that waits for a mutex, leaves its worker to other requests.
//!
//! The single-worker tests assert orders, not durations, and enforce every order they rely on:
//! a request yields or holds a mutex until the test releases it (a flag), and the test waits
//! for the server to get somewhere (a flag, a live counter) before it goes on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use microsched_runtime::clock::spin_for;
use microsched_runtime::handler::{Cx, Handler, Outcome, Request};
use microsched_runtime::loadgen::{self, LoadgenOpts};
use microsched_runtime::{ServeOpts, Server};

use crate::common;

use crate::common::{connect, load, serial, wait_until, LockFlags, Locking, LOCK_A, LOCK_B};

fn opts() -> ServeOpts {
    common::opts(false)
}

const ONE_WORKER: &str = r#"
duration_ms = 1000
[server]
max_cores = 1
[load]
rps = 1000
[runtime]
tick_us = 200
"#;

#[test]
fn a_request_that_yields_every_5us_leaves_its_worker_to_a_later_short_one() {
    let _g = serial();
    yielder_then_short("server.queue=\"per_core\"");
}

/// c-FCFS: the yielder goes back to the tail of the shared queue, behind the short one.
#[test]
fn a_yielder_leaves_its_worker_to_a_later_short_one_under_a_central_queue_too() {
    let _g = serial();
    yielder_then_short("server.queue=\"central\"");
}

/// Type 0 computes 5 µs and yields, over and over, until the test releases it; type 1 (the
/// short request, run without a coroutine) computes its service time.
#[derive(Default)]
struct YieldsUntilReleased {
    release: AtomicBool,
}

impl Handler for YieldsUntilReleased {
    fn handle(&self, req: &Request, cx: &mut Cx) -> Outcome {
        if req.rtype == 0 {
            while !self.release.load(Ordering::SeqCst) {
                cx.compute(5_000);
                cx.yield_now();
            }
        } else {
            spin_for(req.service_ns);
        }
        Outcome::Ok
    }

    fn coroutine(&self, rtype: u16) -> bool {
        rtype == 0
    }
}

/// The yielder starts (the server counts its first yield), then the short request is sent: it
/// completes while the yielder keeps yielding (which it does until the test releases it, after
/// the short one's response: no host stall can reorder the two).
fn yielder_then_short(queue: &str) {
    let text = format!(
        "{ONE_WORKER}
[[workload.types]]
name = \"yielder\"
service = {{ dist = \"constant\", value_us = 10000 }}
[[workload.types]]
name = \"short\"
service = {{ dist = \"constant\", value_us = 10 }}
"
    );
    let sc = load(&text, &[queue]);
    let yielder = Arc::new(YieldsUntilReleased::default());
    let server = Server::start_with(&sc, opts(), yielder.clone()).expect("server starts");
    let c = connect(server.addr());
    let sent = Instant::now();
    c.send(1, 0, 10_000_000);
    common::wait_until("the yielder runs and yields", || common::live(&server, "yields") >= 1);
    let started_within = sent.elapsed();
    c.send(2, 1, 10_000);
    let (first, _) = c.ok();
    yielder.release.store(true, Ordering::SeqCst);
    let (second, qdelay_yielder) = c.ok();
    let rep = server.stop();
    assert_eq!(
        (first, second),
        (2, 1),
        "the short request completes while the yielder is suspended"
    );
    assert!(
        Duration::from_nanos(qdelay_yielder) <= started_within,
        "the yielder had started before the short one was sent (it waited {qdelay_yielder} ns)"
    );
    assert_eq!(
        rep.cores.completed_per_worker,
        vec![2],
        "one worker ran both"
    );
    assert_eq!(
        rep.counter("coroutines"),
        1,
        "the short request ran without a coroutine"
    );
    assert!(rep.counter("yields") >= 1);
}

#[test]
fn a_central_queue_serves_every_request_on_both_workers() {
    let _g = serial();
    let text = r#"
duration_ms = 1000
[server]
max_cores = 2
queue = "central"
[load]
rps = 1000
[runtime]
tick_us = 200
[policy.allocator]
kind = "static"
[[workload.types]]
name = "a"
service = { dist = "constant", value_us = 500 }
"#;
    let sc = load(text, &[]);
    let server = Server::start(&sc, opts()).expect("server starts");
    // One session: d-FCFS would queue all of it at one home core (the other only stealing);
    // c-FCFS queues it where both workers take from.
    let c = connect(server.addr());
    let n = 100;
    for id in 0..n {
        c.send(id, 0, 500_000);
    }
    let mut got: Vec<u64> = (0..n).map(|_| c.ok().0).collect();
    let rep = server.stop();
    got.sort_unstable();
    assert_eq!(got, (0..n).collect::<Vec<_>>());
    assert_eq!(rep.cores.completed_per_worker.iter().sum::<u64>(), n);
    assert!(
        rep.cores.completed_per_worker.iter().all(|&k| k > 0),
        "both workers served the shared queue: {:?}",
        rep.cores.completed_per_worker
    );
    assert_eq!(rep.abandoned, 0);
}

const C: u16 = 2;

#[test]
fn a_request_blocked_on_a_held_mutex_leaves_its_worker_to_another() {
    let _g = serial();
    let text = format!(
        "{ONE_WORKER}
[[workload.types]]
name = \"a\"
service = {{ dist = \"constant\", value_us = 10 }}
[[workload.types]]
name = \"b\"
service = {{ dist = \"constant\", value_us = 10 }}
[[workload.types]]
name = \"c\"
service = {{ dist = \"constant\", value_us = 10 }}
[[workload.locks]]
name = \"m\"
"
    );
    let sc = load(&text, &[]);
    let flags = Arc::new(LockFlags::default());
    let handler = Locking { flags: flags.clone(), yields: true };
    let server = Server::start_with(&sc, opts(), Arc::new(handler)).expect("server starts");
    let c = connect(server.addr());
    c.send(1, LOCK_A, 10_000);
    wait_until("A holds the mutex", || flags.a_holds.load(Ordering::SeqCst));
    c.send(2, LOCK_B, 10_000);
    wait_until("B asks for it", || flags.b_asks.load(Ordering::SeqCst));
    // B reached the mutex on the only worker; A holds it, suspended at a yield point.
    c.send(3, C, 10_000);
    let (first, _) = c.ok();
    assert_eq!(
        first, 3,
        "C ran on the worker while A held the mutex and B waited for it"
    );
    assert!(
        !flags.b_holds.load(Ordering::SeqCst),
        "B waits until A releases"
    );
    flags.release_a.store(true, Ordering::SeqCst);
    let (second, _) = c.ok();
    let (third, _) = c.ok();
    assert_eq!((second, third), (1, 2), "A releases, then B gets the mutex");
    std::thread::sleep(Duration::from_millis(20));
    let rep = server.stop();
    assert_eq!(rep.cores.completed_per_worker, vec![3]);
    assert_eq!(rep.counter("coroutines"), 3);
    assert_eq!(rep.counter("mutex_waits"), 1, "{:?}", rep.counters);
    assert!(rep.counter("mutex_wait_ns") > 0);
    assert!(rep.counter("yields") >= 1);
    assert_eq!(rep.abandoned, 0);
}

#[test]
fn programs_with_locks_and_yields_under_load_account_for_every_request() {
    let _g = serial();
    // A key-value-like mix on 2 workers: item locks of a hashed family (hot keys), a global
    // lock, yield points; 0.5 s at 3 k req/s (a quarter of what this machine serves: far below
    // it, convoys behind handed-over mutexes never form).
    let text = r#"
duration_ms = 500
warmup_ms = 50
[server]
max_cores = 2
[clients]
sessions = 8
[load]
rps = 3000
[[workload.types]]
name = "get"
ratio = 0.8
service = { dist = "exponential", mean_us = 20 }
paths = [
  { prob = 0.9, steps = [{ op = "compute", share = 0.5 }, { op = "lock", lock = "items", share = 0.3 }, { op = "yield" }, { op = "compute", share = 0.2 }] },
  { prob = 0.1, steps = [{ op = "lock", lock = "global", share = 1.0 }] },
]
[[workload.types]]
name = "plain"
ratio = 0.2
service = { dist = "constant", value_us = 10 }
[[workload.locks]]
name = "items"
count = 16
keys = 1000
hot = { hot_keys = 0.1, hot_share = 0.9 }
[[workload.locks]]
name = "global"
[runtime]
tick_us = 50
drain_ms = 300
"#;
    let sc = load(text, &[]);
    let mut o = opts();
    o.once = true;
    let server = Server::start(&sc, o).expect("server starts");
    let lo = LoadgenOpts {
        addr: server.addr(),
        more_addrs: Vec::new(),
        allow_remote: false,
        seed: None,
    };
    let lg = loadgen::run(&sc, &lo, &|| false).expect("load generator runs");
    let rep = server.wait(|| false);
    let c = &lg.client;
    assert!(c.conserved(), "{c:?}");
    assert!(c.completed > 100, "{c:?}");
    assert_eq!(rep.abandoned, 0, "{:?}", rep.counters);
    assert_eq!(rep.counter("admitted"), rep.counter("completed"));
    assert!(
        rep.counter("coroutines") > 0 && rep.counter("yields") > 0,
        "{:?}",
        rep.counters
    );
    assert!(
        rep.counter("coroutines") < rep.counter("completed"),
        "plain requests run without one: {:?}",
        rep.counters
    );
}

#[test]
fn unsupported_keys_are_refused_by_the_server_and_the_load_generator() {
    let text = format!(
        "{ONE_WORKER}
[[workload.types]]
name = \"a\"
service = {{ dist = \"constant\", value_us = 10 }}
"
    );
    for (o, field) in [
        ("server.delay_signal=\"exact\"", "server.delay_signal"),
        ("server.packet_cost_ns=100", "server.packet_cost_ns"),
        (
            "server.preemption.mechanism=\"signal\"",
            "server.preemption.mechanism",
        ),
    ] {
        let sc = load(&text, &[o]);
        let e = Server::start(&sc, opts())
            .err()
            .expect("refused")
            .to_string();
        assert!(
            e.starts_with(&format!("{field}: ")) && e.contains("not supported by the real runtime"),
            "{e}"
        );
        let lo = LoadgenOpts {
            addr: "127.0.0.1:9".parse().unwrap(),
            more_addrs: Vec::new(),
            allow_remote: false,
            seed: None,
        };
        let e = loadgen::run(&sc, &lo, &|| false)
            .expect_err("refused")
            .to_string();
        assert!(e.starts_with(&format!("{field}: ")), "{e}");
    }
}
