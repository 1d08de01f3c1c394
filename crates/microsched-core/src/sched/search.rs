//! Work search: how an idle core finds work in other cores' queues, and when it may park.
//!
//! Two mechanisms, chosen by `server.search.kind`:
//!
//! * `instant`: an idle core finds queued work at no cost and at once; work queued
//!   behind a busy core is stolen at once by the most recently idle spinning core, and arriving
//!   work goes straight to its home core if that core is spinning. The poll loop is not simulated
//!   pass by pass; parking follows the core allocator's rule (a park check after `poll_us`).
//! * `probe`: the search of the simulation study's simulator (estuhr1206/scheduling-policies-sim,
//!   `tasks.py::WorkStealTask`, the McClure simulator's): a core that runs out of work checks its
//!   own queue (free), then sweeps the other cores' queues one probe at a time, each probe taking
//!   `probe_ns` (`WORK_STEAL_CHECK_TIME`, 100 ns); it re-checks its own queue every
//!   `own_check_us` (`LOCAL_QUEUE_CHECK_TIMER`, 1 µs) and at the start of each sweep. A probe that
//!   finds stealable work steals (paying `server.steal_cost_ns`, `WORK_STEAL_TIME`). The order
//!   of a sweep is `sweep` (from a random start through a fixed random permutation of the queues,
//!   the simulator's default walk) or `random` (a fresh random permutation per sweep, its
//!   `random_work_steal_search`). So nothing is found instantly: new work waits for a probe or
//!   an own-queue check, and which idle core takes it depends on where each one is in its sweep
//!   (effectively a random idle core, not the most recently idle one). Parking: `poll` parks
//!   after the allocator's poll period of fruitless search, wherever the sweep is (Caladan's
//!   rule), `sweep` only at the end of a full fruitless sweep that ends at least a poll period
//!   after the search began (the study's simulator: `MINIMUM_WORK_SEARCH_TIME`, then the final
//!   own-queue check, then park).
//!
//! `auto` (default) is `probe` with its defaults wherever it models the queueing (per-core queues
//! with stealing), `instant` elsewhere.
//!
//! The policy here only decides the probe order and holds the timing parameters; the driver
//! (the simulator's server) keeps each searching core's search start and schedules the probes
//! that can find something (a probe of an empty queue changes nothing, so only the first probe
//! of each queue holding stealable work is an event). A sweep's random start is drawn from its
//! coordinates (run, core, search, sweep number) rather than from a stream in event order, so
//! the sweeps of an idle core need not be played out one by one.

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::rng::{hash, Stream};
use crate::{Nanos, ScenarioError};

/// The work search of idle cores (`[server.search]`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum SearchCfg {
    /// Idle cores find queued work at once and at no cost (the simulator's historical model).
    Instant,
    /// Probe-by-probe sweeps of the other queues, each probe costing time.
    Probe(ProbeCfg),
    /// `probe` with its defaults where it applies (per-core queues with stealing under the
    /// `queue` policy, no dispatcher), `instant` elsewhere (central queues, policies that
    /// choose victims themselves). The default.
    #[default]
    Auto,
}

/// The probe-cost search's parameters (defaults: the simulation study's simulator).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ProbeCfg {
    /// Time of one probe of another core's queue (`WORK_STEAL_CHECK_TIME`).
    pub probe_ns: f64,
    /// Interval of the own-queue re-checks during a sweep (`LOCAL_QUEUE_CHECK_TIMER`).
    pub own_check_us: f64,
    /// Order of the queues within a sweep.
    pub order: VictimOrder,
    /// When a fruitless search parks (subject to the core allocator's park rule and verdict).
    pub park: ParkAfter,
}

impl Default for ProbeCfg {
    fn default() -> Self {
        Self { probe_ns: 100.0, own_check_us: 1.0, order: VictimOrder::Sweep, park: ParkAfter::Poll }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum VictimOrder {
    /// From a random start through a fixed random permutation of the queues (the study's walk).
    Sweep,
    /// A fresh random permutation for every sweep.
    Random,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ParkAfter {
    /// After the allocator's poll period of fruitless search, mid-sweep or not (Caladan's rule).
    Poll,
    /// At the end of the first full fruitless sweep that ends at least a poll period after the
    /// search began (the simulation study's simulator).
    Sweep,
}

impl SearchCfg {
    /// Checks the parameters; `field` is the table's dotted path (`server.search`).
    pub fn validate(&self, field: &str) -> Result<(), ScenarioError> {
        if let SearchCfg::Probe(p) = self {
            if !(p.probe_ns.is_finite() && p.probe_ns >= 1.0) {
                return Err(ScenarioError::new(format!("{field}.probe_ns"), format!("{} is not allowed: use a time of at least 1 ns", p.probe_ns)));
            }
            if !(p.own_check_us.is_finite() && p.own_check_us * 1e3 >= 1.0) {
                return Err(ScenarioError::new(format!("{field}.own_check_us"), format!("{} is not allowed: use a time of at least 0.001 µs", p.own_check_us)));
            }
        }
        Ok(())
    }

    pub fn is_instant(&self) -> bool {
        matches!(self, SearchCfg::Instant)
    }

    /// `auto` resolved for a scenario: `probe` (defaults) if `probe_applies`, else `instant`.
    pub fn resolved(&self, probe_applies: bool) -> SearchCfg {
        match self {
            SearchCfg::Auto if probe_applies => SearchCfg::Probe(ProbeCfg::default()),
            SearchCfg::Auto => SearchCfg::Instant,
            other => other.clone(),
        }
    }

    /// The search of a server with `cores` queues; `None` for the instant search (the driver
    /// keeps its built-in fast path). `rng` is the run's `search` stream.
    pub fn build(&self, cores: usize, rng: Stream) -> Option<Box<dyn WorkSearch>> {
        match self {
            SearchCfg::Instant | SearchCfg::Auto => None,
            SearchCfg::Probe(p) => Some(Box::new(ProbeSearch::new(p, cores, rng))),
        }
    }
}

/// A probe-by-probe work search. A searching core sweeps back to back: sweep `k` (0-based) of
/// a search that began at `t0` starts at `t0 + k · probes_per_sweep() · probe_ns()`, and the
/// driver schedules the probe of queue `v` at that start `+ position(core, search, k, v) ·
/// probe_ns()`. Each sweep's order is a pure function of (run, core, search, sweep): any sweep
/// can be looked up without drawing the ones before it, so a sweep that finds nothing costs the
/// driver no event, however long a core idles.
pub trait WorkSearch: Send {
    /// 1-based position of `victim`'s queue in sweep `sweep` of `core`'s search number `search`
    /// (`victim != core`).
    fn position(&mut self, core: u16, search: u32, sweep: u64, victim: u16) -> u32;
    /// Probes in one sweep (every queue but the core's own).
    fn probes_per_sweep(&self) -> u32;
    fn probe_ns(&self) -> Nanos;
    fn own_check_ns(&self) -> Nanos;
    /// Whether a fruitless search parks only at the end of a sweep.
    fn parks_after_sweep(&self) -> bool;
    /// Under an order whose every sweep walks ONE fixed cycle of the queues from a per-sweep
    /// origin (`sweep`): `queue`'s place in that cycle. The m-th probe of a sweep looks at place
    /// `origin + m` (mod the queue count), `origin + m + 1` once past the core's own queue.
    /// None for orders without such a cycle (`random`). All walks advance one place per probe,
    /// so the driver can keep the searching cores ordered by where they are instead of asking
    /// every one of them which comes first to a queue.
    fn cycle_place(&self, _queue: u16) -> Option<u32> {
        None
    }
    /// The key of `core`'s search `search` from which the origins of its sweeps derive (orders
    /// with a `cycle_place`): constant over a search, so the driver computes it once per search
    /// instead of once per sweep it places (many per request when cores search long).
    fn search_key(&self, _core: u16, _search: u32) -> u64 {
        0
    }
    /// The origin of sweep `sweep` of the search whose `search_key` is `key` (orders with a
    /// `cycle_place`).
    fn origin(&self, _key: u64, _sweep: u64) -> u32 {
        0
    }
    /// `origin` of sweep `sweep` of `core`'s search `search`, its key hashed here: one call for
    /// callers that look at a search about once (the driver's walk index).
    fn origin_of(&self, core: u16, search: u32, sweep: u64) -> u32 {
        self.origin(self.search_key(core, search), sweep)
    }
}

/// The study simulator's search (see the module docs).
#[derive(Debug, Clone)]
pub struct ProbeSearch {
    n: usize,
    probe: Nanos,
    own_check: Nanos,
    order: VictimOrder,
    park_sweep: bool,
    /// Drawn once from the run's `search` stream; every sweep's randomness derives from it and
    /// the sweep's coordinates (a counter-based generator).
    key: u64,
    /// Sweep order: the fixed permutation of the queues (`WS_PERMUTATION`) as each queue's index.
    perm_pos: Vec<u16>,
    /// Random order: per core, the last two sweeps' positions (n each), and which sweep each is.
    rows: Vec<u16>,
    row_tags: Vec<(u32, u64)>,
    scratch: Vec<u16>,
}

impl ProbeSearch {
    pub fn new(cfg: &ProbeCfg, cores: usize, mut rng: Stream) -> Self {
        let mut perm: Vec<u16> = (0..cores as u16).collect();
        perm.shuffle(&mut rng);
        let mut perm_pos = vec![0u16; cores];
        for (i, &q) in perm.iter().enumerate() {
            perm_pos[q as usize] = i as u16;
        }
        let random = cfg.order == VictimOrder::Random;
        Self {
            n: cores,
            probe: (cfg.probe_ns.round() as Nanos).max(1),
            own_check: ((cfg.own_check_us * 1e3).round() as Nanos).max(1),
            order: cfg.order,
            park_sweep: cfg.park == ParkAfter::Sweep,
            key: rng.gen(),
            perm_pos,
            rows: if random { vec![0; cores * 2 * cores] } else { Vec::new() },
            row_tags: if random { vec![(u32::MAX, u64::MAX); cores * 2] } else { Vec::new() },
            scratch: Vec::new(),
        }
    }

    fn sweep_seed(&self, core: u16, search: u32, sweep: u64) -> u64 {
        Self::sweep_seed_of(self.search_key(core, search), sweep)
    }

    fn sweep_seed_of(search_key: u64, sweep: u64) -> u64 {
        hash(search_key ^ sweep)
    }

    /// The random-order row of a sweep, drawn on first use (a core's probes look at its current
    /// sweep and the next, so two rows per core are enough).
    fn random_row(&mut self, core: u16, search: u32, sweep: u64) -> &[u16] {
        let n = self.n;
        let c = core as usize;
        let slot = match self.row_tags[2 * c..2 * c + 2].iter().position(|&t| t == (search, sweep)) {
            Some(i) => 2 * c + i,
            None => {
                // Replace the older of the two sweeps.
                let [a, b] = [self.row_tags[2 * c], self.row_tags[2 * c + 1]];
                let slot = if a.0 != search || (b.0 == search && a.1 < b.1) { 2 * c } else { 2 * c + 1 };
                let mut rng = Stream::seed_from_u64(self.sweep_seed(core, search, sweep));
                self.scratch.clear();
                self.scratch.extend((0..n as u16).filter(|&q| q != core));
                self.scratch.shuffle(&mut rng);
                let row = &mut self.rows[slot * n..(slot + 1) * n];
                for (i, &q) in self.scratch.iter().enumerate() {
                    row[q as usize] = i as u16 + 1;
                }
                self.row_tags[slot] = (search, sweep);
                slot
            }
        };
        &self.rows[slot * n..(slot + 1) * n]
    }
}

impl WorkSearch for ProbeSearch {
    #[inline]
    fn position(&mut self, core: u16, search: u32, sweep: u64, victim: u16) -> u32 {
        let n = self.n;
        match self.order {
            VictimOrder::Sweep => {
                // The walk visits permutation indices origin+1, origin+2, ... (mod n), skipping
                // the core's own queue at no cost.
                let o = self.origin_of(core, search, sweep) as usize;
                let step = |q: u16| {
                    let i = self.perm_pos[q as usize] as usize + n - o - 1; // < 2n: no division
                    if i >= n { i - n } else { i }
                };
                let (d, own) = (step(victim), step(core));
                (d + 1 - usize::from(own < d)) as u32
            }
            VictimOrder::Random => self.random_row(core, search, sweep)[victim as usize] as u32,
        }
    }

    fn probes_per_sweep(&self) -> u32 {
        (self.n as u32).saturating_sub(1).max(1)
    }

    fn probe_ns(&self) -> Nanos {
        self.probe
    }

    fn own_check_ns(&self) -> Nanos {
        self.own_check
    }

    fn parks_after_sweep(&self) -> bool {
        self.park_sweep
    }

    fn cycle_place(&self, queue: u16) -> Option<u32> {
        (self.order == VictimOrder::Sweep).then(|| self.perm_pos[queue as usize] as u32)
    }

    #[inline]
    fn search_key(&self, core: u16, search: u32) -> u64 {
        hash(self.key ^ ((core as u64) << 32 | search as u64))
    }

    #[inline]
    fn origin(&self, key: u64, sweep: u64) -> u32 {
        ((Self::sweep_seed_of(key, sweep) as u128 * self.n as u128) >> 64) as u32
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::stream;

    /// Every sweep visits every other queue exactly once, at positions 1..n-1.
    #[test]
    fn a_sweep_probes_every_other_queue_once() {
        for order in [VictimOrder::Sweep, VictimOrder::Random] {
            let cfg = ProbeCfg { order, ..ProbeCfg::default() };
            let n = 7;
            let mut s = ProbeSearch::new(&cfg, n, stream(3, "search"));
            for core in 0..n as u16 {
                for search in 0..3 {
                    for sweep in 0..20 {
                        let mut seen: Vec<u32> = (0..n as u16).filter(|&v| v != core).map(|v| s.position(core, search, sweep, v)).collect();
                        seen.sort();
                        assert_eq!(seen, (1..n as u32).collect::<Vec<_>>(), "{order:?} core {core}");
                    }
                }
            }
            assert_eq!(s.probes_per_sweep(), 6);
        }
    }

    /// A sweep's order depends only on its coordinates, not on which sweeps were looked up
    /// before (the driver skips the fruitless ones), and different sweeps draw different orders.
    #[test]
    fn a_sweeps_order_is_a_function_of_its_coordinates() {
        for order in [VictimOrder::Sweep, VictimOrder::Random] {
            let cfg = ProbeCfg { order, ..ProbeCfg::default() };
            let n = 16;
            let mut walked = ProbeSearch::new(&cfg, n, stream(5, "search"));
            let mut direct = ProbeSearch::new(&cfg, n, stream(5, "search"));
            let mut firsts = std::collections::HashSet::new();
            for sweep in 0..200u64 {
                let order_of = |s: &mut ProbeSearch| (1..n as u16).map(|v| s.position(0, 7, sweep, v)).collect::<Vec<_>>();
                let seen = order_of(&mut walked);
                if sweep % 17 == 0 {
                    assert_eq!(seen, order_of(&mut direct), "{order:?} sweep {sweep}");
                }
                firsts.insert(seen.iter().position(|&p| p == 1));
            }
            assert!(firsts.len() >= 12, "{order:?}: 200 sweeps started at only {} queues", firsts.len());
        }
    }

    /// The `sweep` order's cycle, as the driver's walk index reads it: the m-th probe looks at
    /// cycle place origin + m, one further once past the core's own queue; `random` has none.
    #[test]
    fn a_sweep_walks_one_cycle_from_its_origin() {
        let n = 11;
        let mut s = ProbeSearch::new(&ProbeCfg::default(), n, stream(9, "search"));
        for core in 0..n as u16 {
            for sweep in 0..30 {
                let o = s.origin(s.search_key(core, 4), sweep) as usize;
                let rel: Vec<usize> = (0..n as u16).map(|q| (s.cycle_place(q).unwrap() as usize + 2 * n - o - 1) % n).collect();
                for v in (0..n as u16).filter(|&v| v != core) {
                    let want = rel[v as usize] + 1 - usize::from(rel[core as usize] < rel[v as usize]);
                    assert_eq!(s.position(core, 4, sweep, v) as usize, want, "core {core} sweep {sweep} victim {v}");
                }
            }
        }
        let random = ProbeSearch::new(&ProbeCfg { order: VictimOrder::Random, ..ProbeCfg::default() }, n, stream(9, "search"));
        assert_eq!(random.cycle_place(0), None);
    }

    #[test]
    fn bad_parameters_name_their_field() {
        let bad = SearchCfg::Probe(ProbeCfg { probe_ns: 0.0, ..ProbeCfg::default() });
        let e = bad.validate("server.search").unwrap_err();
        assert!(e.to_string().contains("server.search.probe_ns"), "{e}");
        let bad = SearchCfg::Probe(ProbeCfg { own_check_us: -1.0, ..ProbeCfg::default() });
        assert!(bad.validate("server.search").unwrap_err().to_string().contains("own_check_us"));
    }
}
