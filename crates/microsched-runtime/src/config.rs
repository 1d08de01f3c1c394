//! Configuration checks shared by the server and the load generator: where they may bind or
//! send (loopback unless told otherwise), and what the runtime can run.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use microsched_core::scenario::{DelaySignal, Scenario};
use microsched_core::ScenarioError;

/// Most worker threads the runtime starts (one thread per "core").
pub const MAX_WORKERS: u32 = 64;
/// Largest service time a request may ask for; above it the server refuses the request
/// (`bad_request`) and the load generator refuses the scenario.
pub const MAX_SERVICE_NS: u64 = 100_000_000;
/// Highest offered load the load generator accepts.
pub const MAX_RPS: f64 = 5e6;

/// A bad configuration; the message names what is wrong and what is allowed.
#[derive(Debug, Clone, PartialEq)]
pub struct ConfigError(pub String);

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for ConfigError {}

impl From<ScenarioError> for ConfigError {
    fn from(e: ScenarioError) -> Self {
        ConfigError(e.to_string())
    }
}

/// Parses `HOST:PORT` (a name resolves to its first address).
pub fn parse_addr(text: &str, what: &str) -> Result<SocketAddr, ConfigError> {
    if let Ok(a) = text.parse::<SocketAddr>() {
        return Ok(a);
    }
    text.to_socket_addrs()
        .ok()
        .and_then(|mut it| it.next())
        .ok_or_else(|| ConfigError(format!("{what}: `{text}` is not an address: use HOST:PORT, e.g. 127.0.0.1:7878")))
}

/// Refuses a non-loopback address unless `allow_remote`.
pub fn check_loopback(addr: SocketAddr, allow_remote: bool, what: &str) -> Result<(), ConfigError> {
    let lo = match addr.ip() {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => v6.is_loopback(),
    };
    if lo || allow_remote {
        Ok(())
    } else {
        Err(ConfigError(format!(
            "{what}: {addr} is not a loopback address: the runtime uses 127.0.0.0/8 or ::1 unless --allow-remote is given"
        )))
    }
}

/// What the real runtime additionally refuses in a (valid) scenario: sizes it cannot run, and
/// every key it does not honour ([`check_supported`]).
pub fn check_scenario(sc: &Scenario) -> Result<(), ConfigError> {
    check_supported(sc)?;
    if sc.server.max_cores > MAX_WORKERS {
        return Err(ConfigError(format!(
            "server.max_cores: {} is not allowed for the real runtime: use 1..={MAX_WORKERS} (one worker thread per core)",
            sc.server.max_cores
        )));
    }
    if sc.clients.sessions > 65_536 {
        return Err(ConfigError(format!(
            "clients.sessions: {} is not allowed for the real runtime: use 1..=65536",
            sc.clients.sessions
        )));
    }
    Ok(())
}

/// A scenario key the runtime does not carry out. `check` returns the offending key (indexed
/// for list entries) and value when the scenario asks for something other than what the
/// runtime does.
struct Unsupported {
    check: fn(&Scenario) -> Option<(String, String)>,
    /// What the runtime does instead, or what to use.
    supported: &'static str,
}

fn set<T: std::fmt::Debug>(field: &str, v: T, refused: bool) -> Option<(String, String)> {
    refused.then(|| (field.to_string(), format!("{v:?}")))
}

/// Every scenario key is one of:
///
/// * honoured: `name`, `seed` (the load generator's arrivals and service times, the server's
///   program and steal-victim draws), `duration_ms`, `warmup_ms`, `slo_us`, `server.max_cores`,
///   `server.queue` and `server.steal` (the simulator's queueing policy objects decide,
///   [`crate::sched`]), `policy.sched` (every kind and field: `shinjuku`, `concord`,
///   `tiny_quanta` and `darc` run with a dispatcher thread, [`crate::dispatcher`]), and
///   `server.dispatcher` (a dispatcher thread takes one of `server.max_cores`; it pays its own
///   costs for real, so `cost_ns` and the other cost fields are the simulator's alone),
///   `server.preemption.quantum_us` (time slicing by a timer thread and yield points,
///   `crate::preempt`),
///   `network.rtt_us` (the credit controller's period; loopback has its own RTT),
///   `clients.{sessions, queue_capacity, timeout_us, first_request_only}`, `server.replicas`
///   (one `microsched serve` per replica, `microsched real` starts them; the load generator
///   talks to all: [`crate::loadgen`]), `clients.{replica_choice, retries, retry_timeouts}`,
///   `load.*`, `workload.types` with their
///   `paths`, `workload.locks` (blocking, or spinning on the worker with `spin`: [`crate::mutex`]), `workload.condvars` (`wait`/`signal` steps: the handlers' condvar loop over [`crate::mutex`]'s FIFOs), `server.lock_control` (every field: [`crate::asqm`]), `policy.*`, `metrics.sample_interval_us` (raised to 1 ms for the server's series), `runtime.*`,
///   `server.stack.profile = "this-machine"` (the simulator's name for this runtime's own, measured
///   stack: paid for real);
/// * honoured only at its default (one application: `applications`,
///   `server.per_application_cores`, `server.irq`; the cost
///   models of the simulator, which the runtime pays
///   for real, and mechanisms it does not have): the table below.
const UNSUPPORTED: &[Unsupported] = &[
    Unsupported {
        check: |s| set("server.steal_cost_ns", s.server.steal_cost_ns, s.server.steal_cost_ns != DEFAULT_STEAL_COST_NS),
        supported: "a steal costs what it really costs; leave the simulator's cost model at its default (100)",
    },
    Unsupported {
        check: |s| set("server.allocation_delay_us", s.server.allocation_delay_us, s.server.allocation_delay_us != DEFAULT_ALLOCATION_DELAY_US),
        supported: "waking a parked worker takes what the kernel takes; leave the simulator's cost model at its default (5)",
    },
    Unsupported {
        check: |s| set("server.wake_latency", &s.server.wake_latency, s.server.wake_latency.is_some()),
        supported: "waking a parked worker takes what the kernel takes (measured: the report's cores.wake_us); leave it unset",
    },
    Unsupported {
        check: |s| set("server.packet_cost_ns", s.server.packet_cost_ns, s.server.packet_cost_ns != 0.0),
        supported: "receiving a datagram costs what the socket costs; leave the simulator's cost model at its default (0)",
    },
    Unsupported {
        // `this-machine` describes this runtime's own stack to the simulator: the runtime pays
        // it for real, so it is honoured as is; any other cost would have to be faked.
        check: |s| {
            let st = s.server.stack.clone().unwrap_or_default();
            let own = microsched_core::stack::Stack { profile: microsched_core::stack::Profile::ThisMachine, ..Default::default() };
            set("server.stack", &st, !st.is_free() && st != own)
        },
        supported: "the runtime's stack costs what the socket costs; leave it at its default (unset) or profile = \"this-machine\" (its own measured cost) without explicit fields",
    },
    Unsupported {
        check: |s| set("server.search_pass_ns", s.server.search_pass_ns, s.server.search_pass_ns != DEFAULT_SEARCH_PASS_NS),
        supported: "a work-search pass takes what it really takes; leave the simulator's cost model at its default (250)",
    },
    Unsupported {
        // `auto` (the default) and `instant` both leave the search to the machine; only an
        // explicit cost model is refused.
        check: |s| set("server.search", &s.server.search, matches!(s.server.search, microsched_core::sched::search::SearchCfg::Probe(_))),
        supported: "idle workers look for work as the runtime's queues let them, at their real cost; leave the simulator's search model at its default (auto)",
    },
    Unsupported {
        check: |s| set("server.delay_signal", "exact", s.server.delay_signal == DelaySignal::Exact),
        supported: "the controller thread samples the congestion signal every runtime.tick_us (\"sampled\")",
    },
    Unsupported {
        check: |s| set("server.preemption.mechanism", s.server.preemption.mechanism, s.server.preemption.mechanism.is_some()),
        supported: "the runtime's interrupt is its own (a timer thread writes a flag that the request polls about every µs, as compiler interrupts do) and costs what it really costs; leave it out",
    },
    Unsupported {
        check: |s| set("server.preemption.percentile", s.server.preemption.percentile, s.server.preemption.percentile != 0.0),
        supported: "the runtime pays the real interrupt costs, not a percentile of a table; leave it at 0",
    },
    Unsupported {
        check: |s| set("server.preemption.service_inflation", s.server.preemption.service_inflation, s.server.preemption.service_inflation != 0.0),
        supported: "the runtime's yield points cost what they really cost (a flag read every µs of spinning); leave it at 0",
    },
    Unsupported {
        check: |s| {
            let p = &s.server.preemption;
            [("send_ns", p.send_ns), ("propagation_ns", p.propagation_ns), ("receive_ns", p.receive_ns), ("return_ns", p.return_ns)]
                .into_iter()
                .find(|(_, v)| *v != 0.0)
                .map(|(k, v)| (format!("server.preemption.{k}"), format!("{v:?}")))
        },
        supported: "the runtime's preemption costs what it really costs (timer wake-up, flag, coroutine switch), not the simulator's cost model: leave it at 0",
    },
    Unsupported {
        check: |s| set("network.jitter_us", s.network.jitter_us, s.network.jitter_us != 0.0),
        supported: "the network is the real one (loopback unless --allow-remote); leave it at 0",
    },
    Unsupported {
        check: |s| set("workload.replay", &s.workload.replay, s.workload.replay.is_some()),
        supported: "the load generator draws its requests from the scenario's streams (the simulator's own); a replay is the simulator's: record a real run with metrics.record_requests (`microsched real --record`) and replay it in `microsched run`",
    },
    Unsupported {
        // The dispatcher thread hands work to workers that are always there: a parked worker
        // is woken only by the controller's grant, which does not see the class queues.
        check: |s| {
            let dynamic = !matches!(s.policy.allocator, microsched_core::scenario::AllocatorCfg::Static(_));
            set("policy.allocator", "a dynamic allocator", dynamic && crate::dispatcher::wanted(s))
        },
        supported: "the policies with a dispatcher (shinjuku, concord, tiny_quanta, darc, or server.dispatcher) run on statically allocated workers: use policy.allocator.kind = \"static\"",
    },
    Unsupported {
        check: |s| matches!(s.policy.sched, microsched_core::scenario::SchedCfg::Python(_)).then(|| ("policy.sched.kind".to_string(), "\"python\"".to_string())),
        supported: "Python queueing policies run in the simulator; the runtime's workers decide on every request without the GIL, so they run the built-in queueing policies (Python core allocators and overload controllers run in the runtime's control thread)",
    },
    Unsupported {
        // The simulator's stand-ins for what harvesting costs (hand-over on a lent core,
        // eviction, cache refill): the runtime's workers pay them for real.
        check: |s| {
            use microsched_core::alloc::{harvest::Mechanism, harvest_acbf, harvest_smart, harvest_static};
            use microsched_core::scenario::AllocatorCfg as A;
            let (m, default): (&Mechanism, Mechanism) = match &s.policy.allocator {
                A::HarvestStatic(c) => (&c.mechanism, harvest_static::Config::default().mechanism),
                A::HarvestAcbf(c) => (&c.mechanism, harvest_acbf::Config::default().mechanism),
                A::HarvestSmart(c) => (&c.mechanism, harvest_smart::Config::default().mechanism),
                _ => return None,
            };
            let m = Mechanism { kind: default.kind, ..m.clone() };
            set("policy.allocator.mechanism", &m, m != default)
        },
        supported: "a parked worker wakes, its caches refill and it shares a core, as the machine makes it; leave the mechanism's latencies (lend_us, evict_us, refill_us, lent_wake, timeshare) at their defaults",
    },
    Unsupported {
        // Each replica is a `serve` of its own that pins its worker i to the i-th allowed CPU:
        // the replicas' workers would share CPUs while other CPUs stay free.
        check: |s| set("runtime.pin_workers", s.runtime.pin_workers, s.runtime.pin_workers && s.server.replicas > 1),
        supported: "with server.replicas > 1 every replica would pin its workers to the same CPUs; leave it false (the kernel spreads them)",
    },
    Unsupported {
        check: |s| set("server.per_application_cores", s.server.per_application_cores, s.server.per_application_cores),
        supported: "the runtime serves one application on one core set",
    },
    Unsupported {
        check: |s| set("server.irq", s.server.irq.as_ref().map(|i| i.rate_per_s), s.server.irq.is_some()),
        supported: "real NIC interrupts are the machine's own (see `microsched harvest --irq` for steering them)",
    },
    Unsupported {
        check: |s| set("clients.burst", s.clients.burst, s.clients.burst != microsched_core::scenario::ClientBurst::Off),
        supported: "the load generator's sessions send each request when it is generated (clients.burst = \"off\"); credit bursts are the simulator's",
    },
    Unsupported {
        check: |s| (!s.applications.is_empty()).then(|| ("applications".to_string(), format!("{} co-tenant application(s)", s.applications.len()))),
        supported: "the runtime serves one application (the top-level workload); the best-effort co-tenant is runtime.be_threads",
    },
];

/// The simulator's defaults for its cost models (`microsched_core::scenario`).
const DEFAULT_STEAL_COST_NS: f64 = 100.0;
const DEFAULT_ALLOCATION_DELAY_US: f64 = 5.0;
const DEFAULT_SEARCH_PASS_NS: f64 = 250.0;

/// Refuses, naming the key, every scenario setting the runtime would otherwise ignore (so that
/// `microsched real --compare-sim` never compares two different systems without a word).
pub fn check_supported(sc: &Scenario) -> Result<(), ScenarioError> {
    for u in UNSUPPORTED {
        if let Some((field, value)) = (u.check)(sc) {
            return Err(ScenarioError::new(
                field,
                format!("{value} is not supported by the real runtime: {}", u.supported),
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use microsched_core::scenario::Format;
    use std::path::Path;

    const MINIMAL: &str = r#"
duration_ms = 10
[server]
max_cores = 2
[load]
rps = 1000
[[workload.types]]
name = "a"
service = { dist = "constant", value_us = 10 }
[[workload.locks]]
name = "m"
count = 4
"#;

    fn load(o: &[&str]) -> Scenario {
        let o: Vec<String> = o.iter().map(|s| s.to_string()).collect();
        Scenario::load(MINIMAL, Format::Toml, Path::new("."), &o).expect("valid").scenario
    }

    fn refused(o: &[&str]) -> ScenarioError {
        check_supported(&load(o)).expect_err("refused")
    }

    #[test]
    fn defaults_and_honoured_keys_pass() {
        check_supported(&load(&[])).unwrap();
        check_supported(&load(&[
            "server.steal=false",
            "server.queue=\"per_core\"",
            "server.queue=\"central\"",
            "server.delay_signal=\"sampled\"",
            "server.stack.profile=\"this-machine\"",
            "network.rtt_us=50",
            "server.steal_cost_ns=100",
            "server.preemption.quantum_us=5",
            "policy.sched={kind=\"synergy\",thresh_wqd_us=20}",
        ]))
        .unwrap();
        // The simulator's default search (`auto`) and `instant` leave the search to the machine.
        for search in ["auto", "instant"] {
            check_supported(&load(&["server.queue=\"per_core\"", &format!("server.search.kind=\"{search}\"")])).unwrap();
        }
        check_scenario(&load(&[])).unwrap();
    }

    #[test]
    fn a_mechanism_the_runtime_lacks_is_refused_by_name() {
        for (o, field, hint) in [
            ("server.delay_signal=\"exact\"", "server.delay_signal", "sampled"),
            ("server.preemption.mechanism=\"uintr\"", "server.preemption.mechanism", "compiler interrupts"),
            ("server.preemption.mechanism=\"dune_posted\"", "server.preemption.mechanism", "compiler interrupts"),
            (
                "policy.allocator={kind=\"harvest_static\",buffer=0,mechanism={lent_wake={dist=\"constant\",value_us=30}}}",
                "policy.allocator.mechanism",
                "lent_wake",
            ),
            ("server.preemption.service_inflation=0.1", "server.preemption.service_inflation", "yield points"),
            ("server.per_application_cores=true", "server.per_application_cores", "one core set"),
            ("server.irq.rate_per_s=1000", "server.irq", "interrupts"),
            ("policy.overload.kind=\"breakwater\"\nclients.burst=\"credits\"", "clients.burst", "generated"),
            ("applications=[{name=\"b\",load={rps=10},workload={types=[{name=\"x\",service={dist=\"constant\",value_us=1}}]}}]", "applications", "one application"),
        ] {
            let e = refused(&o.split('\n').collect::<Vec<_>>());
            assert_eq!(e.field, field, "{o}: {e}");
            assert!(e.message.contains("not supported by the real runtime") && e.message.contains(hint), "{o}: {e}");
        }
    }

    /// Replicas with retries were refused ("one `microsched serve` is one node"): the load
    /// generator now talks to several servers and resends failures.
    #[test]
    fn replicas_and_retries_are_honoured() {
        check_scenario(&load(&["server.replicas=3", "clients.retries=2", "clients.replica_choice=\"primary\"", "clients.retry_timeouts=true"]))
            .unwrap();
        check_scenario(&load(&["server.replicas=2", "clients.replica_choice=\"hash\""])).unwrap();
        check_scenario(&load(&["runtime.pin_workers=true"])).unwrap();
        let e = refused(&["server.replicas=2", "runtime.pin_workers=true"]);
        assert_eq!(e.field, "runtime.pin_workers", "{e}");
        assert!(e.message.contains("same CPUs"), "{e}");
    }

    #[test]
    fn a_simulator_cost_model_other_than_its_default_is_refused_by_name() {
        for (o, field) in [
            ("server.steal_cost_ns=300", "server.steal_cost_ns"),
            ("server.allocation_delay_us=20", "server.allocation_delay_us"),
            ("server.packet_cost_ns=50", "server.packet_cost_ns"),
            ("server.stack.profile=\"caladan-protego\"", "server.stack"),
            ("server.stack.profile=\"this-machine\"\nserver.stack.rx_ns=10", "server.stack"),
            ("server.search_pass_ns=100", "server.search_pass_ns"),
            ("server.search.kind=\"probe\"", "server.search"),
            ("server.preemption.receive_ns=100", "server.preemption.receive_ns"),
            ("network.jitter_us=3", "network.jitter_us"),
        ] {
            let e = refused(&o.split('\n').collect::<Vec<_>>());
            assert_eq!(e.field, field, "{o}: {e}");
            assert!(e.message.contains("default") || e.message.contains("leave it at 0"), "{o}: {e}");
        }
    }

    #[test]
    fn records_are_honoured_and_a_replay_is_left_to_the_simulator() {
        check_supported(&load(&["metrics.record_requests=true"])).unwrap();
        let f = std::env::temp_dir().join(format!("microsched-config-replay-{}.csv", std::process::id()));
        std::fs::write(&f, "created_ns,session,type,service_ns\n10,0,0,1000\n").unwrap();
        let e = refused(&[&format!("workload.replay={:?}", f.to_str().unwrap())]);
        std::fs::remove_file(&f).unwrap();
        assert_eq!(e.field, "workload.replay", "{e}");
        assert!(e.message.contains("simulator"), "{e}");
    }

    #[test]
    fn the_dispatcher_policies_are_honoured_on_static_workers_only() {
        for o in [
            "policy.sched={kind=\"shinjuku\"}",
            "policy.sched={kind=\"darc\"}",
            "server.dispatcher.cost_ns=100",
        ] {
            check_supported(&load(&[o])).unwrap_or_else(|e| panic!("{o}: {e}"));
        }
        check_supported(&load(&["workload.locks=[]", "policy.sched={kind=\"tiny_quanta\"}"])).unwrap();
        check_supported(&load(&["server.dispatcher.cost_ns=100", "policy.sched={kind=\"concord\"}"])).unwrap();
        let e = refused(&["policy.sched={kind=\"shinjuku\"}", "policy.allocator={kind=\"shenango\"}"]);
        assert_eq!(e.field, "policy.allocator", "{e}");
        assert!(e.message.contains("static"), "{e}");
        // Without a dispatcher policy a dynamic allocator stays honoured.
        check_supported(&load(&["policy.allocator={kind=\"shenango\"}"])).unwrap();
    }

    #[test]
    fn the_shipped_real_experiments_use_only_what_the_runtime_honours() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        let mut n = 0;
        for (sub, prefix) in [("real", ""), ("synergy", "real-")] {
            let dir = root.join(sub);
            for f in std::fs::read_dir(&dir).expect("experiments/") {
                let path = f.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().to_string();
                if name.ends_with(".toml") && name.starts_with(prefix) {
                    let text = std::fs::read_to_string(&path).unwrap();
                    let sc = Scenario::load(&text, Format::Toml, &dir, &[]).expect("valid").scenario;
                    check_scenario(&sc).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                    n += 1;
                }
            }
        }
        assert!(n >= 4);
    }

    #[test]
    fn protegos_keys_are_honoured_and_its_real_experiments_pass() {
        check_supported(&load(&["server.lock_control.mode=\"asqm\"", "server.lock_control.budget_us=100", "server.lock_control.cleanup_lock=\"m\""])).unwrap();
        check_supported(&load(&["server.lock_control.mode=\"try_lock\""])).unwrap();
        check_supported(&load(&["policy.overload={kind=\"seda\"}"])).unwrap();
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/protego");
        let mut n = 0;
        for f in std::fs::read_dir(&dir).expect("experiments/protego") {
            let path = f.unwrap().path();
            if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("real-") && n.ends_with(".toml")) {
                let text = std::fs::read_to_string(&path).unwrap();
                let sc = Scenario::load(&text, Format::Toml, &dir, &[]).expect("valid").scenario;
                check_scenario(&sc).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                assert!(sc.server.max_cores <= 2, "{}: sized for 2 CPUs", path.display());
                n += 1;
            }
        }
        assert!(n >= 3);
    }

    #[test]
    fn the_server_and_the_load_generator_refuse_too() {
        let e = check_scenario(&load(&["server.delay_signal=\"exact\""])).unwrap_err();
        assert!(e.0.starts_with("server.delay_signal: \"exact\" is not supported by the real runtime"), "{e}");
    }
}
