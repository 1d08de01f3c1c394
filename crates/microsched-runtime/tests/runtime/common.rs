//! What the runtime's loopback tests share: one server at a time, scenarios from text, and a
//! raw client session (no credits: a server without overload control admits every request), and
//! the handler of the mutex tests.

use std::net::{SocketAddr, UdpSocket};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use microsched_runtime::clock::spin_for;
use microsched_runtime::handler::{Cx, Handler, Outcome, Request};

use microsched_core::scenario::{Format, Loaded, Scenario};
use microsched_runtime::loadgen::{self, LoadgenOpts, LoadgenResult};
use microsched_runtime::wire::{decode, encode, Msg, Status};
use microsched_runtime::{ServeOpts, Server, ServerReport};

static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Tests that start a server run one at a time: they measure, and the machine has 2 CPUs.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn load_in(text: &str, base: &Path, overrides: &[&str]) -> Loaded {
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    Scenario::load(text, Format::Toml, base, &o).expect("valid scenario")
}

pub fn load(text: &str, overrides: &[&str]) -> Loaded {
    load_in(text, Path::new("."), overrides)
}

/// Loopback, an ephemeral port, at most 30 s; `once`: stop when the load generator is done.
pub fn opts(once: bool) -> ServeOpts {
    ServeOpts { addr: "127.0.0.1:0".parse().unwrap(), allow_remote: false, duration: Some(Duration::from_secs(30)), once, ..Default::default() }
}

/// Serves `loaded` on loopback until the real load generator (the scenario's own) is done.
pub fn serve_and_load(loaded: &Loaded) -> (LoadgenResult, ServerReport) {
    let server = Server::start(loaded, opts(true)).expect("server starts");
    let lo = LoadgenOpts { addr: server.addr(), more_addrs: Vec::new(), allow_remote: false, seed: None };
    let lg = loadgen::run(loaded, &lo, &|| false).expect("load generator runs");
    let rep = server.wait(|| false);
    (lg, rep)
}

/// A response as the client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Reply {
    pub req_id: u64,
    pub status: Status,
    /// Queueing delay at the server (ns), as the response carries it.
    pub qdelay_ns: u64,
}

pub struct Client {
    sock: UdpSocket,
    server: SocketAddr,
    token: u64,
}

impl Client {
    /// Connects; responses are awaited at most `timeout`.
    pub fn connect(server: SocketAddr, timeout: Duration) -> Self {
        let sock = UdpSocket::bind("127.0.0.1:0").unwrap();
        sock.set_read_timeout(Some(timeout)).unwrap();
        sock.send_to(&encode(&Msg::Connect { cookie: 1, demand: 0 }), server).unwrap();
        let mut buf = [0u8; 256];
        let (n, _) = sock.recv_from(&mut buf).unwrap();
        let Ok(Msg::ConnectAck { token, .. }) = decode(&buf[..n]) else { panic!("{:?}", decode(&buf[..n])) };
        Client { sock, server, token }
    }

    pub fn send(&self, req_id: u64, rtype: u16, service_ns: u64) {
        let m = Msg::Request { token: self.token, req_id, demand: 0, service_ns, rtype };
        self.sock.send_to(&encode(&m), self.server).unwrap();
    }

    pub fn reply(&self) -> Reply {
        let mut buf = [0u8; 256];
        let (n, _) = self.sock.recv_from(&mut buf).expect("a response in time");
        match decode(&buf[..n]) {
            Ok(Msg::Response { req_id, status, qdelay_ns, .. }) => Reply { req_id, status, qdelay_ns },
            other => panic!("{other:?}"),
        }
    }

    /// The next response, which must be a success: (request id, queueing delay at the server).
    pub fn ok(&self) -> (u64, u64) {
        let r = self.reply();
        assert_eq!(r.status, Status::Ok, "{r:?}");
        (r.req_id, r.qdelay_ns)
    }
}

/// A raw session whose every response is awaited at most 2 s (the single-worker tests').
pub fn connect(server: SocketAddr) -> Client {
    Client::connect(server, Duration::from_secs(2))
}

/// Waits (at most 10 s) until `cond` holds: how a test makes sure the server got somewhere
/// before it goes on, instead of sleeping and hoping.
pub fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(10), "{what}: not within 10 s");
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// A live counter of a running server ([`Server::live`]).
pub fn live(server: &microsched_runtime::Server, name: &str) -> u64 {
    server.live()[name].as_u64().unwrap_or(0)
}

/// Request types of the mutex tests: A takes mutex 0 and holds it until the test releases it;
/// B asks for it; any other type takes no lock and computes 10 µs.
pub const LOCK_A: u16 = 0;
pub const LOCK_B: u16 = 1;

/// How far the mutex tests' requests got, set by the handler and read by the test.
#[derive(Default)]
pub struct LockFlags {
    pub a_holds: AtomicBool,
    pub release_a: AtomicBool,
    pub b_asks: AtomicBool,
    pub b_holds: AtomicBool,
}

/// Every request a coroutine; A computes in its critical section until released (at most 5 s),
/// yielding every 5 µs if `yields` (a coroutine suspended while holding the mutex).
pub struct Locking {
    pub flags: Arc<LockFlags>,
    pub yields: bool,
}

impl Handler for Locking {
    fn handle(&self, req: &Request, cx: &mut Cx) -> Outcome {
        let f = &self.flags;
        match req.rtype {
            LOCK_A => {
                cx.lock(0);
                f.a_holds.store(true, Ordering::SeqCst);
                let t = Instant::now();
                while !f.release_a.load(Ordering::SeqCst) && t.elapsed() < Duration::from_secs(5) {
                    spin_for(5_000);
                    if self.yields {
                        cx.yield_now();
                    }
                }
                cx.unlock(0);
            }
            LOCK_B => {
                f.b_asks.store(true, Ordering::SeqCst);
                cx.lock(0);
                f.b_holds.store(true, Ordering::SeqCst);
                spin_for(10_000);
                cx.unlock(0);
            }
            _ => spin_for(10_000),
        }
        Outcome::Ok
    }

    fn coroutine(&self, _rtype: u16) -> bool {
        true
    }
}
