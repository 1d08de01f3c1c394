//! NIC interrupt (IRQ) interference and IRQ steering, as in HarvestContainers (Hall et al.,
//! NSDI'26, §2.3, §3.5, Fig. 8; artifact: `irq_set_affinity` onto the Secondary's cores, see
//! shared/reference/preemptive-scheduling-and-harvesting.md §6.4).
//!
//! **What is modelled.** Packet processing (hard IRQ + NET_RX softirq, three veth/bridge
//! traversals per packet in a container) arrives at a core as a Poisson stream of handlers of a
//! fixed length, and runs *before* whatever the core was running: a request hit by an IRQ is
//! suspended for the handler and resumes where it was (preemptive-resume, the handler invisible
//! to the scheduler, §3.5). Interrupts that land while the handler runs queue behind it.
//!
//! **How.** Because the handler stream is Poisson, the handlers that land inside a request's
//! execution are drawn when the request's compute starts, exactly distributed as if each had
//! been an event interleaved on the core: Poisson(λ·w) handlers during its work `w`, each
//! opening an M/D/1 busy period (handlers arriving during a handler extend it). The request's
//! slice is lengthened by that time, which is core time stolen from it (`irq.in_service_ns`).
//! This keeps the event count independent of the IRQ rate (10⁵–10⁶ per second would otherwise
//! dominate the run) and needs no cancelling of scheduled completions. Not modelled: a thread
//! dispatched onto an idle core that is mid-handler waits for the rest of that handler (mean
//! λ·c·c/2, well under 0.1 µs at the rates used here); IRQ time on idle held cores and on the
//! Secondary's cores changes no request and is reported as its expectation (rate × time).
//!
//! **Per request** (`per_request`, off by default): instead of (or besides) a constant stream,
//! each request packet that reaches the node brings its own receive work, as §3.5 describes a
//! container's: the NIC's hard IRQ with its NET_RX softirq, then a softirq per traversal of the
//! veth pair (`handlers` runs of `cost_us` each). The kernel runs the chain on the CPU that took
//! the NIC's interrupt (veth hands the packet to the local CPU's backlog; RPS off), so the work is
//! one contiguous stretch of `handlers × cost_us` on one core, placed when the request arrives:
//! under `spread` on a core of the node picked uniformly (RSS / irqbalance over the node's
//! queues), lent or not; under `secondary` on the Secondary's cores. On a core running a request
//! it suspends it (preemptive-resume, as above), on an idle held core it occupies the core (a
//! request started there waits for the rest), on a lent core it is the Secondary's loss. The IRQ
//! load therefore follows the Primary's own arrivals, bursts included, where the constant stream
//! ignores them.
//!
//! **Steering.** `spread` (irqbalance / RSS: the node's IRQs spread evenly over its cores, lent
//! or not: each core gets rate / cores) or `secondary` (HarvestContainers: IRQs affinitized to
//! the Secondary's dedicated core and its harvested cores, never to a core the Primary holds).
//!
//! **Idle first** (`idle_first`): the handlers are threads that share the server's CPUs and
//! that the kernel wakes where a CPU is idle — a one-machine run's load generator and controller
//! (`microsched_runtime::harness` measures their CPU and wake-ups). Each is an event at the
//! node's rate: it lands on an idle core when there is one (a request that starts there before
//! it ends waits for the rest of it), else it preempts the request of a busy core picked at
//! random, whose slice lasts its length longer. Only when every core is busy does a handler
//! cost a running request anything, which the draw-at-start model above cannot express. Their
//! lengths may vary (`cost_sigma`: lognormal with mean `cost_us`), as a thread's CPU per wake-up
//! does (the harness measures its spread too): at the same mean, longer handlers more often
//! outlast the request they preempt.

use rand::Rng;
use rand_distr::{Distribution, Exp, Poisson};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dist::Sampler;
use crate::error::ScenarioError;
use crate::rng::Stream;
use crate::time::Nanos;

/// Where the node's IRQs are handled.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IrqSteering {
    /// Spread evenly over every core of the node (irqbalance, RSS), the Primary's included.
    #[default]
    Spread,
    /// Affinitized to the Secondary's cores (its dedicated core and the harvested ones): the
    /// Primary's held cores handle none (HarvestContainers' IRQ shielding).
    Secondary,
    /// Onto an idle core when one is idle, else preempting a random busy core: threads the
    /// kernel wakes on the server's CPUs (a one-machine run's load generator and controller).
    IdleFirst,
}

/// What a running request's work is, for a handler that lands on its core.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RequestWork {
    /// CPU time it must get: a handler stretches it by the handler's length (preemptive-resume).
    #[default]
    Cpu,
    /// A spin until a wall-clock end, as the real runtime's synthetic requests (`spin_for`): a
    /// handler delays it only if the handler is still running at that end. `idle_first` only.
    WallClock,
}

/// `server.irq.per_request`: the receive work each request packet brings (§3.5: the NIC's hard
/// IRQ and NET_RX, and the veth pair's softirqs), run as one stretch on the core that takes it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PerRequest {
    /// Handler runs per request: 3 for a container (the NIC's, and one per veth traversal: §3.5's
    /// "up to 3 times as many interrupts for a container vs. a hardware NIC"), 1 on bare metal.
    pub handlers: u32,
    /// CPU time of one handler run, µs.
    pub cost_us: f64,
}

/// The largest `per_request.handlers` accepted.
const MAX_HANDLERS: u32 = 16;

/// `server.irq`: NIC interrupt load on the node's cores.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Interrupt handlers per second on the node (all its cores together), e.g. a NetworkBully
    /// co-tenant's packets × handlers per packet.
    pub rate_per_s: f64,
    /// CPU time of one handler, µs (the mean when `cost_sigma` > 0).
    pub cost_us: f64,
    /// `idle_first` only: σ of the logarithm of a handler's length, drawn lognormal with mean
    /// `cost_us` (0, the default: every handler lasts exactly `cost_us`). σ = √ln(1 + CV²) for a
    /// measured coefficient of variation CV.
    #[serde(skip_serializing_if = "is_zero")]
    pub cost_sigma: f64,
    /// `spread` (default: every core takes rate / cores), `secondary` (IRQ steering onto the
    /// Secondary's cores: the Primary's cores take none) or `idle_first` (an idle core when one
    /// is idle, else a random busy one).
    pub steering: IrqSteering,
    /// `cpu` (default) or `wall_clock` (with `idle_first` only): what a running request's work
    /// is when a handler lands on its core.
    pub request_work: RequestWork,
    /// Receive work per request packet (none, the default: the IRQ load is `rate_per_s` only),
    /// with `steering` = `spread` or `secondary`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_request: Option<PerRequest>,
}

impl Default for Config {
    fn default() -> Self {
        Self { rate_per_s: 0.0, cost_us: 2.0, cost_sigma: 0.0, steering: IrqSteering::Spread, request_work: RequestWork::Cpu, per_request: None }
    }
}

fn is_zero(v: &f64) -> bool {
    *v == 0.0
}

/// Highest per-core IRQ utilization allowed: at 1 a core's handler busy periods never end.
const MAX_CORE_LOAD: f64 = 0.9;

impl Config {
    pub fn validate(&self, field: &str, cores: u32) -> Result<(), ScenarioError> {
        if !(self.rate_per_s.is_finite() && self.rate_per_s >= 0.0) {
            return Err(ScenarioError::new(format!("{field}.rate_per_s"), format!("{} is not allowed: must be a number >= 0", self.rate_per_s)));
        }
        if !(self.cost_us.is_finite() && self.cost_us > 0.0 && self.cost_us <= 1000.0) {
            return Err(ScenarioError::new(format!("{field}.cost_us"), format!("{} is not allowed: must be a number of µs > 0 and <= 1000", self.cost_us)));
        }
        if !(self.cost_sigma.is_finite() && (0.0..=3.0).contains(&self.cost_sigma)) {
            return Err(ScenarioError::new(format!("{field}.cost_sigma"), format!("{} is not allowed: must be a number in [0, 3]", self.cost_sigma)));
        }
        if self.cost_sigma > 0.0 && self.steering != IrqSteering::IdleFirst {
            return Err(ScenarioError::new(
                format!("{field}.cost_sigma"),
                "> 0 is allowed only with steering = \"idle_first\" (the handlers drawn inside a request have a fixed length)",
            ));
        }
        if self.request_work == RequestWork::WallClock && self.steering != IrqSteering::IdleFirst {
            return Err(ScenarioError::new(
                format!("{field}.request_work"),
                "\"wall_clock\" is allowed only with steering = \"idle_first\" (the handlers drawn inside a request assume CPU work)",
            ));
        }
        if let Some(pr) = &self.per_request {
            if !(1..=MAX_HANDLERS).contains(&pr.handlers) {
                return Err(ScenarioError::new(
                    format!("{field}.per_request.handlers"),
                    format!("{} is not allowed: must be an integer from 1 to {MAX_HANDLERS} (handler runs per request: 3 for a container's NIC and veth pair, 1 on bare metal)", pr.handlers),
                ));
            }
            if !(pr.cost_us.is_finite() && pr.cost_us > 0.0 && pr.cost_us <= 100.0) {
                return Err(ScenarioError::new(format!("{field}.per_request.cost_us"), format!("{} is not allowed: must be a number of µs > 0 and <= 100", pr.cost_us)));
            }
            if self.steering == IrqSteering::IdleFirst {
                return Err(ScenarioError::new(
                    format!("{field}.per_request"),
                    "is allowed only with steering = \"spread\" or \"secondary\" (idle_first handlers are threads, not a request's packets)",
                ));
            }
        }
        let per_core = self.rate_per_s / cores.max(1) as f64 * self.cost_us * 1e-6;
        if per_core >= MAX_CORE_LOAD {
            return Err(ScenarioError::new(
                format!("{field}.rate_per_s"),
                format!("{} is not allowed: each of the {cores} cores would spend {per_core:.2} of its time in IRQ handlers (must be < {MAX_CORE_LOAD})", self.rate_per_s),
            ));
        }
        Ok(())
    }

    /// Whether this generates any IRQ work (a constant stream or work per request).
    pub fn is_active(&self) -> bool {
        self.rate_per_s > 0.0 || self.per_request.is_some()
    }

    /// The interference on one of the node's `cores` cores while the Primary holds it.
    pub fn build(&self, cores: usize, rng: Stream) -> Irq {
        let per_core = match self.steering {
            IrqSteering::Spread => self.rate_per_s / cores.max(1) as f64,
            IrqSteering::Secondary | IrqSteering::IdleFirst => 0.0,
        };
        Irq {
            rate_per_ns: per_core * 1e-9,
            cost: (self.cost_us * 1e3).round().max(1.0) as Nanos,
            // The workload's lognormal (mean and log-σ), so both draw the same family the same way.
            spread: (self.cost_sigma > 0.0)
                .then(|| {
                    let d = crate::scenario::Dist::Lognormal { mean_us: self.cost_us, sigma: self.cost_sigma };
                    Sampler::build(&d, std::path::Path::new(""), "server.irq").ok()
                })
                .flatten(),
            nested: Poisson::new(per_core * self.cost_us * 1e-6).ok(),
            gap: (self.steering == IrqSteering::IdleFirst).then(|| Exp::new(self.rate_per_s * 1e-9).ok()).flatten(),
            wall_clock: self.request_work == RequestWork::WallClock,
            per_request: self.per_request.map(|pr| PacketWork {
                handlers: pr.handlers,
                // One contiguous stretch: the whole chain runs on the core that took the NIC's IRQ.
                cost: ((pr.handlers as f64 * pr.cost_us * 1e3).round() as Nanos).max(1),
                steered: self.steering == IrqSteering::Secondary,
            }),
            rng,
            in_service_ns: 0,
            in_service_count: 0,
            idle_ns: 0,
            idle_count: 0,
            packet_count: 0,
            packet_held_count: 0,
            packet_secondary_ns: 0,
        }
    }
}

/// `per_request`, as the engine places it.
#[derive(Debug, Clone, Copy)]
pub struct PacketWork {
    /// Handler runs in one request's stretch.
    pub handlers: u32,
    /// The stretch's length: `handlers × cost_us`.
    pub cost: Nanos,
    /// Steered onto the Secondary's cores: no held core takes any.
    pub steered: bool,
}

/// The IRQ interference on the Primary's held cores, with its counters (whole run).
#[derive(Debug, Clone)]
pub struct Irq {
    /// Handlers per ns on one held core.
    rate_per_ns: f64,
    cost: Nanos,
    /// `cost_sigma` > 0: each handler's length (mean `cost`).
    spread: Option<Sampler>,
    /// Handlers arriving during one handler.
    nested: Option<Poisson<f64>>,
    /// `idle_first`: the time to the node's next handler (per ns).
    gap: Option<Exp<f64>>,
    /// `request_work = "wall_clock"`.
    pub wall_clock: bool,
    rng: Stream,
    /// Core time taken from running requests by handlers.
    pub in_service_ns: Nanos,
    pub in_service_count: u64,
    /// `idle_first`: handler time that landed on idle cores.
    pub idle_ns: Nanos,
    pub idle_count: u64,
    /// `per_request`: the work each request packet brings; None: none.
    pub per_request: Option<PacketWork>,
    /// `per_request`: handler runs generated (requests × handlers), those that landed on a held
    /// core (busy or idle), and the time that landed on the Secondary's cores.
    pub packet_count: u64,
    pub packet_held_count: u64,
    pub packet_secondary_ns: Nanos,
}

impl Irq {
    /// Per-core handler rate on a held core, per second.
    pub fn rate_per_core_s(&self) -> f64 {
        self.rate_per_ns * 1e9
    }

    /// One handler's CPU time.
    pub fn cost(&mut self) -> Nanos {
        match &self.spread {
            Some(d) => d.sample(&mut self.rng),
            None => self.cost,
        }
    }

    /// `idle_first` only: the time from one of the node's handlers to the next (None: the
    /// handlers are drawn inside requests instead).
    pub fn next_gap(&mut self) -> Option<Nanos> {
        let gap = self.gap?;
        Some((gap.sample(&mut self.rng).round() as Nanos).max(1))
    }

    /// A uniform pick among `n` candidates.
    pub fn pick(&mut self, n: usize) -> usize {
        self.rng.gen_range(0..n)
    }

    /// The time handlers take out of `work` ns of a request's computing: the request's slice
    /// lasts `work` + this.
    pub fn stolen(&mut self, work: Nanos) -> Nanos {
        if self.rate_per_ns == 0.0 || work == 0 {
            return 0;
        }
        let mean = self.rate_per_ns * work as f64;
        // Poisson::new rejects a zero mean only; `work` > 0 and the rate > 0 here.
        let mut pending = Poisson::new(mean).map_or(0, |p| p.sample(&mut self.rng) as u64);
        let mut n = 0u64;
        while pending > 0 {
            pending -= 1;
            n += 1;
            if let Some(p) = &self.nested {
                pending += p.sample(&mut self.rng) as u64;
            }
        }
        let t = n * self.cost;
        self.in_service_ns += t;
        self.in_service_count += n;
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng::stream;

    #[test]
    fn stolen_time_matches_the_mg1_interruption_mean() {
        // Per core 100 k/s × 2 µs = 0.2 of the core: a request's completion time with
        // preemptive-resume interruptions has mean w / (1 − ρ) (each unit of work brings λ·c of
        // handler time, itself stretched by 1/(1 − ρ)).
        let cfg = Config { rate_per_s: 800_000.0, cost_us: 2.0, ..Config::default() };
        cfg.validate("server.irq", 8).unwrap();
        let mut irq = cfg.build(8, stream(7, "irq"));
        assert!((irq.rate_per_core_s() - 100_000.0).abs() < 1e-6);
        let w = 50_000;
        let n = 20_000;
        let total: Nanos = (0..n).map(|_| irq.stolen(w)).sum();
        let mean = total as f64 / n as f64;
        let expect = w as f64 * 0.2 / 0.8;
        assert!((mean / expect - 1.0).abs() < 0.03, "{mean} vs {expect}");
        assert_eq!(irq.in_service_ns, total);
        // Steered away: nothing on a held core.
        let mut s = Config { steering: IrqSteering::Secondary, ..cfg.clone() }.build(8, stream(7, "irq"));
        assert_eq!(s.stolen(w), 0);
    }

    #[test]
    fn validation_names_the_field() {
        let bad = Config { rate_per_s: 4e6, cost_us: 2.0, ..Config::default() };
        assert_eq!(bad.validate("server.irq", 8).unwrap_err().field, "server.irq.rate_per_s");
        let bad = Config { request_work: RequestWork::WallClock, ..Config::default() };
        let e = bad.validate("server.irq", 8).unwrap_err();
        assert_eq!(e.field, "server.irq.request_work");
        assert!(e.message.contains("idle_first"), "{e}");
        assert!(Config { steering: IrqSteering::IdleFirst, ..bad }.validate("server.irq", 8).is_ok());
        let bad = Config { cost_us: 0.0, ..Config::default() };
        assert_eq!(bad.validate("server.irq", 8).unwrap_err().field, "server.irq.cost_us");
        assert!(Config::default().validate("server.irq", 8).is_ok());
        for sigma in [-0.1, 3.5, f64::NAN] {
            let bad = Config { steering: IrqSteering::IdleFirst, cost_sigma: sigma, ..Config::default() };
            assert_eq!(bad.validate("server.irq", 8).unwrap_err().field, "server.irq.cost_sigma");
        }
        let e = Config { cost_sigma: 0.5, ..Config::default() }.validate("server.irq", 8).unwrap_err();
        assert!(e.field == "server.irq.cost_sigma" && e.message.contains("idle_first"), "{e}");
    }

    #[test]
    fn per_request_validation_names_the_field_and_its_allowed_values() {
        let with = |handlers: u32, cost_us: f64, steering: IrqSteering| Config { per_request: Some(PerRequest { handlers, cost_us }), steering, ..Config::default() };
        assert!(with(3, 1.0, IrqSteering::Spread).validate("server.irq", 8).is_ok());
        assert!(with(1, 0.5, IrqSteering::Secondary).validate("server.irq", 8).is_ok());
        for h in [0, 17] {
            let e = with(h, 1.0, IrqSteering::Spread).validate("server.irq", 8).unwrap_err();
            assert!(e.field == "server.irq.per_request.handlers" && e.message.contains("1 to 16"), "{e}");
        }
        for c in [0.0, -1.0, 100.5, f64::NAN] {
            assert_eq!(with(3, c, IrqSteering::Spread).validate("server.irq", 8).unwrap_err().field, "server.irq.per_request.cost_us");
        }
        let e = with(3, 1.0, IrqSteering::IdleFirst).validate("server.irq", 8).unwrap_err();
        assert!(e.field == "server.irq.per_request" && e.message.contains("\"spread\" or \"secondary\""), "{e}");
        // Active with no constant stream; one stretch of handlers × cost per request.
        let cfg = with(3, 1.0, IrqSteering::Spread);
        assert!(cfg.is_active() && !Config::default().is_active());
        let irq = cfg.build(8, stream(1, "irq"));
        assert_eq!(irq.rate_per_core_s(), 0.0);
        let w = irq.per_request.unwrap();
        assert_eq!((w.handlers, w.cost, w.steered), (3, 3_000, false));
        assert!(with(3, 1.0, IrqSteering::Secondary).build(8, stream(1, "irq")).per_request.unwrap().steered);
    }

    #[test]
    fn spread_handlers_keep_their_mean_and_take_the_asked_spread() {
        let cfg = Config { rate_per_s: 1000.0, cost_us: 30.0, cost_sigma: 0.5, steering: IrqSteering::IdleFirst, ..Config::default() };
        cfg.validate("server.irq", 2).unwrap();
        let mut irq = cfg.build(2, stream(3, "irq"));
        let n = 200_000;
        let v: Vec<f64> = (0..n).map(|_| irq.cost() as f64).collect();
        let mean = v.iter().sum::<f64>() / n as f64;
        let sd = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / n as f64).sqrt();
        // Lognormal σ 0.5: CV = √(e^{σ²} − 1) = 0.533; the sample mean's standard error is 0.12 %.
        assert!((mean / 30_000.0 - 1.0).abs() < 0.01, "{mean}");
        assert!((sd / mean - 0.533).abs() < 0.02, "{}", sd / mean);
        let mut fixed = Config { cost_sigma: 0.0, ..cfg }.build(2, stream(3, "irq"));
        assert!((0..100).all(|_| fixed.cost() == 30_000));
    }
}
