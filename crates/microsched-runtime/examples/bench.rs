//! The real runtime's benchmark: `cargo run --release -p microsched-runtime --example bench [-- --quick]`.
//!
//! 1. **Peak throughput vs a plain UDP echo server.** One worker, static allocation, no overload
//!    control, requests of 1 ns service time, against a minimal echo server (one thread:
//!    `recv_from` then `send_to` the same bytes) measured in the same run, by the same closed-loop
//!    client (one thread keeping 32 requests outstanding). Reported: both rates and their ratio,
//!    and the runtime's rate when every request runs as a coroutine (a program of one compute
//!    step), and as one that yields halfway.
//!    **The stack's own cost** from the same runs: the CPU time (the thread's own clock) of
//!    one loopback `recvfrom` (RX) and `sendto` (TX) in the echo server, the client's CPU per
//!    request, and the runtime's per-request work beyond the two calls (RPC: its 1-worker
//!    time per request, 1 / rate, minus RX and TX). These are what `server.stack.profile =
//!    "this-machine"` stands for (`microsched_core::stack`).
//! 2. **Simulator vs real.** experiments/real/overload-2x*.toml (2 workers) at half the
//!    measured capacity without overload control, and at 2× with Breakwater: p99 latency and
//!    throughput from `microsched-sim` and from the real runtime, same scenario, same seed;
//!    from the simulator charging the stack costs measured in section 1 of this run; and from
//!    the simulator charging, besides, the CPU the real run's load generator and controller
//!    threads took from the workers' two CPUs (`microsched_runtime::harness`).
//!
//! Everything runs on loopback on this machine; the client, the server and the simulator share
//! its CPUs.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use microsched_core::scenario::{Format, Loaded, Scenario};
use microsched_runtime::wire::{decode, encode, Msg};
use microsched_runtime::clock::thread_cpu_ns;
use microsched_runtime::harness::Harness;
use microsched_runtime::{loadgen, merge, LoadgenOpts, ServeOpts, Server};

const WINDOW: usize = 32;

/// CPU time of a thread's successful calls: (total ns, calls).
#[derive(Default)]
struct CpuMeter {
    ns: AtomicU64,
    n: AtomicU64,
}

impl CpuMeter {
    fn add(&self, since: u64) {
        self.ns.fetch_add(thread_cpu_ns() - since, Ordering::Relaxed);
        self.n.fetch_add(1, Ordering::Relaxed);
    }
    fn mean(&self) -> f64 {
        self.ns.load(Ordering::Relaxed) as f64 / self.n.load(Ordering::Relaxed).max(1) as f64
    }
}

/// Closed loop: keeps WINDOW requests outstanding for `dur`; returns answers per second.
fn closed_loop_on(sock: &UdpSocket, server: SocketAddr, token: u64, dur: Duration) -> f64 {
    closed_loop_metered(sock, server, token, dur, &CpuMeter::default())
}

/// The closed loop, adding the client's CPU per answered request (its sends and receives) to
/// `client`.
fn closed_loop_metered(sock: &UdpSocket, server: SocketAddr, token: u64, dur: Duration, client: &CpuMeter) -> f64 {
    let cpu0 = thread_cpu_ns();
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
    // The client's CPU includes the loop's own bookkeeping, which a load generator pays too.
    client.ns.fetch_add(thread_cpu_ns() - cpu0, Ordering::Relaxed);
    client.n.fetch_add(done, Ordering::Relaxed);
    done as f64 / start.elapsed().as_secs_f64()
}

fn echo_server(stop: Arc<AtomicBool>, rx: Arc<CpuMeter>, tx: Arc<CpuMeter>) -> (SocketAddr, std::thread::JoinHandle<()>) {
    let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
    sock.set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let addr = sock.local_addr().unwrap();
    let h = std::thread::spawn(move || {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            let t = thread_cpu_ns();
            if let Ok((n, from)) = sock.recv_from(&mut buf) {
                rx.add(t);
                let t = thread_cpu_ns();
                if sock.send_to(&buf[..n], from).is_ok() {
                    tx.add(t);
                }
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
    let (rx, tx, client) = (Arc::new(CpuMeter::default()), Arc::new(CpuMeter::default()), CpuMeter::default());
    for _ in 0..rounds {
        let stop = Arc::new(AtomicBool::new(false));
        let (addr, h) = echo_server(stop.clone(), rx.clone(), tx.clone());
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        best_echo = best_echo.max(closed_loop_metered(&sock, addr, 0, dur, &client));
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

    // The stack's own cost: RX and TX as the echo server's calls cost on its thread's clock, RPC
    // as the runtime's 1-worker time per request beyond them (the worker is the bottleneck of
    // that loop: its rate is below the echo's), the client's CPU per request.
    let (rx_ns, tx_ns, client_ns) = (rx.mean(), tx.mean(), client.mean());
    let rpc_ns = (1e9 / best_rt - rx_ns - tx_ns).max(0.0);
    println!("## The stack's own cost on this machine (loopback UDP; `server.stack.profile = \"this-machine\"`)\n");
    println!("| cost | ns per request | how |\n|---|---:|---|");
    println!("| RX (`recvfrom`) | {rx_ns:.0} | echo thread's CPU clock, {} calls |", rx.n.load(Ordering::Relaxed));
    println!("| TX (`sendto`, with loopback delivery) | {tx_ns:.0} | echo thread's CPU clock |");
    println!("| RPC (runtime beyond RX + TX) | {rpc_ns:.0} | 1 / {best_rt:.0} req/s − RX − TX |");
    println!("| client (send + receive, on the same CPUs) | {client_ns:.0} | client thread's CPU clock / answers |\n");
    let stack = [
        "server.stack.profile=\"this-machine\"".to_string(),
        format!("server.stack.rx_ns={rx_ns:.0}"),
        format!("server.stack.tx_ns={tx_ns:.0}"),
        format!("server.stack.rpc_ns={rpc_ns:.0}"),
        format!("server.stack.client_ns={client_ns:.0}"),
    ];

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
    println!("\"sim+stack\" charges the stack costs measured above; \"sim+harness\" charges them and, instead");
    println!("of the closed-loop client figure, what the real run's load generator and controller threads");
    println!("took from the workers' CPUs (`microsched_runtime::harness`): their CPU per wake-up, on the");
    println!("replying core for each wake-up by a reply, as idle-first interference for each timer wake-up.\n");
    println!("| case | sim p99 µs | sim+stack p99 µs | sim+harness p99 µs | real p99 µs | sim thr. | sim+stack thr. | sim+harness thr. | real thr. | harness CPUs | µs per timer wake-up |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for (label, path, extra) in cases {
        let mut o: Vec<&str> = vec![];
        let d = format!("duration_ms={dur_ms}");
        o.push(&d);
        o.extend(extra.iter().map(|s| s.as_str()));
        let loaded = load(path, &o);
        let sim = microsched_sim::run(&loaded, None)
            .expect("simulates")
            .summary;
        let mut os = o.clone();
        os.extend(stack.iter().map(|s| s.as_str()));
        let with_stack = microsched_sim::run(&load(path, &os), None).expect("simulates").summary;
        let server = serve(&loaded);
        let lo = LoadgenOpts {
            addr: server.addr(),
            more_addrs: Vec::new(),
            allow_remote: false,
            seed: None,
        };
        let lg = loadgen::run(&loaded, &lo, &|| false).expect("load generator");
        let rep = server.wait(|| false);
        let h = Harness::of(&lg.client, &rep);
        let replay = h.sim_overrides();
        let mut oh = os.clone();
        oh.extend(replay.iter().map(|s| s.as_str()));
        let with_harness = microsched_sim::run(&load(path, &oh), None).expect("simulates").summary;
        let real = merge::merge(&lg, &rep);
        let f = |k: &str| real[k].as_f64().unwrap_or(f64::NAN);
        println!(
            "| {label} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.1} |",
            sim.latency_us.p99,
            with_stack.latency_us.p99,
            with_harness.latency_us.p99,
            real["latency_us"]["p99"].as_f64().unwrap_or(f64::NAN),
            sim.throughput_rps,
            with_stack.throughput_rps,
            with_harness.throughput_rps,
            f("throughput_rps"),
            h.cpus,
            h.timer_wakeup_us,
        );
    }
}
