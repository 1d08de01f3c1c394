//! Replicas and retries (`server.replicas`, `clients.replica_choice`, `clients.retries`): the
//! load generator talks to several servers, picks one per session as the simulator does, and
//! resends a failure to the next replica, counting every try.
//!
//! A stand-in replica (a thread answering every request with one status) makes the failures
//! certain, so the assertions are counts, not timings.

use std::net::{SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use microsched_runtime::loadgen::{self, LoadgenOpts, LoadgenResult};
use microsched_runtime::wire::{decode, encode, Msg, Status};
use microsched_runtime::Server;

use crate::common::{load, opts, serial};

const SCENARIO: &str = r#"
name = "replicas"
seed = 7
duration_ms = 300
warmup_ms = 50
[server]
max_cores = 1
[clients]
sessions = 40
[load]
rps = 2000
[[workload.types]]
name = "a"
service = { dist = "constant", value_us = 5 }
[runtime]
drain_ms = 500
"#;

/// A replica that answers every request with `status` at once (and acknowledges connections):
/// it blocks in `recv` (at most 20 ms at a time), so it takes no CPU while idle.
struct FakeReplica {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicU64>,
    thread: Option<JoinHandle<()>>,
}

impl FakeReplica {
    fn start(status: Status) -> Self {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let addr = sock.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicU64::new(0));
        let (st, rq) = (stop.clone(), requests.clone());
        let thread = std::thread::spawn(move || {
            let mut buf = [0u8; 2048];
            // At most 30 s, whatever happens to the test.
            let t = std::time::Instant::now();
            while !st.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(30) {
                let Ok((n, from)) = sock.recv_from(&mut buf) else { continue };
                let reply = match decode(&buf[..n]) {
                    Ok(Msg::Connect { cookie, .. }) => Msg::ConnectAck { cookie, token: 1000 + cookie as u64, credits: 1 },
                    Ok(Msg::Request { req_id, .. }) => {
                        rq.fetch_add(1, Ordering::SeqCst);
                        Msg::Response { req_id, credits: 1, status, qdelay_ns: 0, service_ns: 0 }
                    }
                    _ => continue,
                };
                let _ = sock.send_to(&encode(&reply), from);
            }
        });
        FakeReplica { addr, stop, requests, thread: Some(thread) }
    }
}

impl Drop for FakeReplica {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(overrides: &[&str], addrs: &[SocketAddr]) -> LoadgenResult {
    let sc = load(SCENARIO, overrides);
    let lo = LoadgenOpts { addr: addrs[0], more_addrs: addrs[1..].to_vec(), allow_remote: false, seed: None };
    loadgen::run(&sc, &lo, &|| false).expect("load generator runs")
}

/// Every session on the first replica (`primary`), which drops everything: with one retry each
/// request completes on the second replica, a real server, on its second try; the records say
/// so row by row, and the per-replica counts add up.
#[test]
fn a_failure_is_resent_to_the_next_replica_and_completes_there() {
    let _g = serial();
    let failing = FakeReplica::start(Status::Dropped);
    let real = Server::start(&load(SCENARIO, &[]), opts(true)).expect("server starts");
    let lg = run(
        &["server.replicas=2", "clients.replica_choice=\"primary\"", "clients.retries=1", "metrics.record_requests=true"],
        &[failing.addr, real.addr()],
    );
    let rep = real.wait(|| false);
    let c = &lg.client;
    assert!(c.conserved(), "{c:?}");
    assert!(c.generated > 300, "{c:?}");
    // Nothing ends failed: every request had a second try, on a server that drops nothing.
    assert_eq!(c.aqm_dropped, 0, "{c:?}");
    assert_eq!(c.completed + c.timed_out + c.in_flight_end, c.generated, "{c:?}");
    assert!(c.completed as f64 >= 0.95 * c.generated as f64, "{c:?}");
    // One resend per request, every first try at the failing replica.
    assert_eq!(c.retries, c.generated, "{c:?}");
    assert_eq!(c.retried_requests, c.generated, "{c:?}");
    assert_eq!(c.replicas.len(), 2);
    assert_eq!(c.replicas[0].sent, c.generated, "{:?}", c.replicas);
    assert_eq!(c.replicas[0].failures, c.generated, "{:?}", c.replicas);
    assert_eq!(c.replicas[0].completed, 0);
    assert_eq!(failing.requests.load(Ordering::SeqCst), c.generated);
    assert_eq!(c.replicas[1].sent, c.generated, "{:?}", c.replicas);
    assert_eq!(c.replicas[1].completed, c.completed, "{:?}", c.replicas);
    assert_eq!(c.sent, 2 * c.generated, "every try is a send");
    assert_eq!(rep.counter("completed"), c.completed);
    // The window's resends are the simulator's `applications[].retries`.
    assert!(c.measured_retries > 0 && c.measured_retries <= c.retries);
    let r = lg.records.as_ref().expect("records");
    let ok: Vec<usize> = (0..r.id.len()).filter(|&i| r.outcome[i] == "ok").collect();
    assert_eq!(ok.len() as u64, c.completed);
    assert!(ok.iter().all(|&i| r.replica[i] == 1 && r.tries[i] == 2), "an ok row not on replica 1 at try 2");
}

/// Without retries the same failures are final: every request ends dropped at the first
/// replica and the second sees nothing.
#[test]
fn without_retries_a_failure_is_final() {
    let _g = serial();
    let failing = FakeReplica::start(Status::Dropped);
    let other = FakeReplica::start(Status::Ok);
    let lg = run(&["server.replicas=2", "clients.replica_choice=\"primary\""], &[failing.addr, other.addr]);
    let c = &lg.client;
    assert!(c.conserved(), "{c:?}");
    assert!(c.generated > 300, "{c:?}");
    assert_eq!(c.aqm_dropped + c.timed_out + c.in_flight_end, c.generated, "{c:?}");
    assert!(c.aqm_dropped as f64 >= 0.95 * c.generated as f64, "{c:?}");
    assert_eq!((c.retries, c.completed), (0, 0), "{c:?}");
    assert_eq!(other.requests.load(Ordering::SeqCst), 0);
}

/// `hash` spreads the sessions over the replicas (the simulator's hash of the session): with
/// 40 sessions over 2 replicas each gets a sizeable share, and a session's requests all go to
/// one replica.
#[test]
fn hash_spreads_sessions_over_the_replicas() {
    let _g = serial();
    let (a, b) = (FakeReplica::start(Status::Ok), FakeReplica::start(Status::Ok));
    let lg = run(&["server.replicas=2", "metrics.record_requests=true"], &[a.addr, b.addr]);
    let c = &lg.client;
    assert!(c.conserved(), "{c:?}");
    assert_eq!(c.retries, 0);
    let (na, nb) = (c.replicas[0].completed, c.replicas[1].completed);
    assert_eq!(na + nb, c.completed);
    assert!(na as f64 > 0.2 * c.completed as f64 && nb as f64 > 0.2 * c.completed as f64, "{na} / {nb}");
    let r = lg.records.as_ref().expect("records");
    let mut home = std::collections::HashMap::new();
    for i in 0..r.id.len() {
        if r.outcome[i] == "ok" {
            assert_eq!(*home.entry(r.session[i]).or_insert(r.replica[i]), r.replica[i], "session {} moved", r.session[i]);
        }
    }
}

/// Bad replica lists are refused in one line, naming `--addr`.
#[test]
fn replica_addresses_must_match_server_replicas() {
    let sc = load(SCENARIO, &["server.replicas=2"]);
    let one: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let lo = LoadgenOpts { addr: one, more_addrs: vec![], allow_remote: false, seed: None };
    let e = loadgen::run(&sc, &lo, &|| false).expect_err("one address for two replicas");
    assert!(e.0.starts_with("--addr: 1 server address(es) given but server.replicas = 2"), "{e}");
    let lo = LoadgenOpts { addr: one, more_addrs: vec![one], allow_remote: false, seed: None };
    let e = loadgen::run(&sc, &lo, &|| false).expect_err("the same address twice");
    assert!(e.0.contains("given twice"), "{e}");
    let lo = LoadgenOpts { addr: one, more_addrs: vec!["192.168.1.1:7878".parse().unwrap()], allow_remote: false, seed: None };
    let e = loadgen::run(&sc, &lo, &|| false).expect_err("a remote replica");
    assert!(e.0.contains("not a loopback address"), "{e}");
}
