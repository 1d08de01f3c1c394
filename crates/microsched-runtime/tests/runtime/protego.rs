//! Protego on the real runtime (loopback, 2 workers): ASQM's decisions with raw clients and
//! millisecond gaps (orders and counts, not durations), the key-value handler's dropped-SET
//! cleanup, and the overload claim on the shipped experiments/protego/real-synthetic*.toml.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use microsched_core::scenario::{Format, Loaded, Scenario};
use microsched_runtime::asqm::{AsqmCondvar, AsqmMutex};
use microsched_runtime::handler::{Cx, Handler, Outcome, Request};
use microsched_runtime::kv::KvStore;
use microsched_runtime::wire::Status;
use microsched_runtime::{merge, Server, ServerReport};

use crate::common;

use crate::common::{load, opts, serial};

/// A raw session whose program's lock steps without a time of their own take the service time.
struct Client(common::Client);

impl Client {
    fn connect(server: SocketAddr) -> Self {
        Client(common::Client::connect(server, Duration::from_secs(5)))
    }

    fn send(&self, req_id: u64, rtype: u16) {
        self.0.send(req_id, rtype, if rtype == 0 { 40_000_000 } else { 100_000 });
    }

    /// The next response: (request id, status).
    fn recv(&self) -> (u64, Status) {
        let r = self.0.reply();
        (r.req_id, r.status)
    }
}

fn lock<'a>(rep: &'a ServerReport, name: &str) -> &'a microsched_core::summary::LockSummary {
    rep.locks.iter().find(|l| l.name == name).unwrap_or_else(|| panic!("lock {name} in {:?}", rep.locks))
}

/// One mutex `L`: `hold` keeps it 40 ms, `join` 0.1 ms. Budget 10 ms, accumulated delay counted
/// from arrival (`seed = "measured"`: no queueing before the lock on an idle server).
const ONE_LOCK: &str = r#"
duration_ms = 1000
[server]
max_cores = 2
[server.lock_control]
mode = "asqm"
budget_us = 10000
seed = "measured"
[load]
rps = 1000
[[workload.locks]]
name = "L"
[[workload.types]]
name = "hold"
service = { dist = "constant", value_us = 40000 }
paths = [{ steps = [{ op = "lock", lock = "L" }] }]
[[workload.types]]
name = "join"
service = { dist = "constant", value_us = 100 }
paths = [{ steps = [{ op = "lock", lock = "L" }] }]
[runtime]
tick_us = 200
"#;

/// A handler whose type-0 requests take mutex `lock` and hold it until the test opens the gate
/// (every other request runs `inner`): the order the tests need (the holder has the lock, a
/// joiner waits, the queue is older than the budget, then the lock is released) is enforced
/// by the test, never left to how the host schedules threads.
struct Gated {
    inner: Arc<dyn Handler>,
    lock: u32,
    holding: AtomicBool,
    holder_found_it_taken: AtomicBool,
    open: AtomicBool,
}

impl Gated {
    fn new(inner: Arc<dyn Handler>, lock: u32) -> Arc<Self> {
        Arc::new(Gated {
            inner,
            lock,
            holding: AtomicBool::new(false),
            holder_found_it_taken: AtomicBool::new(false),
            open: AtomicBool::new(false),
        })
    }
}

impl Handler for Gated {
    fn handle(&self, req: &Request, cx: &mut Cx) -> Outcome {
        if req.rtype != 0 {
            return self.inner.handle(req, cx);
        }
        if !cx.lock_if_uncongested(self.lock) {
            self.holder_found_it_taken.store(true, Ordering::SeqCst);
            cx.reply_dropped();
            return Outcome::Dropped;
        }
        self.holding.store(true, Ordering::SeqCst);
        while !self.open.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_micros(200));
        }
        cx.unlock(self.lock);
        Outcome::Ok
    }

    fn coroutine(&self, _rtype: u16) -> bool {
        true
    }
}

/// Waits (at most 10 s) until `cond` holds.
fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let t = std::time::Instant::now();
    while !cond() {
        assert!(t.elapsed() < Duration::from_secs(10), "{what}: not within 10 s");
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// A live counter of a running server.
fn live(server: &Server, name: &str) -> u64 {
    server.live()[name].as_u64().unwrap_or(0)
}

/// `hold` takes L and keeps it until the test releases it; `join` #1 comes once L is held and
/// finds nobody waiting (queue delay 0 + its own ~0 ≤ 10 ms): it joins. `join` #2 comes 15 ms
/// after #1 joined: the oldest waiter (#1) is older than the budget, so #2 is dropped without
/// waiting: its failure reply comes while L is still held. L is released 25 ms after #1 joined:
/// #1 waited past the budget (the queue's age is only a lower bound of a joiner's wait, the
/// property the simulator reports too), counted in `waits_over_budget`. With `try_lock` both
/// joiners are dropped (L is held). Host stalls only make the waits longer, which every
/// assertion allows.
#[test]
fn asqm_drops_without_waiting_once_the_lock_queue_is_older_than_the_budget() {
    let _g = serial();
    for (mode, dropped) in [("asqm", vec![3]), ("try_lock", vec![2, 3])] {
        let sc = load(ONE_LOCK, &[&format!("server.lock_control.mode=\"{mode}\"")]);
        let lc = sc.scenario.server.lock_control.as_ref().expect("lock_control");
        let program = Arc::new(microsched_runtime::asqm::ProgramHandler::new(lc, &[("L", 1)]));
        let gated = Gated::new(program, 0);
        let server = Server::start_with(&sc, opts(false), gated.clone()).expect("server starts");
        let c = Client::connect(server.addr());
        c.send(1, 0);
        wait_for("the holder takes L", || gated.holding.load(Ordering::SeqCst));
        c.send(2, 1);
        wait_for("join #1 waits for L, or is dropped", || live(&server, "mutex_waits") + live(&server, "lock_drops") >= 1);
        let joined = std::time::Instant::now();
        std::thread::sleep(Duration::from_millis(15));
        c.send(3, 1);
        // Failure replies, sent at the drop, while L is still held.
        let mut fails: Vec<(u64, Status)> = dropped.iter().map(|_| c.recv()).collect();
        fails.sort_by_key(|r| r.0);
        assert_eq!(fails, dropped.iter().map(|&i| (i, Status::LockDropped)).collect::<Vec<_>>(), "{mode}");
        while joined.elapsed() < Duration::from_millis(25) {
            std::thread::sleep(Duration::from_millis(1));
        }
        gated.open.store(true, Ordering::SeqCst);
        let mut rest: Vec<(u64, Status)> = (0..3 - dropped.len()).map(|_| c.recv()).collect();
        rest.sort_by_key(|r| r.0);
        let rep = server.stop();
        eprintln!("{mode}: {fails:?} {rest:?} {:?}", rep.locks);
        assert!(!gated.holder_found_it_taken.load(Ordering::SeqCst));
        assert!(rest.iter().all(|r| r.1 == Status::Ok) && rest[0].0 == 1, "{mode}: {rest:?}");
        let l = lock(&rep, "L");
        assert_eq!(l.drops, dropped.len() as u64, "{mode}");
        assert_eq!(rep.counter("lock_dropped"), dropped.len() as u64);
        assert_eq!(rep.counter("completed"), 3 - dropped.len() as u64);
        if mode == "asqm" {
            assert_eq!(l.waits, 1, "#1 joined");
            assert_eq!(l.waits_over_budget, 1, "#1's wait (≥ 25 ms) passed the 10 ms budget");
            assert!(l.wait_us.p50 > 20_000.0, "{:?}", l.wait_us);
        } else {
            assert_eq!(l.waits, 0, "try_lock never joins a queue");
        }
    }
}

/// A one-slot queue guarded by mutex 0 with a condition variable: `take` (type 0) waits until
/// an item is there, `put` (type 1) adds one and notifies, `short` (type 2) takes no lock.
struct Slot {
    items: AsqmMutex<u32>,
    nonempty: AsqmCondvar,
    taker_waits: AtomicBool,
    taker_acc_ns: AtomicU64,
}

impl Handler for Slot {
    fn handle(&self, req: &Request, cx: &mut Cx) -> Outcome {
        match req.rtype {
            0 => {
                let took = self.nonempty.wait_until_if_uncongested(
                    cx,
                    &self.items,
                    |n| {
                        let ready = *n > 0;
                        self.taker_waits.store(!ready, Ordering::SeqCst);
                        ready
                    },
                    |n| *n -= 1,
                );
                if took.is_none() {
                    cx.reply_dropped();
                    return Outcome::Dropped;
                }
                self.taker_acc_ns.fetch_max(cx.acc_qdel_ns(), Ordering::SeqCst);
            }
            1 => {
                self.items.with(cx, |n| *n += 1);
                self.nonempty.notify_one(cx);
            }
            _ => {}
        }
        Outcome::Ok
    }

    fn coroutine(&self, _rtype: u16) -> bool {
        true
    }
}

/// ASQM's condition variable on one worker: a taker waits on an empty slot without holding the
/// worker (a later request completes first); a second taker 20 ms later is refused, since the
/// condvar's oldest waiter is older than the 10 ms budget (`condvar_wait_if_uncongested`), and
/// gets its failure reply at once; a put wakes the first taker, whose wait joined its
/// accumulated delay (the artifact's `condvar_signal`).
#[test]
fn condvar_waiters_free_their_worker_and_asqm_refuses_a_congested_wait() {
    let _g = serial();
    let text = format!("{ONE_LOCK}\n[[workload.types]]\nname = \"short\"\nservice = {{ dist = \"constant\", value_us = 100 }}\n");
    let sc = load(&text, &["server.max_cores=1"]);
    let slot = Arc::new(Slot {
        items: AsqmMutex::new(0, 0),
        nonempty: AsqmCondvar::new(7),
        taker_waits: AtomicBool::new(false),
        taker_acc_ns: AtomicU64::new(0),
    });
    let server = Server::start_with(&sc, opts(false), slot.clone()).expect("server starts");
    let c = Client::connect(server.addr());
    c.send(1, 0);
    let t = std::time::Instant::now();
    while !slot.taker_waits.load(Ordering::SeqCst) {
        assert!(t.elapsed() < Duration::from_secs(2), "the taker never waited");
        std::thread::sleep(Duration::from_micros(100));
    }
    c.send(2, 2);
    assert_eq!(c.recv(), (2, Status::Ok), "the worker ran another request while the taker waited");
    std::thread::sleep(Duration::from_millis(20));
    c.send(3, 0);
    assert_eq!(c.recv(), (3, Status::LockDropped), "a wait behind a 20 ms old waiter passes the 10 ms budget");
    c.send(4, 1);
    let mut rest = vec![c.recv(), c.recv()];
    rest.sort_by_key(|r| r.0);
    assert_eq!(rest, vec![(1, Status::Ok), (4, Status::Ok)]);
    let rep = server.stop();
    assert_eq!(
        (rep.counter("condvar_waits"), rep.counter("condvar_wakeups"), rep.counter("condvar_drops")),
        (1, 1, 1),
        "{:?}",
        rep.counters
    );
    let acc = slot.taker_acc_ns.load(Ordering::SeqCst);
    assert!(acc >= 20_000_000, "the taker waited > 20 ms on the condvar; accumulated {acc} ns");
    assert_eq!(rep.abandoned, 0);
}

/// A key-value store with one item lock (every key in one bucket) and the slab lock: a GET
/// holds the item lock until the test releases it; SET #1 allocates under the slab lock and
/// joins the item queue; SET #2, 15 ms after SET #1 joined, allocates too, is dropped at the
/// item lock (the queue is older than the budget), sends its failure reply and then frees its
/// chunk under the slab lock (a plain lock: a cleanup is never dropped). The test enforces
/// every step's order (a held lock, the runtime's live counters), so the host's scheduling
/// cannot reorder them.
const KV: &str = r#"
duration_ms = 1000
[server]
max_cores = 2
[server.lock_control]
mode = "asqm"
budget_us = 10000
seed = "measured"
cleanup_lock = "slab"
[load]
rps = 1000
[[workload.locks]]
name = "slab"
[[workload.locks]]
name = "item"
[[workload.types]]
name = "get"
service = { dist = "constant", value_us = 40000 }
paths = [{ steps = [{ op = "lock", lock = "item" }] }]
[[workload.types]]
name = "set"
service = { dist = "constant", value_us = 100 }
paths = [{ steps = [
    { op = "lock", lock = "slab", time = { dist = "constant", value_us = 50 } },
    { op = "lock", lock = "item", time = { dist = "constant", value_us = 50 } },
] }]
[runtime]
tick_us = 200
"#;

#[test]
fn a_dropped_set_frees_its_chunk_under_the_slab_lock() {
    let _g = serial();
    let sc = load(KV, &[]);
    let kv = Arc::new(KvStore::new(&sc.scenario).expect("slab and item locks"));
    // The GETs (type 0) hold the item lock (id 1: the slab lock is 0) until released.
    let gated = Gated::new(kv.clone() as Arc<dyn Handler>, 1);
    let server = Server::start_with(&sc, opts(false), gated.clone()).expect("server starts");
    let c = Client::connect(server.addr());
    let n = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
    c.send(1, 0);
    wait_for("the GET takes the item lock", || gated.holding.load(Ordering::SeqCst));
    c.send(2, 1);
    wait_for("SET #1 waits for the item lock", || live(&server, "mutex_waits") >= 1);
    std::thread::sleep(Duration::from_millis(15));
    c.send(3, 1);
    assert_eq!(c.recv(), (3, Status::LockDropped), "SET #2 is dropped while the item lock is held");
    wait_for("SET #2's cleanup", || n(&kv.counts.cleanups) >= 1);
    gated.open.store(true, Ordering::SeqCst);
    let mut rest = vec![c.recv(), c.recv()];
    rest.sort_by_key(|r| r.0);
    let rep = server.stop();
    eprintln!("{rest:?} {:?} {:?}", rep.locks, kv.counts);
    assert_eq!(rest, vec![(1, Status::Ok), (2, Status::Ok)]);
    let (slab, item) = (lock(&rep, "slab"), lock(&rep, "item"));
    assert_eq!((item.drops, slab.drops), (1, 0));
    assert_eq!(slab.cleanups, 1, "the dropped SET re-took the slab lock");
    assert_eq!(rep.counter("lock_cleanups"), 1);
    assert_eq!(n(&kv.counts.cleanups), 1);
    // Two chunks allocated: SET #1's is linked, SET #2's is back in the free list.
    assert_eq!((n(&kv.counts.allocated), n(&kv.counts.linked), n(&kv.counts.free)), (2, 1, 1));
    // Slab acquisitions: two SETs and one cleanup.
    assert_eq!(slab.acquisitions, 3);
}

fn experiment(file: &str, overrides: &[&str]) -> Loaded {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/protego").join(file);
    let text = std::fs::read_to_string(&path).expect("shipped experiment");
    let o: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    Scenario::load(&text, Format::Toml, path.parent().unwrap(), &o).expect("valid experiment")
}

fn run(loaded: &Loaded) -> serde_json::Value {
    let (lg, rep) = common::serve_and_load(loaded);
    merge::merge(&lg, &rep)
}

/// The issue's claim on the real runtime: the two-path application at 2 × its lock-bound
/// capacity (path 2's lock saturates at 12.5 k req/s offered; 25 k offered), 2 workers.
/// Breakwater's signal is CPU queueing, which a lock queue is not (waiters leave their worker),
/// so it admits requests that wait at lock B far past the SLO; Protego's admission control plus
/// ASQM bounds what it serves.
///
/// Breakwater runs with its delay target at the SLO (2 ms), above this machine's own run-queue
/// noise. Measured on the idle 2-CPU machine: with the file's 500 µs target the real run queues
/// wait 0.74–1.2 ms at p99 although the workers are only 55 % busy (two spinning workers share
/// the 2 CPUs with the load generator, the controller and the loopback softirqs), Breakwater's
/// signal fires on that noise, its pool stays at ~10 credits and it throttles admission before
/// lock B's queue can grow: goodput 7.1–7.5 k req/s, p99 3.2 ms — no collapse (target 1 ms:
/// 5.3–5.6 k, p99 5–11 ms). At 2 ms: pool ~380 credits, goodput 1.8–2.1 k, p99 68–97 ms, while
/// Protego serves 8.1–8.4 k with p99 2.4–2.7 ms (above its 1 ms target: ASQM's queue-age test is
/// a lower bound of a joiner's wait, as in the simulator). The simulator on the same files
/// collapses at either target (no OS noise): Breakwater 2.5 k with p99 128 ms, Protego 14.4 k
/// with p99 1.96 ms — the same direction. Bounds are wide (README "Protego on the real runtime"):
/// Protego's p99 within 10 × the SLO and at most a third of Breakwater's (measured 1.2–1.4 × and
/// 25–40 × on a quiet machine; 1.6–1.9 × and 13–22 × with `scripts/test --busy`'s CPU hog on one
/// of the two CPUs; twice in eight hog runs with other jobs on the machine too, Protego's p99
/// passed 5 × the SLO or a fifth of Breakwater's): a host's stalls of several ms land in both
/// runs' latencies, and the order of magnitude between them is the claim.
#[test]
fn protego_bounds_p99_while_breakwater_goodput_collapses() {
    let _g = serial();
    let short = ["duration_ms=3000", "warmup_ms=1000"];
    let p = run(&experiment("real-synthetic.toml", &short));
    let b = run(&experiment("real-synthetic-breakwater.toml", &[short[0], short[1], "policy.overload.target_us=2000"]));
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap();
    let (pg, bg) = (f(&p, "goodput_rps"), f(&b, "goodput_rps"));
    let (pp99, bp99) = (p["latency_us"]["p99"].as_f64().unwrap(), b["latency_us"]["p99"].as_f64().unwrap());
    eprintln!(
        "protego: goodput {pg:.0}, p99 {pp99:.0} µs, lock drops {}, over budget {}; breakwater: goodput {bg:.0}, p99 {bp99:.0} µs, pool {:.0}",
        p["lock_control"]["drops"], p["runtime"]["server"]["counters"]["waits_over_budget"], b["credits"]["pool_mean"]
    );
    for v in [&p, &b] {
        assert_eq!(v["runtime"]["accounting"]["agree"], true, "{}", v["runtime"]["accounting"]);
        assert_eq!(v["runtime"]["accounting"]["client_conserved"], true);
    }
    assert!(p["lock_control"]["drops"].as_u64().unwrap() > 0, "ASQM dropped at lock B");
    assert!(pp99 <= 10.0 * f(&p, "slo_us"), "protego p99 {pp99} µs > 10 × SLO");
    assert!(pp99 * 3.0 <= bp99, "protego p99 {pp99} µs is not a third of breakwater's {bp99} µs");
    assert!(bp99 > 5.0 * f(&b, "slo_us"), "breakwater p99 {bp99} µs: the lock queue grows");
    assert!(pg >= 2.0 * bg, "protego goodput {pg:.0} < 2 × breakwater's {bg:.0}");
}

/// The shipped producer/consumer application (experiments/protego/real-condvar.toml: `wait` and
/// `signal` steps over one condvar, 55 % consumers, ASQM with a 2 ms budget) on loopback, 2 s.
/// What holds on any machine, however loaded: every request the client sent is answered,
/// dropped with a failure reply, or counted (accounting), consumers waited and were woken,
/// wake-ups never outnumber the items signalled, and since consumers outnumber producers the
/// excess waiters are refused and dropped (the waiters' queue would otherwise grow without end).
#[test]
fn condvar_programs_run_on_the_runtime_with_asqm() {
    let _g = serial();
    let m = run(&experiment("real-condvar.toml", &["duration_ms=2000", "warmup_ms=500"]));
    let acc = &m["runtime"]["accounting"];
    assert_eq!(acc["agree"], true, "{acc}");
    assert_eq!(acc["client_conserved"], true, "{acc}");
    let c = &m["runtime"]["server"]["counters"];
    let n = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("counter {k} in {c}"));
    eprintln!(
        "condvar: waits {}, wakeups {}, items {}, drops {}, lock_dropped {}; {}",
        n("condvar_waits"),
        n("condvar_wakeups"),
        n("condvar_items"),
        n("condvar_drops"),
        n("lock_dropped"),
        m["condvars"]
    );
    assert!(n("condvar_waits") > 0 && n("condvar_wakeups") > 0, "{c}");
    assert!(n("condvar_wakeups") <= n("condvar_items"), "a wake-up per item at most: {c}");
    assert!(n("condvar_wakeups") <= n("condvar_waits"), "{c}");
    assert!(n("condvar_drops") > 0, "the excess consumers were refused: {c}");
    assert!(n("lock_dropped") >= n("condvar_drops"), "each refusal sent a failure reply: {c}");
    let cv = &m["condvars"][0];
    assert_eq!(cv["name"], "items", "{m}");
    assert_eq!(cv["waits"].as_u64(), Some(n("condvar_waits")), "{cv}");
    assert_eq!(cv["wakeups"].as_u64(), Some(n("condvar_wakeups")), "{cv}");
    // `condvar_items` is the sum of the condvars' `signals` (one condvar here): equal by
    // construction, so only that items were signalled is checked.
    assert!(cv["signals"].as_u64().is_some_and(|s| s > 0), "{cv}");
    assert_eq!(cv["drops"].as_u64(), Some(n("condvar_drops")), "{cv}");
}

/// The same application without `server.lock_control`: the plain program handler waits with
/// `Cx::wait` and never refuses. Consumers waited and were woken, wake-ups never outnumber the
/// items or the waits, nothing is dropped, and every request is accounted for (a consumer still
/// waiting when the load stops times out at the client).
#[test]
fn condvar_programs_run_on_the_runtime_without_lock_control() {
    let _g = serial();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/protego/real-condvar.toml");
    let text = std::fs::read_to_string(&path).expect("shipped experiment");
    let asqm = "[server.lock_control]\nmode = \"asqm\"\nbudget_us = 2000\n";
    assert!(text.contains(asqm), "the file's lock_control table");
    let o: Vec<String> = ["duration_ms=1500", "warmup_ms=300", "workload.types.0.ratio=0.5", "workload.types.1.ratio=0.5"].map(String::from).to_vec();
    let loaded = Scenario::load(&text.replace(asqm, ""), Format::Toml, path.parent().unwrap(), &o).expect("valid");
    assert!(loaded.scenario.server.lock_control.is_none());
    let m = run(&loaded);
    let acc = &m["runtime"]["accounting"];
    assert_eq!(acc["agree"], true, "{acc}");
    assert_eq!(acc["client_conserved"], true, "{acc}");
    let c = &m["runtime"]["server"]["counters"];
    let n = |k: &str| c[k].as_u64().unwrap_or_else(|| panic!("counter {k} in {c}"));
    assert!(n("condvar_waits") > 0 && n("condvar_wakeups") > 0, "{c}");
    assert!(n("condvar_wakeups") <= n("condvar_items") && n("condvar_wakeups") <= n("condvar_waits"), "{c}");
    assert_eq!((n("condvar_drops"), n("lock_dropped")), (0, 0), "{c}");
    assert_eq!(m["condvars"][0]["waits"].as_u64(), Some(n("condvar_waits")));
}
