//! The real runtime's benchmark: `cargo run --release -p microsched-runtime --example bench [-- --quick]`.
//!
//! 1. **Peak throughput vs a plain UDP echo server.** One worker, static allocation, no overload
//!    control, requests of 1 ns service time, against a minimal echo server (one thread:
//!    `recv_from` then `send_to` the same bytes) measured in the same run, by the same closed-loop
//!    client (one thread keeping 32 requests outstanding). Reported: both rates and their ratio,
//!    and the runtime's rate when every request runs as a coroutine (a program of one compute
//!    step), and as one that yields halfway.
//! 2. **Simulator vs real.** experiments/real/overload-2x*.toml (2 workers) at half the
//!    measured capacity without overload control, and at 2× with Breakwater: p99 latency and
//!    throughput from `microsched-sim` and from the real runtime, same scenario, same seed.
//!
//! Everything runs on loopback on this machine; the client, the server and the simulator share
//! its CPUs.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use microsched_core::scenario::{Format, Loaded, Scenario};
use microsched_runtime::wire::{decode, encode, Msg};
use microsched_runtime::{loadgen, merge, LoadgenOpts, ServeOpts, Server};

const WINDOW: usize = 32;

/// Closed loop: keeps WINDOW requests outstanding for `dur`; returns answers per second.
fn closed_loop(server: SocketAddr, token: u64, dur: Duration) -> f64 {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    closed_loop_on(&sock, server, token, dur)
}

fn closed_loop_on(sock: &UdpSocket, server: SocketAddr, token: u64, dur: Duration) -> f64 {
    let mut buf = [0u8; 256];
    let (mut inflight, mut done, mut id) = (0usize, 0u64, 0u64);
    let start = Instant::now();
    while start.elapsed() < dur {
        while inflight < WINDOW {
            let m = Msg::Request {
                token,
                req_id: id,
                demand: 0,
                service_ns: 1,
                rtype: 0,
            };
            id += 1;
            sock.send_to(&encode(&m), server).unwrap();
            inflight += 1;
        }
        match sock.recv_from(&mut buf) {
            Ok(_) => {
                inflight -= 1;
                done += 1;
            }
            Err(_) => inflight = 0, // lost datagrams: refill the window
        }
    }
    done as f64 / start.elapsed().as_secs_f64()
}

fn echo_server(stop: Arc<AtomicBool>) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let addr = sock.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            if let Ok((n, from)) = sock.recv_from(&mut buf) {
                let _ = sock.send_to(&buf[..n], from);
            }
        }
    });
    (addr, h)
}

fn load(path: &str, overrides: &[&str]) -> Loaded {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("{path}: {e} (run from the repository root)"));
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    Scenario::load(&text, Format::Toml, Path::new(path).parent().unwrap(), &o)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn serve(loaded: &Loaded) -> Server {
    let opts = ServeOpts {
        addr: "127.0.0.1:0".parse().unwrap(),
        allow_remote: false,
        duration: Some(Duration::from_secs(600)),
        once: true,
        ..Default::default()
    };
    Server::start(loaded, opts).unwrap()
}

/// One closed-loop measurement of a fresh server; answers per second.
fn runtime_round(loaded: &Loaded, dur: Duration) -> f64 {
    let server = serve(loaded);
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    sock.send_to(
        &encode(&Msg::Connect {
            cookie: 0,
            demand: 0,
        }),
        server.addr(),
    )
    .unwrap();
    let mut buf = [0u8; 256];
    let (n, _) = sock.recv_from(&mut buf).unwrap();
    let Ok(Msg::ConnectAck { token, .. }) = decode(&buf[..n]) else {
        panic!("no ConnectAck")
    };
    let rate = closed_loop_on(&sock, server.addr(), token, dur);
    sock.send_to(&encode(&Msg::Disconnect { token }), server.addr())
        .unwrap();
    let rep = server.wait(|| false);
    assert_eq!(rep.rejected_total, 0);
    rate
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    let dur = Duration::from_millis(if quick { 1000 } else { 3000 });
    let rounds = if quick { 1 } else { 3 };

    // 1. Peak throughput: runtime with one worker vs plain echo, alternating, best of rounds.
    let one = load(
        "experiments/real/overload-2x-none.toml",
        &["server.max_cores=1", "clients.sessions=1"],
    );
    // The same requests run as coroutines: a program of one compute step, and one that yields
    // halfway (what a coroutine and a yield cost on top of the direct path).
    let coro = load(
        "experiments/real/overload-2x-none.toml",
        &["server.max_cores=1", "clients.sessions=1", "workload.types.0.paths=[{steps=[{op=\"compute\"}]}]"],
    );
    let yielding = load(
        "experiments/real/overload-2x-none.toml",
        &[
            "server.max_cores=1",
            "clients.sessions=1",
            "workload.types.0.paths=[{steps=[{op=\"compute\",share=0.5},{op=\"yield\"},{op=\"compute\",share=0.5}]}]",
        ],
    );
    let (mut best_echo, mut best_rt, mut best_coro, mut best_yield) = (0f64, 0f64, 0f64, 0f64);
    for _ in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let (addr, h) = echo_server(stop.clone());
        best_echo = best_echo.max(closed_loop(addr, 0, dur));
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        best_rt = best_rt.max(runtime_round(&one, dur));
        best_coro = best_coro.max(runtime_round(&coro, dur));
        best_yield = best_yield.max(runtime_round(&yielding, dur));
    }
    println!("## Peak throughput, 1 worker, 1 ns requests, closed loop with {WINDOW} outstanding (best of {rounds} × {:.1} s)\n", dur.as_secs_f64());
    println!("| server | requests/s |\n|---|---:|");
    println!("| plain UDP echo (1 thread) | {best_echo:.0} |");
    println!("| microsched runtime (1 worker polling the socket) | {best_rt:.0} |");
    println!(
        "| **ratio runtime / echo** | **{:.2}** |",
        best_rt / best_echo
    );
    println!("| runtime, every request a coroutine (one compute step) | {best_coro:.0} |");
    println!("| runtime, every request a coroutine that yields once | {best_yield:.0} |\n");

    // 2. Simulator vs real, same scenario and seed.
    let dur_ms = if quick { "1000" } else { "3000" };
    let cases: [(&str, &str, Vec<String>); 2] = [
        (
            "none, 8 k req/s",
            "experiments/real/overload-2x-none.toml",
            vec!["load.rps=8000".into()],
        ),
        (
            "breakwater, 32 k req/s (2×)",
            "experiments/real/overload-2x.toml",
            vec![],
        ),
    ];
    println!("## Simulator vs real runtime, 2 workers, exponential 100 µs, {dur_ms} ms measured\n");
    println!("| case | sim p99 µs | real p99 µs | sim throughput | real throughput | sim goodput | real goodput |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    for (label, path, extra) in cases {
        let mut o: Vec<&str> = vec![];
        let d = format!("duration_ms={dur_ms}");
        o.push(&d);
        o.extend(extra.iter().map(|s| s.as_str()));
        let loaded = load(path, &o);
        let sim = microsched_sim::run(&loaded, None)
            .expect("simulates")
            .summary;
        let server = serve(&loaded);
        let lo = LoadgenOpts {
            addr: server.addr(),
            allow_remote: false,
            seed: None,
        };
        let lg = loadgen::run(&loaded, &lo, &|| false).expect("load generator");
        let rep = server.wait(|| false);
        let real = merge::merge(&lg, &rep);
        let f = |k: &str| real[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "| {label} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} |",
            sim.latency_us.p99,
            real["latency_us"]["p99"].as_f64().unwrap_or(f64::NAN),
            sim.throughput_rps,
            f("throughput_rps"),
            sim.goodput_rps,
            f("goodput_rps")
        );
    }
}
