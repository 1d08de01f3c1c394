//! Any scenario errors cleanly or runs with bounded memory and time (issue 13), over generated
//! scenarios: a shipped scenario of `experiments/` with up to four `--set` overrides of any of
//! its fields (every leaf of its resolved form, list items included), of a policy's or a
//! distribution's kind, or of a key it does not have, each set to an ordinary, extreme,
//! non-finite, negative, string or boolean value.
//!
//! * An error names a field (never the bare `scenario`), and a non-finite value never loads.
//! * A scenario that loads is estimated before it runs; one over the limits is refused, naming
//!   a field; the others run under a counting allocator: the heap the run takes beyond what it
//!   had before stays within twice the estimate plus a fixed allowance (histograms, empirical
//!   CSVs, the event queue's growth), and the run stops within a second of being asked to (the
//!   engine checks every `CHECK_EVERY` events; a policy stuck in a loop would not).
//!
//! One test function: the allocator's counters are process-wide, so the cases run one at a time.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use microsched_core::scenario::{Format, Scenario, MAX_SAMPLES};
use proptest::prelude::*;
use proptest::test_runner::RngSeed;
use serde_json::Value;

#[path = "common/counting_alloc.rs"]
mod counting_alloc;

use counting_alloc::{Counting, NOW, PEAK};

#[global_allocator]
static ALLOC: Counting = Counting;

/// Outcomes so far (errors, refused by the estimate, ran), shown with `--nocapture`.
static OUTCOMES: [AtomicUsize; 3] = [AtomicUsize::new(0), AtomicUsize::new(0), AtomicUsize::new(0)];

fn outcome(i: usize) {
    OUTCOMES[i].fetch_add(1, Ordering::Relaxed);
    let [e, r, ran] = OUTCOMES.each_ref().map(|a| a.load(Ordering::Relaxed));
    eprintln!("outcomes: {e} errors, {r} refused by the estimate, {ran} ran");
}

/// Shipped scenarios: every allocator, overload controller and queueing policy family, programs
/// with locks, applications and replicas, empirical distributions.
const BASES: &[&str] = &[
    "validation/mmc.toml",
    "allocators/base.toml",
    "collapse/base.toml",
    "coresync/base.toml",
    "load-shift/base.toml",
    "real/overload-2x.toml",
    "synergy/zippydb.toml",
    "harvest/base.toml",
    "protego/synthetic.toml",
    "protego/memcached-usr.toml",
];

/// Values an ordinary scenario holds (most cases should load and run) ...
const ORDINARY: &[&str] = &["0.5", "1", "2", "3", "8", "50", "100", "1000", "0.9", "20"];
/// ... and the ones that broke the engine before issue 13.
const NASTY: &[&str] = &[
    "0", "-1", "1e-9", "0.001", "1e6", "1e9", "1e15", "1e300", "nan", "inf", "-inf", "9223372036854775807",
    "\"abc\"", "true", "[]", "{}",
];

const KINDS: &[&str] = &[
    "policy.allocator.kind=static",
    "policy.allocator.kind=shenango",
    "policy.allocator.kind=caladan",
    "policy.allocator.kind=utilization_range",
    "policy.allocator.kind=delay_range",
    "policy.allocator.kind=coresync",
    "policy.allocator.kind=harvest_acbf",
    "policy.allocator.kind=harvest_smart",
    "policy.overload.kind=none",
    "policy.overload.kind=breakwater",
    "policy.overload.kind=protego",
    "policy.overload.kind=seda",
    "policy.sched.kind=synergy",
    "policy.sched.kind=tiny_quanta",
    "policy.sched.kind=darc",
    "policy.sched.kind=shinjuku",
    "policy.sched.kind=concord",
    "server.queue=per_core",
    "server.replicas=2",
    "server.search.kind=probe",
    "server.search.kind=instant",
    "server.irq={rate_per_s=300000}",
    "server.irq={rate_per_s=300000,steering=\"secondary\"}",
    "server.wake_latency={dist=\"lognormal\",mean_us=5,p99_us=50}",
    "workload.types.0.service.dist=lognormal",
    "workload.types.0.service.dist=bimodal",
    "no.such.key=1",
];

struct Base {
    name: &'static str,
    text: String,
    dir: PathBuf,
    /// Every leaf of the resolved scenario, as a dotted `--set` key.
    keys: Vec<String>,
}

fn leaves(v: &Value, path: &str, out: &mut Vec<String>) {
    let at = |k: &str| if path.is_empty() { k.to_string() } else { format!("{path}.{k}") };
    match v {
        Value::Object(m) => m.iter().for_each(|(k, v)| leaves(v, &at(k), out)),
        Value::Array(a) if !a.is_empty() => a.iter().enumerate().for_each(|(i, v)| leaves(v, &at(&i.to_string()), out)),
        _ => out.push(path.to_string()),
    }
}

fn bases() -> &'static [Base] {
    static BASES_LOADED: OnceLock<Vec<Base>> = OnceLock::new();
    BASES_LOADED.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
        BASES
            .iter()
            .map(|name| {
                let path = root.join(name);
                let text = std::fs::read_to_string(&path).expect("shipped scenario");
                let dir = path.parent().unwrap().to_path_buf();
                let loaded = Scenario::load(&text, Format::Toml, &dir, &[]).expect("shipped scenarios load");
                let mut keys = Vec::new();
                leaves(&serde_json::to_value(&loaded.scenario).unwrap(), "", &mut keys);
                Base { name, text, dir, keys }
            })
            .collect()
    })
}

fn override_for(base: usize) -> impl Strategy<Value = String> {
    let keys = bases()[base].keys.clone();
    prop_oneof![
        3 => (prop::sample::select(keys.clone()), prop::sample::select(ORDINARY)).prop_map(|(k, v)| format!("{k}={v}")),
        2 => (prop::sample::select(keys), prop::sample::select(NASTY)).prop_map(|(k, v)| format!("{k}={v}")),
        1 => prop::sample::select(KINDS).prop_map(str::to_string),
    ]
}

fn case() -> impl Strategy<Value = (usize, Vec<String>)> {
    (0..BASES.len()).prop_flat_map(|b| (Just(b), prop::collection::vec(override_for(b), 0..=4)))
}

/// Heap the run may take beyond the estimate: auto-resizing histograms (a few per request type
/// and lock, each at most ~1 MB over the whole range of u64 nanoseconds), empirical CSVs and
/// the engine's working vectors.
const ALLOWANCE: f64 = 96e6;
const RUN_FOR: Duration = Duration::from_millis(300);
const STOP_WITHIN: Duration = Duration::from_secs(2);

fn proptest_seed() -> u64 {
    match std::env::var("MICROSCHED_PROPTEST_SEED") {
        Err(_) => 13,
        Ok(v) => v.parse().unwrap_or_else(|_| panic!("MICROSCHED_PROPTEST_SEED: {v:?} is not a u64")),
    }
}

proptest! {
    // Pinned, as every test of the project: a fresh clone runs the same 160 cases. Another
    // seed explores further: MICROSCHED_PROPTEST_SEED=<u64>.
    #![proptest_config(ProptestConfig {
        cases: 160,
        failure_persistence: None,
        rng_seed: RngSeed::Fixed(proptest_seed()),
        ..ProptestConfig::default()
    })]

    #[test]
    fn any_scenario_errors_cleanly_or_runs_bounded((b, overrides) in case()) {
        let base = &bases()[b];
        let non_finite = overrides.iter().any(|o| o.ends_with("=nan") || o.ends_with("=inf") || o.ends_with("=-inf"));
        let loaded = match Scenario::load(&base.text, Format::Toml, &base.dir, &overrides) {
            Err(e) => {
                prop_assert!(!e.field.is_empty() && e.field != "scenario" && !e.message.is_empty(), "{}: {e}", base.name);
                outcome(0);
                return Ok(());
            }
            Ok(l) => l,
        };
        prop_assert!(!non_finite, "{} {overrides:?}: a non-finite value was accepted", base.name);
        let est = match loaded.check_resources(false) {
            Err(e) => {
                prop_assert!(e.message.contains("too large") && !e.field.is_empty(), "{e}");
                outcome(1);
                return Ok(());
            }
            Ok(est) => est,
        };
        prop_assert!(est.samples <= MAX_SAMPLES + 1);
        let before = NOW.load(Ordering::Relaxed);
        PEAK.store(before, Ordering::Relaxed);
        let start = Instant::now();
        let mut stop_asked: Option<Instant> = None;
        let r = microsched_sim::run_with(&loaded, None, false, &mut |_, _| {
            if start.elapsed() < RUN_FOR {
                return true;
            }
            stop_asked.get_or_insert_with(Instant::now);
            false
        });
        let r = match r {
            // A scenario can still be refused while the engine is built (a property only the
            // built model knows); it must name its field too.
            Err(e) => {
                prop_assert!(!e.field.is_empty() && e.field != "scenario", "{}: {e}", base.name);
                outcome(0);
                return Ok(());
            }
            Ok(r) => r,
        };
        let took = stop_asked.map_or(Duration::ZERO, |t| t.elapsed());
        prop_assert!(took < STOP_WITHIN, "{} {overrides:?}: stopped {took:?} after being asked", base.name);
        let peak = (PEAK.load(Ordering::Relaxed) - before) as f64;
        prop_assert!(
            peak <= 2.0 * est.memory_bytes + ALLOWANCE,
            "{} {overrides:?}: peak heap {:.1} MB, estimate {:.1} MB",
            base.name, peak / 1e6, est.memory_bytes / 1e6
        );
        prop_assert!(r.timeseries.t_ms.len() as u64 <= MAX_SAMPLES + 1);
        let s = &r.summary;
        prop_assert_eq!(s.requests.generated, s.requests.completed + s.requests.dropped + s.requests.in_flight);
        outcome(2);
    }
}
