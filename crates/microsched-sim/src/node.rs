//! A server node: its cores and queues (the [`Server`] mechanism), its core allocator, its
//! credit controller and the cached congestion signal it reads, and the snapshots its window
//! statistics are taken from.

use microsched_core::alloc::{self, CoreAllocator, ParkMode};
use microsched_core::overload::{self, CreditController, SessionId};
use microsched_core::scenario::{DelaySignal, Scenario};
use microsched_core::sched;
use microsched_core::summary::{CoreTime, Cores, Credits, DispatcherLoad, Harvest, Irq, NodeSummary, Parking, Sched, Spread};
use microsched_core::time::{us, NS_PER_US};
use microsched_core::rng::stream;
use microsched_core::sched::asqm::LockStats;
use microsched_core::Nanos;
use std::path::Path;

use crate::dispatcher::{DispatchSnap, Work};
use crate::server::{CoreMode, LockDropState, SchedCounters, Server, ServerCfg, Timesharing};

/// Period of the congestion-signal measurement when the core allocator has no interval of its
/// own (Caladan's IOKERNEL_POLL_INTERVAL).
const DELAY_POLL_NS: Nanos = 10 * NS_PER_US;

/// A node's credit-based overload control: its controller, the cached congestion signal and
/// the node-side credit statistics. Absent with the "none" controller, whose path has no credit
/// work at all.
pub struct Credit {
    pub ctl: Box<dyn CreditController>,
    /// Reused buffer: the controller's wake-ups.
    pub wakeups: Vec<(SessionId, u32)>,
    /// Measure the signal at each decision instead of reading the cached sample.
    pub exact: bool,
    /// The last sampled congestion signal.
    pub delay: Nanos,
    /// Period of `Event::DelayPoll` (sampled signal, allocator without an interval).
    pub poll: Option<Nanos>,
    /// Active cores last reported to the controller.
    pub active_reported: u32,
    pub packet_cost: Nanos,
    // Measured-window counters and sample sums.
    pub aqm_drops: u64,
    pub credit_messages: u64,
    pub parks_while_drained: u64,
    pub pool_max: f64,
    pub samples: u64,
    pub pool_sum: f64,
    pub issued_sum: f64,
    pub drained_sum: f64,
}

/// The mutexes of every application, as each node's server sees them.
pub struct AppLocks<'a> {
    /// Per mutex: a spin lock (its waiters hold their cores).
    pub spin: Vec<bool>,
    /// The lock families (name, mutexes) in mutex order.
    pub families: Vec<(&'a str, u32)>,
    /// The condition variables' names, in id order (every application's).
    pub condvars: Vec<String>,
}

pub struct Node {
    pub server: Server,
    pub allocator: Box<dyn CoreAllocator>,
    pub credit: Option<Box<Credit>>,
    /// Core-time and scheduling-counter snapshots at the start of the measured window.
    pub window_start_times: [Nanos; 5],
    pub window_start_sched: SchedCounters,
    /// The dispatcher core's counters at the start of the measured window.
    pub window_start_dispatch: DispatchSnap,
    /// Per worker core: busy time (overhead included) at the start of the measured window.
    pub window_start_core_busy: Vec<Nanos>,
    pub last_sample_times: [Nanos; 5],
    /// The Secondary's time in turns on shared cores at the last sample.
    pub last_sample_secondary_turns: Nanos,
    /// `server.wake_latency`: each grant's wake-up drawn from its own stream; `None`: the
    /// constant allocation delay.
    pub wake: Option<(microsched_core::wake::WakeSampler, microsched_core::rng::Stream)>,
    /// A harvesting controller's `mechanism.lent_wake`: the wait of each grant that goes to work
    /// queued on a lent core, drawn from its own stream.
    pub lent_wake: Option<(microsched_core::wake::WakeSampler, microsched_core::rng::Stream)>,
    /// `server.irq.per_request`: each request packet that reaches the node brings IRQ work
    /// (`Server::request_packet_irq`).
    pub packet_irq: bool,
    /// Whether anything acts on a request's arrival before the server queues it: IRQ work per
    /// packet or a credit controller. Set at build, so that a node with neither (the default; a
    /// constant IRQ stream alone is not on the arrival) tests this one flag on each arrival.
    pub arrival_hooks: bool,
    /// `server.irq`, for the summary.
    irq_cfg: Option<microsched_core::sched::irq::Config>,
    /// Park attempts, parks and wake-ups of parked cores, from the start; and their values (with
    /// the allocator's park gate) at the start of the measured window.
    pub parking: Parking,
    pub window_start_parking: Parking,
    /// The parking counts at the last time-series sample.
    pub last_sample_parking: Parking,
}

impl Node {
    /// Node `index` of `sc`, with what its own policies bring: the wake-up latency of its
    /// grants, its allocator's lent-core wake-up and time sharing, drops at lock steps, and IRQ
    /// work per request packet.
    /// `sessions` counts the sessions of every application, `locks` their mutexes; `base` is the
    /// directory scenario files are read from.
    pub fn new(sc: &Scenario, index: u16, seed: u64, sessions: u32, locks: &AppLocks, base: &Path) -> Result<Self, microsched_core::ScenarioError> {
        let workers = sched::worker_cores(sc);
        let node_seed = if index == 0 { seed } else { seed ^ (0x9e37_79b9 * index as u64) };
        let allocator = alloc::build(sc.node_allocator(index as usize), &microsched_core::env::AllocEnv { max_cores: sc.server.max_cores, seed: node_seed })?;
        let mut server = Server::new(
            index,
            ServerCfg {
                max_cores: workers as usize,
                dispatcher: sched::dispatcher_costs(sc),
                steal_cost: sc.server.steal_cost_ns.round() as Nanos,
                packet_cost: sc.server.stack.clone().unwrap_or_default().costs().served(sc.server.packet_cost_ns).round() as Nanos,
                alloc_delay: us(sc.server.allocation_delay_us),
                preemption: sc.server.preemption.build(),
            },
            // Dynamic policies start from one core and grow as load demands.
            if allocator.park_rule().mode == ParkMode::Never { workers as usize } else { 1 },
            // Node 0 draws from the streams a single server always drew from.
            sched::build(sc, node_seed)?,
            locks.spin.clone(),
        );
        if let Some(search) = sched::work_search(sc).build(workers as usize, microsched_core::rng::stream(node_seed, "search")) {
            server.set_search(search);
        }
        if let Some(irq) = sc.server.irq.as_ref().filter(|c| c.is_active()) {
            server.install_irq(irq.build(workers as usize, microsched_core::rng::stream(node_seed, "irq")));
        }
        let packet_irq = server.irq().is_some_and(|i| i.per_request.is_some());
        let rtt = us(sc.network.rtt_us);
        let env = microsched_core::env::OverloadEnv { sessions, max_cores: sc.server.max_cores, rtt_ns: rtt, seed: node_seed };
        let credit = overload::build(&sc.policy.overload, &env)?.map(|ctl| {
            let exact = sc.server.delay_signal == DelaySignal::Exact;
            Box::new(Credit {
                ctl,
                wakeups: Vec::with_capacity(64),
                exact,
                delay: 0,
                poll: (!exact && allocator.interval().is_none()).then_some(DELAY_POLL_NS),
                active_reported: 0,
                packet_cost: sc.server.stack.clone().unwrap_or_default().costs().drop(sc.server.packet_cost_ns).round() as Nanos,
                aqm_drops: 0,
                credit_messages: 0,
                parks_while_drained: 0,
                pool_max: f64::NAN,
                samples: 0,
                pool_sum: 0.0,
                issued_sum: 0.0,
                drained_sum: 0.0,
            })
        });
        let i = index as usize;
        // The streams below are the run seed's (not the node's), as they always were.
        let wake = match &sc.server.wake_latency {
            Some(w) => Some((w.build(base, "server.wake_latency")?, stream(seed, &format!("wake{}", if i == 0 { String::new() } else { i.to_string() })))),
            None => None,
        };
        let lent_wake = match allocator.lent_wake() {
            Some(w) => Some((w.build(base, "policy.allocator.mechanism.lent_wake")?, stream(seed, &format!("lent_wake{i}")))),
            None => None,
        };
        if let Some(t) = allocator.timeshare() {
            server.install_timeshare(Timesharing {
                turn: us(t.turn_us),
                first_turn: (us(t.first_turn_min_us), us(t.first_turn_max_us)),
                rng: stream(seed, &format!("timeshare{i}")),
            });
        }
        if !locks.condvars.is_empty() {
            server.install_condvars(locks.condvars.clone());
        }
        if let Some(lc) = &sc.server.lock_control {
            let cleanup: Vec<bool> = locks.families.iter().flat_map(|&(n, c)| std::iter::repeat_n(lc.cleanup_lock.as_deref() == Some(n), c as usize)).collect();
            let stats = LockStats::new(locks.families.iter().copied());
            server.install_lock_control(LockDropState::new(lc.build(), cleanup, stats));
        }
        let arrival_hooks = packet_irq || credit.is_some();
        Ok(Self {
            server,
            allocator,
            credit,
            window_start_times: [0; 5],
            window_start_sched: SchedCounters::default(),
            window_start_dispatch: DispatchSnap::default(),
            window_start_core_busy: Vec::new(),
            last_sample_times: [0; 5],
            last_sample_secondary_turns: 0,
            wake,
            lent_wake,
            packet_irq,
            arrival_hooks,
            irq_cfg: sc.server.irq.clone(),
            parking: Parking::default(),
            window_start_parking: Parking::default(),
            last_sample_parking: Parking::default(),
        })
    }

    /// Per worker core: busy time (overhead included) up to `now`.
    pub fn core_busy(&self, now: Nanos) -> Vec<Nanos> {
        (0..self.server.core_count())
            .map(|c| {
                let t = self.server.core(c as u16).times_at(now);
                t[CoreMode::Busy as usize] + t[CoreMode::Overhead as usize]
            })
            .collect()
    }

    fn worker_utilization(&self, end: Nanos, window_ns: Nanos) -> Spread {
        let busy = self.core_busy(end);
        let u: Vec<f64> = busy
            .iter()
            .enumerate()
            .map(|(i, b)| (b - self.window_start_core_busy.get(i).copied().unwrap_or(0)) as f64 / window_ns.max(1) as f64)
            .collect();
        if u.is_empty() {
            return Spread::default();
        }
        Spread {
            mean: u.iter().sum::<f64>() / u.len() as f64,
            min: u.iter().copied().fold(f64::INFINITY, f64::min),
            max: u.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        }
    }

    /// This node's section of the summary over the window that ends at `end`.
    /// The dispatcher core over the measured window ending at `end`.
    fn dispatcher_load(&self, end: Nanos, window_ns: Nanos) -> Option<DispatcherLoad> {
        let (s1, queued_end) = self.server.dispatcher_snapshot(end)?;
        let s0 = self.window_start_dispatch;
        let n = |k: usize| s1.handled[k] - s0.handled[k];
        let t = |k: usize| s1.handled_ns[k] - s0.handled_ns[k];
        let utilization = (s1.busy_ns - s0.busy_ns) as f64 / window_ns.max(1) as f64;
        Some(DispatcherLoad {
            utilization,
            saturated: utilization >= DispatcherLoad::SATURATED,
            queued_end,
            arrivals: n(Work::Arrival as usize),
            arrival_ns: t(Work::Arrival as usize),
            completions: n(Work::Completion as usize),
            completion_ns: t(Work::Completion as usize),
            requeues: n(Work::Requeue as usize),
            requeue_ns: t(Work::Requeue as usize),
            signals: n(Work::Signal as usize),
            signal_ns: t(Work::Signal as usize),
        })
    }

    pub fn summary(&self, index: u16, max_cores: u32, end: Nanos, window_ns: Nanos) -> NodeSummary {
        let times = self.server.core_times(end);
        let w = |i: usize| (times[i] - self.window_start_times[i]) as f64 / window_ns as f64;
        let secondary_waking = if self.allocator.secondary_runs_while_waking() { w(3) } else { 0.0 };
        let (sc0, sc1) = (self.window_start_sched, self.server.counters());
        // The Secondary's turns on a core it shares with a Primary request are inside that
        // request's run (busy time), but they are the Secondary's progress.
        let secondary_turns = (sc1.secondary_turn_ns - sc0.secondary_turn_ns) as f64 / window_ns as f64;
        let busy_mean = w(0) - secondary_turns;
        let allocated_mean = w(0) + w(1) + w(3) + w(4) - secondary_waking - secondary_turns;
        NodeSummary {
            node: index as u32,
            cores: Cores { max: max_cores, allocated_mean, busy_mean, transition_mean: w(3) },
            cpu_utilization: allocated_mean / max_cores as f64,
            be_cores_mean: w(2) + secondary_waking + secondary_turns,
            core_time: CoreTime {
                busy_ns: times[0],
                search_ns: times[1],
                parked_ns: times[2],
                transition_ns: times[3],
                overhead_ns: times[4],
                total_ns: times.iter().sum(),
            },
            sched: Sched {
                queue_policy: self.server.policy_name().to_string(),
                preemptions: sc1.preemptions - sc0.preemptions,
                yields: sc1.yields - sc0.yields,
                lock_acquisitions: sc1.lock_acquisitions - sc0.lock_acquisitions,
                lock_waits: sc1.lock_waits - sc0.lock_waits,
                lock_wait_us_mean: if sc1.lock_waits > sc0.lock_waits {
                    (sc1.lock_wait_ns - sc0.lock_wait_ns) as f64 / (sc1.lock_waits - sc0.lock_waits) as f64 / 1e3
                } else {
                    0.0
                },
                preempt_send_ns: sc1.preempt_send_ns - sc0.preempt_send_ns,
                avoided_preemptions: sc1.avoided_preemptions - sc0.avoided_preemptions,
                dispatcher_requests: sc1.dispatcher_requests - sc0.dispatcher_requests,
                dispatcher_work_ns: sc1.dispatcher_work_ns - sc0.dispatcher_work_ns,
                worker_utilization: self.worker_utilization(end, window_ns),
                dispatcher: self.dispatcher_load(end, window_ns),
            },
            credits: self.credit.as_ref().map(|c| {
                let n = c.samples.max(1) as f64;
                let bounds = c.ctl.pool_bounds();
                Credits {
                    pool_mean: c.pool_sum / n,
                    issued_mean: c.issued_sum / n,
                    drained_mean: c.drained_sum / n,
                    aqm_drops: c.aqm_drops,
                    credit_messages: c.credit_messages,
                    parks_while_drained: c.parks_while_drained,
                    pool_max: c.pool_max,
                    pool_floor: bounds.map(|b| b.0),
                    pool_ceiling: bounds.map(|b| b.1),
                    start_drops: self.server.start_drops(),
                    ..Credits::default()
                }
            }),
            harvest: self.harvest(),
            irq: self.irq(end, &times),
            parking: self.parking_in_window(),
        }
    }

    /// The parking counts at this moment, the allocator's gate included.
    pub fn parking_now(&self) -> Parking {
        Parking { gate: self.allocator.park_gate(), ..self.parking }
    }

    /// Whether the allocator ever parks a core.
    pub fn parks_cores(&self) -> bool {
        self.allocator.park_rule().mode != ParkMode::Never
    }

    /// Parking over the measured window; `None` for an allocator that never parks.
    fn parking_in_window(&self) -> Option<Parking> {
        if self.allocator.park_rule().mode == ParkMode::Never {
            return None;
        }
        Some(self.parking_now().since(&self.window_start_parking))
    }

    /// The harvesting controller's counters (whole run).
    pub fn harvest(&self) -> Option<Harvest> {
        self.allocator.harvest_report().map(|r| Harvest {
            buffer_mean: r.buffer_mean,
            all_busy_fraction: r.all_busy_fraction,
            lends: r.lends,
            evictions: r.evictions,
            demand_evictions: r.demand_evictions,
            evict_us: self.allocator.grant_delay().unwrap_or(0) as f64 / 1e3,
            refill_us: self.allocator.refill_after_grant() as f64 / 1e3,
            timeshare_turn_us: self.allocator.timeshare().map_or(0.0, |t| t.turn_us),
            secondary_turns: self.server.counters().secondary_turns,
            secondary_turn_ms: self.server.counters().secondary_turn_ns as f64 / 1e6,
            eviction_wait_ms: r.eviction_wait_ns / 1e6,
            harvest_window_low: r.harvest_window.map(|w| w.0),
            harvest_window_high: r.harvest_window.map(|w| w.1),
            observations: r.observations,
        })
    }

    /// Interrupt handling over the whole run: the time drawn inside requests, and the expected
    /// time elsewhere (rate × core time in that state).
    fn irq(&self, end: Nanos, times: &[Nanos; 5]) -> Option<Irq> {
        use microsched_core::sched::irq::IrqSteering;
        let cfg = self.irq_cfg.as_ref()?;
        let held = self.server.irq().map_or(0.0, |i| i.rate_per_core_s());
        let (in_service_ns, in_service_count) = self.server.irq().map_or((0, 0), |i| (i.in_service_ns, i.in_service_count));
        let per_ns = |rate: f64| rate * 1e-9 * cfg.cost_us * 1e3;
        // `per_request`: the work of the requests' packets is placed, so it is counted, not expected.
        let (packets, packets_held, packet_secondary_ns) = self.server.irq().filter(|i| i.per_request.is_some())
            .map_or((0, 0, 0), |i| (i.packet_count, i.packet_held_count, i.packet_secondary_ns));
        let secondary_ns = match cfg.steering {
            IrqSteering::Spread => per_ns(held) * (times[CoreMode::Parked as usize] + times[CoreMode::Waking as usize]) as f64,
            IrqSteering::Secondary => per_ns(cfg.rate_per_s) * end as f64,
            IrqSteering::IdleFirst => 0.0,
        } + packet_secondary_ns as f64;
        // Placed idle first, the handlers' time on idle cores is counted, not expected.
        let held_idle_ns = match (cfg.steering, self.server.irq()) {
            (IrqSteering::IdleFirst, Some(i)) => i.idle_ns as f64,
            (_, Some(i)) if i.per_request.is_some() => per_ns(held) * times[CoreMode::Search as usize] as f64 + i.idle_ns as f64,
            _ => per_ns(held) * times[CoreMode::Search as usize] as f64,
        };
        // A held core's rate: the constant's share, plus the requests' handler runs that landed
        // on held cores over the time cores were held.
        let held_s = (times[CoreMode::Busy as usize] + times[CoreMode::Search as usize] + times[CoreMode::Overhead as usize]) as f64 * 1e-9;
        let held_rate = if packets_held > 0 && held_s > 0.0 { held + packets_held as f64 / held_s } else { held };
        Some(Irq {
            steering: match cfg.steering {
                IrqSteering::Spread => "spread",
                IrqSteering::Secondary => "secondary",
                IrqSteering::IdleFirst => "idle_first",
            }
            .to_string(),
            held_core_rate_per_s: held_rate,
            in_service_ns,
            in_service_count,
            held_idle_ns,
            secondary_ns,
            per_request_handlers: packets,
            per_request_rate_per_s: packets as f64 / (end.max(1) as f64 * 1e-9),
            secondary_cores_mean: secondary_ns / end.max(1) as f64,
        })
    }
}
