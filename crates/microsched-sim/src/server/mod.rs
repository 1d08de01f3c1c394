//! The server mechanism: cores, their queues, running requests slice by slice (preemption at a
//! quantum, blocking and spinning mutexes, yield points), work stealing, parking and the exact
//! accounting of core time. Policy is decided elsewhere: where work queues and where an idle
//! core looks is a [`QueuePolicy`]; when to grant or park a core is the core allocator's. This
//! module only carries decisions out.

use std::collections::VecDeque;

use microsched_core::alloc::{AllocView, CoreId, CoreLoad, CoreObs, CoreState};
use microsched_core::program::Op;
use microsched_core::sched::asqm::{LockControl, LockStats, Seed};
use microsched_core::sched::mutex::MutexTable;
use microsched_core::sched::preemption::Preemption;
use microsched_core::sched::{Next, Place, QueuePolicy, Requeue, ServerView, Slack};
use microsched_core::Nanos;

use crate::dispatcher::{Dispatcher, WorkEvent};
use crate::events::{Event, EventQueue};
use crate::requests::{Req, Slab};

mod search;
mod walks;

const NONE: u32 = u32::MAX;

/// What a core is doing. Busy and Search make up the LC allocation; the best-effort co-tenant
/// gets Parked time; Waking is the allocation delay and Overhead the preemption mechanism's
/// receive and return costs, counted apart so that the five add up to cores × time exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoreMode {
    Busy,
    Search,
    Parked,
    Waking,
    Overhead,
}

/// What a core does when its overhead stretch ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum AfterOverhead {
    /// Put the preempted request back on a runqueue, then look for work.
    Requeue,
    /// Go on running the resumed request.
    Resume,
}

#[derive(Debug, Clone)]
pub struct Core {
    id: u16,
    pub mode: CoreMode,
    since: Nanos,
    pub queue: VecDeque<u32>,
    pub enqueued_total: u64,
    pub dequeued_total: u64,
    times: [Nanos; 5],
    /// Request being run (or spinning for a lock, or being switched away from), or NONE.
    pub current: u32,
    /// Bumped whenever the core leaves the idle-spinning state, to invalidate its park timer.
    pub epoch: u32,
    /// Bumped whenever a pending slice end or overhead end is superseded (cancelled), so that
    /// a stale event never acts on the wrong request.
    gen: u32,
    /// Start and length of the running compute slice.
    slice_start: Nanos,
    slice_len: Nanos,
    /// Run time left before the quantum expires (the request's, on this core).
    budget: Nanos,
    /// The running request's quantum (a policy may give each request its own).
    quantum: Nanos,
    /// Lazy expiries (conditional preemption, nothing queued here): the running slice goes to
    /// the request's end and its quantum expiries, every quantum + propagation from this first
    /// one, are only counted, until work queues here (`Nanos::MAX`: not lazy).
    lazy_from: Nanos,
    after_overhead: AfterOverhead,
    /// A proactive policy asked this core to park at its next idle point.
    pub yield_requested: bool,
    /// Mid-steal: what it took is in its queue but already claimed, so no one steals it back.
    stealing: bool,
    /// Asked to park and told to keep polling (CoreSync): finding work must be reported.
    park_attempting: bool,
    /// What the allocator saw of this core at its last tick, saved before the first change
    /// after it (valid when `at_tick.tick` is the ledger's): an unchanged core is read from its
    /// current fields instead, so a tick need not copy every core.
    at_tick: AtTick,
}

#[derive(Debug, Clone, Copy)]
struct AtTick {
    tick: u32,
    mode: CoreMode,
    enqueued_total: u64,
    busy: Nanos,
    search: Nanos,
}

impl Core {
    fn new(id: u16, mode: CoreMode) -> Self {
        Self {
            id,
            mode,
            since: 0,
            queue: VecDeque::new(),
            enqueued_total: 0,
            dequeued_total: 0,
            times: [0; 5],
            current: NONE,
            epoch: 0,
            gen: 0,
            slice_start: 0,
            slice_len: 0,
            budget: Nanos::MAX,
            quantum: Nanos::MAX,
            lazy_from: Nanos::MAX,
            after_overhead: AfterOverhead::Resume,
            yield_requested: false,
            stealing: false,
            park_attempting: false,
            at_tick: AtTick { tick: 0, mode, enqueued_total: 0, busy: 0, search: 0 },
        }
    }

    #[inline(always)]
    fn set_mode(&mut self, mode: CoreMode, now: Nanos, l: &mut Ledger) {
        self.save_tick(l);
        let (old, ran) = (self.mode as usize, now - self.since);
        self.times[old] += ran;
        l.closed[old] += ran;
        l.in_mode[old] -= 1;
        l.since_sum[old] -= self.since;
        l.in_mode[mode as usize] += 1;
        l.since_sum[mode as usize] += now;
        if (self.mode == CoreMode::Parked) != (mode == CoreMode::Parked) {
            l.parked[self.id as usize / 64] ^= 1 << (self.id % 64);
        }
        self.mode = mode;
        self.since = now;
    }

    /// Called before any change the allocator observes.
    #[inline]
    fn save_tick(&mut self, l: &Ledger) {
        if self.at_tick.tick != l.tick {
            self.at_tick = self.seen_at_tick(l);
        }
    }

    /// This core as it was at the ledger's last tick, from fields unchanged since.
    fn seen_at_tick(&self, l: &Ledger) -> AtTick {
        let t = self.times_at(l.tick_at);
        let (busy, search) = busy_search(&t);
        AtTick { tick: l.tick, mode: self.mode, enqueued_total: self.enqueued_total, busy, search }
    }

    /// (busy, search, parked, transition, overhead) up to `now`, the current stretch included.
    pub fn times_at(&self, now: Nanos) -> [Nanos; 5] {
        let mut t = self.times;
        t[self.mode as usize] += now - self.since;
        t
    }

    pub fn is_active(&self) -> bool {
        matches!(self.mode, CoreMode::Busy | CoreMode::Search | CoreMode::Overhead)
    }
}

/// The allocator's (busy, search) from a core's times per mode: overhead is busy time.
fn busy_search(t: &[Nanos; 5]) -> (Nanos, Nanos) {
    (t[CoreMode::Busy as usize] + t[CoreMode::Overhead as usize], t[CoreMode::Search as usize])
}

fn core_state(mode: CoreMode) -> CoreState {
    match mode {
        CoreMode::Busy | CoreMode::Search | CoreMode::Overhead => CoreState::Active,
        CoreMode::Parked => CoreState::Parked,
        CoreMode::Waking => CoreState::Waking,
    }
}

/// Whole-server aggregates of the cores, kept up to date as they change, so that an allocator
/// tick, a grant and the core-time totals cost O(1) (or O(cores with queued work)), not a pass
/// over every core: at a thousand cores those passes dominated the run.
#[derive(Debug, Clone)]
struct Ledger {
    /// Per mode: Σ over cores of their finished stretches in it; the cores in it now; Σ of
    /// their `since`. The mode's total time up to `now` is `closed + in_mode · now − since_sum`.
    closed: [Nanos; 5],
    in_mode: [u64; 5],
    since_sum: [Nanos; 5],
    /// Parked cores, one bit each: a grant takes the lowest.
    parked: Vec<u64>,
    /// Allocator ticks so far, and the time of the last.
    tick: u32,
    tick_at: Nanos,
}

impl Ledger {
    fn new(cores: &[Core]) -> Self {
        let mut l = Self {
            closed: [0; 5],
            in_mode: [0; 5],
            since_sum: [0; 5],
            parked: vec![0; cores.len().div_ceil(64)],
            tick: 0,
            tick_at: 0,
        };
        for c in cores {
            l.in_mode[c.mode as usize] += 1;
            l.since_sum[c.mode as usize] += c.since;
            if c.mode == CoreMode::Parked {
                l.parked[c.id as usize / 64] |= 1 << (c.id % 64);
            }
        }
        l
    }

    fn times_at(&self, now: Nanos) -> [Nanos; 5] {
        std::array::from_fn(|m| self.closed[m] + self.in_mode[m] * now - self.since_sum[m])
    }

    fn lowest_parked(&self) -> Option<u16> {
        let (w, bits) = self.parked.iter().enumerate().find(|(_, b)| **b != 0)?;
        Some((w * 64) as u16 + bits.trailing_zeros() as u16)
    }
}

/// An index set with O(1) insert, remove and membership, iterated in insertion order until a
/// removal swaps the last element in.
#[derive(Debug, Clone)]
struct CoreSet {
    items: Vec<u16>,
    pos: Vec<u32>,
}

impl CoreSet {
    fn new(n: usize) -> Self {
        Self { items: Vec::with_capacity(n), pos: vec![NONE; n] }
    }
    #[inline(always)]
    fn insert(&mut self, c: u16) {
        if self.pos[c as usize] == NONE {
            self.pos[c as usize] = self.items.len() as u32;
            self.items.push(c);
        }
    }
    #[inline(always)]
    fn remove(&mut self, c: u16) -> bool {
        let p = self.pos[c as usize];
        if p == NONE {
            return false;
        }
        self.items.swap_remove(p as usize);
        if let Some(&moved) = self.items.get(p as usize) {
            self.pos[moved as usize] = p;
        }
        self.pos[c as usize] = NONE;
        true
    }
    #[inline]
    fn contains(&self, c: u16) -> bool {
        self.pos[c as usize] != NONE
    }
    #[inline(always)]
    fn pop(&mut self) -> Option<u16> {
        let c = self.items.pop()?;
        self.pos[c as usize] = NONE;
        Some(c)
    }
    fn len(&self) -> usize {
        self.items.len()
    }
}

/// Static facts of the server.
#[derive(Debug, Clone)]
pub struct ServerCfg {
    /// Cores that run requests (a dispatcher's core is not one of them).
    pub max_cores: usize,
    /// Per-request cost of a dispatcher core, if the server has one.
    pub dispatcher: Option<Nanos>,
    pub steal_cost: Nanos,
    pub packet_cost: Nanos,
    pub alloc_delay: Nanos,
    pub preemption: Preemption,
}

/// The queues and core sets: what a queueing policy sees ([`ServerView`]).
#[derive(Debug)]
pub struct Queues {
    max_cores: usize,
    pub cores: Vec<Core>,
    shared: VecDeque<u32>,
    /// Class queues (`Place::Class`), created as policies first use them.
    classes: Vec<VecDeque<u32>>,
    /// Active cores with nothing to do, polling: the first to hear of new work.
    spinners: CoreSet,
    /// Active cores (busy or searching), for steering packets away from parked cores.
    active: CoreSet,
    /// Cores a thief may steal from: a non-empty queue and not mid-steal themselves.
    victims: CoreSet,
    /// Cores with a non-empty queue, mid-steal or not: the only ones with a queueing delay.
    nonempty: CoreSet,
    ledger: Ledger,
    /// Requests waiting in any queue.
    pub queued: u64,
}

impl ServerView for Queues {
    #[inline]
    fn max_cores(&self) -> usize {
        self.max_cores
    }
    #[inline]
    fn is_active(&self, core: u16) -> bool {
        self.cores[core as usize].is_active()
    }
    #[inline]
    fn active(&self) -> &[u16] {
        &self.active.items
    }
    #[inline]
    fn spinners(&self) -> &[u16] {
        &self.spinners.items
    }
    #[inline]
    fn victims(&self) -> &[u16] {
        &self.victims.items
    }
    #[inline]
    fn queue_len(&self, place: Place) -> usize {
        match place {
            Place::Core(c) => self.cores[c as usize].queue.len(),
            Place::Shared => self.shared.len(),
            Place::Class(k) => self.classes.get(k as usize).map_or(0, |q| q.len()),
        }
    }
    #[inline]
    fn queued(&self) -> u64 {
        self.queued
    }
}

impl Queues {
    /// Appends a runnable request to a queue (its enqueue time is set by the caller).
    #[inline(always)]
    fn push(&mut self, place: Place, req: u32) {
        match place {
            Place::Core(c) => {
                let core = &mut self.cores[c as usize];
                core.save_tick(&self.ledger);
                core.queue.push_back(req);
                core.enqueued_total += 1;
                if !core.stealing {
                    self.victims.insert(c);
                }
                self.nonempty.insert(c);
            }
            Place::Shared => {
                // The shared queue is reported on core 0 (see `queued_cores`), its turnover
                // too: Shenango's standing-queue test differences these counters, and without
                // them it never saw a central queue's congestion (one core served an M/M/16).
                let core = &mut self.cores[0];
                core.save_tick(&self.ledger);
                core.enqueued_total += 1;
                self.shared.push_back(req)
            }
            Place::Class(k) => {
                if self.classes.len() <= k as usize {
                    self.classes.resize_with(k as usize + 1, VecDeque::new);
                }
                self.classes[k as usize].push_back(req)
            }
        }
        self.queued += 1;
    }

    #[inline(always)]
    fn pop(&mut self, place: Place) -> Option<u32> {
        let r = match place {
            Place::Core(c) => {
                let core = &mut self.cores[c as usize];
                let r = core.queue.pop_front()?;
                core.dequeued_total += 1;
                if core.queue.is_empty() {
                    self.victims.remove(c);
                    self.nonempty.remove(c);
                }
                r
            }
            Place::Shared => {
                let r = self.shared.pop_front()?;
                self.cores[0].dequeued_total += 1;
                r
            }
            Place::Class(k) => self.classes.get_mut(k as usize)?.pop_front()?,
        };
        self.queued -= 1;
        Some(r)
    }
}

/// Counters of the scheduling mechanism (whole run; the driver takes window differences).
#[derive(Debug, Clone, Copy, Default)]
pub struct SchedCounters {
    pub preemptions: u64,
    pub yields: u64,
    pub lock_acquisitions: u64,
    pub lock_waits: u64,
    pub lock_wait_ns: u64,
    pub preempt_send_ns: u64,
    /// Quantum expiries at which the policy let the request run on (conditional preemption).
    pub avoided_preemptions: u64,
    /// Requests the dispatcher core ran itself, and its time running them.
    pub dispatcher_requests: u64,
    pub dispatcher_work_ns: u64,
}

pub struct Server {
    /// Its index among the scenario's nodes, carried by the events it schedules.
    node: u16,
    cfg: ServerCfg,
    pub q: Queues,
    policy: Box<dyn QueuePolicy<Queues>>,
    /// The policy's `per_request`, read once.
    per_request: bool,
    /// The policy's `preempts_only_for_own_queue`, read once: expiries are lazy.
    lazy: bool,
    /// The policy's `pushes`, read once: shared-queue work is pushed to cores' own queues.
    pushes: bool,
    /// Concrete programs of live requests that have one, by request slot.
    programs: Vec<Vec<Op>>,
    pub mutexes: MutexTable<u32>,
    /// Per mutex: a spin lock (its waiters hold their cores).
    spin_locks: Vec<bool>,
    dispatcher: Option<Dispatcher>,
    pub counters: SchedCounters,
    /// Cores that found work in the middle of a park attempt, for the driver to report.
    pub aborted_parks: Vec<u16>,
    /// Cores that ran out of work inside the server (a request handed to a spinning core
    /// blocked or yielded at once), with what they did next, for the driver's parking logic.
    pub idled: Vec<(u16, Idle)>,
    /// Cores asked to yield since the last withdrawal (some may have parked since).
    yields_asked: Vec<u16>,
    /// Drops at lock steps (`server.lock_control`), with the state they need; `None`: lock
    /// steps block, and nothing below is kept.
    pub locks: Option<Box<LockDropState>>,
    /// Breakwater v2's worker-start drop (`latency_budget_us`); `None`: off.
    pub start_drop: Option<StartDrop>,
    /// The probe-cost work search (`server.search.kind = "probe"`); None: the instant search.
    probe: Option<Box<search::ProbeState>>,
    /// NIC interrupt handlers interleaved with requests (`server.irq`); None: no interrupts.
    pub irq: Option<Box<microsched_core::sched::irq::Irq>>,
}

/// Breakwater v2's worker-start drop: a request whose worker starts while the delay signal
/// exceeds `budget` is answered with a failure instead of run.
#[derive(Debug, Clone, Copy)]
pub struct StartDrop {
    pub budget: Nanos,
    /// Measure the signal at the start (`server.delay_signal = "exact"`), else read `sampled`,
    /// which the driver refreshes when it samples the signal.
    pub exact: bool,
    pub sampled: Nanos,
    /// Requests dropped in the measured window (reset when it starts).
    pub drops: u64,
}

/// What lock-level drops need beyond the mutexes: the rule, per-request accumulated-delay
/// seeds and pending cleanups, per-lock statistics.
pub struct LockDropState {
    pub rule: LockControl,
    /// Per mutex: a dropped request that had taken it re-takes it to clean up.
    cleanup_lock: Vec<bool>,
    /// Per request slot: ASQM's accumulated delay is `queued_ns + seed` (signal seeding).
    seed: Vec<i64>,
    /// Per request slot: the mutex its cleanup re-takes once its failure reply has left.
    cleanup: Vec<u32>,
    pub stats: LockStats,
    /// Lock-step drops over the measured window.
    pub drops: u64,
}

impl LockDropState {
    pub fn new(rule: LockControl, cleanup_lock: Vec<bool>, stats: LockStats) -> Self {
        Self { rule, cleanup_lock, seed: Vec::new(), cleanup: Vec::new(), stats, drops: 0 }
    }

    fn slot(&mut self, slot: u32) {
        let i = slot as usize;
        if self.seed.len() <= i {
            self.seed.resize(i + 1, 0);
            self.cleanup.resize(i + 1, NONE);
        }
    }
}

/// What happened to a core that ran out of work, for the driver's parking logic.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Idle {
    /// Found work (its own, or stolen).
    Working,
    /// Now spinning with nothing to do.
    Spinning,
    /// Parked because a proactive policy had asked it to yield.
    Yielded,
}

/// What a core's slice end (or overhead end) led to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SliceEnd {
    /// A superseded event: nothing happened.
    Stale,
    /// The request finished; the core must look for work.
    Finished(u32),
    /// The core goes on with its request (another slice, or spinning for a lock).
    Running,
    /// The core let go of its request (blocked, yielded, preempted): it must look for work.
    Freed,
}

/// Where running a request's program got to.
enum Ran {
    /// A slice end or overhead end is scheduled, or the core spins for a lock.
    Pending,
    /// Every op done.
    Done,
    /// The request left the core.
    Left,
}

impl Server {
    pub fn new(node: u16, cfg: ServerCfg, initially_active: usize, policy: Box<dyn QueuePolicy<Queues>>, spin_locks: Vec<bool>) -> Self {
        let n = cfg.max_cores;
        let dispatcher = cfg.dispatcher;
        let mut cores = Vec::with_capacity(n);
        let mut spinners = CoreSet::new(n);
        let mut active = CoreSet::new(n);
        for c in 0..n {
            if c < initially_active {
                cores.push(Core::new(c as u16, CoreMode::Search));
                active.insert(c as u16);
                spinners.insert(c as u16);
            } else {
                cores.push(Core::new(c as u16, CoreMode::Parked));
            }
        }
        let ledger = Ledger::new(&cores);
        let q = Queues {
            max_cores: n,
            cores,
            shared: VecDeque::new(),
            classes: Vec::new(),
            spinners,
            active,
            victims: CoreSet::new(n),
            nonempty: CoreSet::new(n),
            ledger,
            queued: 0,
        };
        let per_request = policy.per_request();
        let lazy = policy.preempts_only_for_own_queue();
        let pushes = policy.pushes();
        Self {
            node,
            q,
            cfg,
            per_request,
            lazy,
            pushes,
            policy,
            programs: Vec::new(),
            mutexes: MutexTable::new(spin_locks.len() as u32),
            dispatcher: dispatcher.map(|cost| Dispatcher::new(node, cost)),
            spin_locks,
            counters: SchedCounters::default(),
            aborted_parks: Vec::new(),
            idled: Vec::new(),
            yields_asked: Vec::new(),
            locks: None,
            start_drop: None,
            probe: None,
            irq: None,
        }
    }

    /// Whether the driver has `aborted_parks` or `idled` to act on.
    #[inline]
    pub fn has_followups(&self) -> bool {
        !self.aborted_parks.is_empty() || !self.idled.is_empty()
    }

    pub fn policy_name(&self) -> &'static str {
        self.policy.name()
    }

    pub fn core(&self, c: u16) -> &Core {
        &self.q.cores[c as usize]
    }

    pub fn active_count(&self) -> usize {
        self.q.active.len()
    }

    pub fn is_spinning(&self, core: u16) -> bool {
        self.q.spinners.contains(core)
    }

    /// Gives request `slot` a concrete program (requests without one compute their service time).
    pub fn set_program(&mut self, slot: u32, ops: &[Op]) {
        let i = slot as usize;
        if self.programs.len() <= i {
            self.programs.resize_with(i + 1, Vec::new);
        }
        self.programs[i].clear();
        self.programs[i].extend_from_slice(ops);
    }

    /// A request packet arrives at the server.
    #[inline(always)]
    pub fn arrive(&mut self, req: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        slab.stamp(req, |s| s.arrive = now);
        let r = &mut slab[req];
        r.enqueued_at = now;
        if let Some(d) = &mut self.dispatcher {
            if d.arrive(req, now, evq) {
                r.queued_ns += now - r.enqueued_at;
            }
            return;
        }
        if self.per_request {
            self.policy.clock(now);
        }
        let place = self.policy.steer_typed(r.flow, r.rtype, &self.q);
        self.make_runnable(req, place, now, slab, evq);
    }

    /// The dispatcher core hands the request it dispatched to the queueing policy.
    pub fn dispatch_done(&mut self, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        let d = self.dispatcher.as_mut().expect("dispatch events need a dispatcher");
        let (req, next) = d.done(now, evq);
        if let Some(n) = next {
            let r = &mut slab[n];
            r.queued_ns += now - r.enqueued_at;
        }
        let r = &mut slab[req];
        r.enqueued_at = now;
        if self.per_request {
            self.policy.clock(now);
        }
        let place = self.policy.steer_typed(r.flow, r.rtype, &self.q);
        self.make_runnable(req, place, now, slab, evq);
        if next.is_none() {
            self.dispatcher_try_work(now, slab, evq);
        }
    }

    /// An idle dispatcher core runs a request of its own if the policy finds slack: the one it
    /// has begun, else the oldest never-started one of the shared queue.
    fn dispatcher_try_work(&mut self, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        let Some(d) = self.dispatcher.as_ref() else { return };
        if !d.idle() {
            return;
        }
        let slack = self.policy.dispatcher_slack(now);
        if slack == Slack::Never {
            return;
        }
        let d = self.dispatcher.as_mut().expect("checked");
        let pick = if d.job.is_some() {
            None
        } else {
            match self.q.shared.iter().position(|&r| !slab[r].started && !slab[r].has_program) {
                Some(i) => Some(i),
                None => return,
            }
        };
        match slack {
            Slack::Never => {}
            Slack::After(at) => d.retry_at(at, evq),
            Slack::Run(len) => {
                if let Some(i) = pick {
                    let req = self.q.shared.remove(i).expect("found");
                    self.q.queued -= 1;
                    let r = &mut slab[req];
                    r.queued_ns += now - r.enqueued_at;
                    r.started = true;
                    r.set(Req::RECEIVED, true);
                    slab.stamp(req, |s| s.start = now);
                    let work = self.cfg.packet_cost + self.cfg.preemption.inflate(slab[req].service);
                    d.job = Some((req, work.max(1)));
                }
                d.run_chunk(len, now, evq);
            }
        }
    }

    /// A dispatcher core's own-request event: returns the request it finished, if any (the
    /// driver answers it).
    pub fn dispatcher_work(&mut self, gen: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Option<u32> {
        let d = self.dispatcher.as_mut()?;
        let before = d.work_ns;
        match d.work_event(gen, now) {
            WorkEvent::Stale => None,
            WorkEvent::Retry => {
                self.dispatcher_try_work(now, slab, evq);
                None
            }
            WorkEvent::ChunkEnd(done) => {
                self.counters.dispatcher_work_ns += d.work_ns - before;
                if let Some(req) = done {
                    self.counters.dispatcher_requests += 1;
                    let r = &mut slab[req];
                    r.left = 0;
                    r.in_op = false;
                    r.pc = 1;
                }
                // Back to dispatching: arrivals that waited first.
                match d.resume(now, evq) {
                    Some(n) => {
                        let r = &mut slab[n];
                        r.queued_ns += now - r.enqueued_at;
                    }
                    None => self.dispatcher_try_work(now, slab, evq),
                }
                done
            }
        }
    }

    /// Puts a runnable request on `place`: straight onto a spinning core that serves it, else
    /// into the queue (a spinning core may be sent to steal it).
    #[inline(always)]
    fn make_runnable(&mut self, req: u32, place: Place, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        if self.probe.is_some() {
            if let Place::Core(c) = place {
                return self.queue_probed(req, c, now, evq);
            }
        }
        let idle = match place {
            Place::Core(c) => self.q.spinners.remove(c).then_some(c),
            Place::Shared => self.q.spinners.pop(),
            Place::Class(_) => self.policy.notify(place, &self.q).filter(|&c| self.q.spinners.remove(c)),
        };
        if let Some(c) = idle {
            if !self.start(c, req, now, slab, evq) {
                let next = self.find_work(c, now, slab, evq);
                self.idled.push((c, next));
            }
            return;
        }
        self.q.push(place, req);
        // Only work queued behind a busy core's own queue is worth sending a spinner to steal.
        if let Place::Core(victim) = place {
            if self.q.cores[victim as usize].lazy_from != Nanos::MAX {
                self.arm_expiry(victim, now, evq);
            }
            if let Some(thief) = self.policy.notify(place, &self.q) {
                self.q.spinners.remove(thief);
                self.steal_from(thief, victim, now, slab, evq);
            }
        }
    }

    /// Work queued at a core whose running request's expiries are lazy: its next expiry (the
    /// first at or after `now`: an expiry due now comes after the arrival that queued the work,
    /// as it would have with the expiry's event scheduled a quantum earlier and the arrival's
    /// half an RTT earlier) is scheduled, unless the request ends first.
    fn arm_expiry(&mut self, core: u16, now: Nanos, evq: &mut EventQueue) {
        let c = &mut self.q.cores[core as usize];
        let period = c.quantum + self.cfg.preemption.propagation;
        let k = now.saturating_sub(c.lazy_from).div_ceil(period);
        let at = c.lazy_from + k * period;
        if at >= c.slice_start + c.slice_len {
            return;
        }
        self.counters.avoided_preemptions += k;
        c.lazy_from = Nanos::MAX;
        c.slice_len = at - c.slice_start;
        c.gen = c.gen.wrapping_add(1);
        evq.push(at, Event::CoreDone { node: self.node, core, gen: c.gen });
    }

    /// Core `core` takes request `req` (off a queue, or handed over at arrival). False if the
    /// request left the core at once (blocked on a mutex, or yielded): the core is free again.
    #[inline]
    fn start(&mut self, core: u16, req: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> bool {
        if self.start_drop.is_some() && !slab[req].started && !slab[req].has_program {
            self.maybe_start_drop(req, now, slab);
        }
        if self.locks.is_some() && !slab[req].started && slab[req].has_program {
            self.seed_delay(req, now, slab);
        }
        let c = &mut self.q.cores[core as usize];
        if c.park_attempting {
            c.park_attempting = false;
            self.aborted_parks.push(core);
        }
        c.epoch = c.epoch.wrapping_add(1);
        c.current = req;
        let quantum = if self.per_request {
            self.policy.clock(now);
            self.policy.quantum(core, slab[req].rtype, slab[req].service, self.cfg.preemption.quantum)
        } else {
            self.cfg.preemption.quantum
        };
        let c = &mut self.q.cores[core as usize];
        c.budget = quantum;
        c.quantum = quantum;
        let r = &mut slab[req];
        r.queued_ns += now - r.enqueued_at;
        r.core = core;
        if !r.started {
            r.started = true;
            slab.stamp(req, |s| s.start = now);
        }
        let r = &mut slab[req];
        if r.has(Req::PREEMPTED) && self.cfg.preemption.ret > 0 {
            r.set(Req::PREEMPTED, false);
            c.set_mode(CoreMode::Overhead, now, &mut self.q.ledger);
            c.after_overhead = AfterOverhead::Resume;
            c.gen = c.gen.wrapping_add(1);
            evq.push(now + self.cfg.preemption.ret, Event::OverheadDone { node: self.node, core, gen: c.gen });
            return true;
        }
        r.set(Req::PREEMPTED, false);
        c.set_mode(CoreMode::Busy, now, &mut self.q.ledger);
        let mut service = self.cfg.preemption.inflate(r.service);
        if let Some(irq) = &mut self.irq {
            service += irq.stolen(service);
        }
        if !r.has_program && !r.in_op && service <= c.budget {
            // The common case, kept short: no program and no preemption, the whole request in
            // one slice after its packet cost (what `run` would decide, without its generality).
            r.in_op = true;
            r.left = service;
            r.set(Req::RECEIVED, true);
            c.gen = c.gen.wrapping_add(1);
            c.slice_start = now + self.cfg.packet_cost;
            c.slice_len = service;
            evq.push(c.slice_start + service, Event::CoreDone { node: self.node, core, gen: c.gen });
            return true;
        }
        match self.run(core, now, slab, evq) {
            Ran::Pending => true,
            // Finishing is always reported through a slice end, so the driver answers it.
            Ran::Done => {
                self.schedule_slice(core, now, 0, evq);
                true
            }
            Ran::Left => false,
        }
    }

    /// The worker-start drop: over budget, the request runs for no time and ends as dropped,
    /// so its failure reply leaves after the packet cost, as a completed one would.
    #[cold]
    fn maybe_start_drop(&mut self, req: u32, now: Nanos, slab: &mut Slab) {
        let sd = self.start_drop.expect("checked");
        let signal = if sd.exact { self.max_delay(now, slab) } else { sd.sampled };
        if signal > sd.budget {
            let r = &mut slab[req];
            r.dropped = true;
            r.service = 0;
            self.start_drop.as_mut().expect("checked").drops += 1;
        }
    }

    #[inline]
    fn schedule_slice(&mut self, core: u16, now: Nanos, len: Nanos, evq: &mut EventQueue) {
        let c = &mut self.q.cores[core as usize];
        c.gen = c.gen.wrapping_add(1);
        c.slice_start = now;
        c.slice_len = len;
        evq.push(now + len, Event::CoreDone { node: self.node, core, gen: c.gen });
    }

    /// Runs the current request's ops from where it is, until one takes time (a compute slice
    /// is scheduled), blocks, yields, or the program ends.
    fn run(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Ran {
        let req = self.q.cores[core as usize].current;
        loop {
            let r = &mut slab[req];
            let op = if r.has_program {
                match self.programs[req as usize].get(r.pc as usize) {
                    Some(&op) => op,
                    None => return Ran::Done,
                }
            } else if r.pc == 0 {
                Op::Compute(r.service)
            } else {
                return Ran::Done;
            };
            match op {
                Op::Compute(d) => {
                    if !r.in_op {
                        r.in_op = true;
                        r.left = self.cfg.preemption.inflate(d);
                        if let Some(irq) = &mut self.irq {
                            r.left += irq.stolen(r.left);
                        }
                    }
                    if r.left == 0 {
                        r.in_op = false;
                        r.pc += 1;
                        continue;
                    }
                    // The packet is received and dispatched before the first instruction runs.
                    let prefix = if r.has(Req::RECEIVED) { 0 } else { self.cfg.packet_cost };
                    r.set(Req::RECEIVED, true);
                    let budget = self.q.cores[core as usize].budget;
                    let p = &self.cfg.preemption;
                    let c = &self.q.cores[core as usize];
                    if self.lazy && !r.has_program && c.quantum != Nanos::MAX && r.left > budget + p.propagation && c.queue.is_empty() {
                        // Every expiry would find nothing queued here and let the request run
                        // on: run it to its end, and schedule an expiry only if work queues
                        // (`arm_expiry`).
                        let left = r.left;
                        let first = now + prefix + budget + p.propagation;
                        self.schedule_slice(core, now, prefix + left, evq);
                        let c = &mut self.q.cores[core as usize];
                        c.slice_start = now + prefix;
                        c.slice_len = left;
                        c.lazy_from = first;
                        return Ran::Pending;
                    }
                    let slice = if r.left <= budget { r.left } else { (budget + p.propagation).min(r.left) };
                    self.schedule_slice(core, now, prefix + slice, evq);
                    // The prefix is not run time of the request: record the slice as the part
                    // that is.
                    let c = &mut self.q.cores[core as usize];
                    c.slice_start = now + prefix;
                    c.slice_len = slice;
                    return Ran::Pending;
                }
                Op::Acquire(m) => {
                    r.pc += 1;
                    self.counters.lock_acquisitions += 1;
                    if let Some(l) = &mut self.locks {
                        let held = self.mutexes.is_held(m);
                        l.slot(req);
                        let acc = (r.queued_ns as i64 + l.seed[req as usize]).max(0) as Nanos;
                        if !r.has(Req::GHOST) && l.rule.drops(acc, held, self.mutexes.oldest_wait(m, now)) {
                            self.lock_drop(req, m, slab);
                            continue;
                        }
                        l.stats.acquire(m, held, now);
                    }
                    if self.mutexes.acquire(m, req, now) {
                        continue;
                    }
                    r.set(Req::WAITING_LOCK, true);
                    if self.mutexes_spin(m) {
                        // A spin waiter burns its core until the lock is handed to it.
                        return Ran::Pending;
                    }
                    self.q.cores[core as usize].current = NONE;
                    return Ran::Left;
                }
                Op::Release(m) => {
                    r.pc += 1;
                    if let Some((w, since)) = self.mutexes.release(m) {
                        self.hand_over(w, since, m, core, now, slab, evq);
                    }
                }
                Op::Yield => {
                    r.pc += 1;
                    self.counters.yields += 1;
                    r.enqueued_at = now;
                    self.q.cores[core as usize].current = NONE;
                    let place = self.policy.requeue(core, Requeue::Yielded, &self.q);
                    self.q.push(place, req);
                    if let Place::Core(c) = place {
                        self.stealable_again(c, now, evq);
                    }
                    return Ran::Left;
                }
            }
        }
    }

    /// The artifact's `set_acc_qdel(runtime_queue_us())` when a request first runs: what it
    /// waited so far counts as the server's congestion signal now.
    fn seed_delay(&mut self, req: u32, now: Nanos, slab: &Slab) {
        let signal = self.max_delay(now, slab);
        let l = self.locks.as_mut().expect("lock drops on");
        l.slot(req);
        let r = &slab[req];
        l.seed[req as usize] = match l.rule.seed {
            Seed::Signal => signal as i64 - (r.queued_ns + (now - r.enqueued_at)) as i64,
            Seed::Measured => 0,
        };
        l.cleanup[req as usize] = NONE;
    }

    /// Request `req`, running, is dropped at a lock step on mutex `m` (its pc is past the
    /// acquire): it releases what it holds, spends the drop cost producing its failure reply and
    /// ends as dropped. If it had taken a cleanup lock, the cleanup is left for the driver to run
    /// once the reply has gone ([`Server::take_cleanup`]).
    fn lock_drop(&mut self, req: u32, m: u32, slab: &mut Slab) {
        let l = self.locks.as_mut().expect("lock drops on");
        l.stats.dropped(m);
        if l.stats.measuring {
            l.drops += 1;
        }
        let r = &mut slab[req];
        r.dropped = true;
        let pc = r.pc as usize;
        let prog = &mut self.programs[req as usize];
        let mut held: Vec<u32> = Vec::new();
        let mut cleanup = NONE;
        for op in &prog[..pc - 1] {
            match *op {
                Op::Acquire(h) => {
                    held.push(h);
                    if l.cleanup_lock[h as usize] {
                        cleanup = h;
                    }
                }
                Op::Release(h) => held.retain(|&x| x != h),
                _ => {}
            }
        }
        l.cleanup[req as usize] = cleanup;
        prog.truncate(pc);
        prog.extend(held.iter().rev().map(|&h| Op::Release(h)));
        prog.push(Op::Compute(l.rule.drop_cost_ns));
    }

    /// The mutex a just-finished dropped request must re-take to clean up, if any.
    pub fn take_cleanup(&mut self, req: u32) -> Option<u32> {
        let l = self.locks.as_mut()?;
        let c = std::mem::replace(l.cleanup.get_mut(req as usize)?, NONE);
        (c != NONE).then_some(c)
    }

    /// Runs cleanup thread `ghost` (its program set) on `core`, which just finished the
    /// dropped request. False if it blocked at once (the core is free).
    pub fn run_cleanup(&mut self, core: u16, ghost: u32, mutex: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> bool {
        if let Some(l) = &mut self.locks {
            l.stats.cleanup(mutex);
        }
        slab.stamp(ghost, |s| {
            s.arrive = now;
            s.start = now;
        });
        let r = &mut slab[ghost];
        r.enqueued_at = now;
        r.set(Req::RECEIVED, true);
        r.started = true;
        self.start(core, ghost, now, slab, evq)
    }

    #[inline]
    fn mutexes_spin(&self, m: u32) -> bool {
        self.spin_locks[m as usize]
    }

    /// Mutex `m`, released on `core`, now belongs to waiter `w` (waiting since `since`).
    #[allow(clippy::too_many_arguments)]
    fn hand_over(&mut self, w: u32, since: Nanos, m: u32, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        let r = &mut slab[w];
        r.queued_ns += now - since;
        r.set(Req::WAITING_LOCK, false);
        if let Some(l) = &mut self.locks {
            l.slot(w);
            let acc = (r.queued_ns as i64 + l.seed[w as usize]).max(0) as Nanos;
            l.stats.handed(m, now - since, now, !r.has(Req::GHOST) && acc > l.rule.budget_ns);
        }
        self.counters.lock_waits += 1;
        self.counters.lock_wait_ns += now - since;
        if self.mutexes_spin(m) {
            // Its core has been spinning for it: it goes on at once, after this event.
            let c = r.core;
            evq.push(now, Event::LockGranted { node: self.node, core: c, gen: self.q.cores[c as usize].gen });
        } else {
            r.enqueued_at = now;
            let place = self.policy.requeue(core, Requeue::Woken, &self.q);
            self.make_runnable(w, place, now, slab, evq);
        }
    }

    /// A spin waiter's lock was handed over: its core goes on running it.
    pub fn lock_granted(&mut self, core: u16, gen: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> SliceEnd {
        if self.q.cores[core as usize].gen != gen {
            return SliceEnd::Stale;
        }
        self.after_run(core, now, slab, evq)
    }

    /// The end of a core's compute slice: the op is done (the program goes on), or the quantum
    /// expired (the request is preempted, unless the policy lets it run another quantum).
    #[inline]
    pub fn slice_end(&mut self, core: u16, gen: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> SliceEnd {
        let c = &mut self.q.cores[core as usize];
        if c.gen != gen {
            return SliceEnd::Stale;
        }
        let req = c.current;
        let ran = c.slice_len;
        c.budget = c.budget.saturating_sub(ran);
        if c.lazy_from != Nanos::MAX {
            // A lazy slice ran to the request's end: every expiry on the way was avoided.
            let period = c.quantum + self.cfg.preemption.propagation;
            self.counters.avoided_preemptions += (now - c.lazy_from).div_ceil(period);
            c.lazy_from = Nanos::MAX;
        }
        let r = &mut slab[req];
        if !r.has_program && r.left == ran {
            // The single compute of a request without a program is done: so is the request.
            r.left = 0;
            r.in_op = false;
            r.pc = 1;
            c.current = NONE;
            if self.per_request {
                self.policy.finished(core, r.service);
            }
            return SliceEnd::Finished(req);
        }
        if r.left > 0 {
            r.left -= ran;
            if r.left == 0 {
                r.in_op = false;
                r.pc += 1;
            } else if self.policy.preempt_at_quantum(core, &self.q) {
                return self.preempt(core, now, slab, evq);
            } else {
                self.counters.avoided_preemptions += 1;
                let c = &mut self.q.cores[core as usize];
                c.budget = c.quantum;
            }
        }
        self.after_run(core, now, slab, evq)
    }

    fn after_run(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> SliceEnd {
        match self.run(core, now, slab, evq) {
            Ran::Pending => SliceEnd::Running,
            Ran::Done => {
                let c = &mut self.q.cores[core as usize];
                let req = c.current;
                c.current = NONE;
                if self.per_request {
                    self.policy.finished(core, slab[req].service);
                }
                SliceEnd::Finished(req)
            }
            Ran::Left => SliceEnd::Freed,
        }
    }

    /// Takes the running request off `core` at its quantum: the receive cost, then it goes back
    /// to a runqueue.
    fn preempt(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> SliceEnd {
        let p = self.cfg.preemption;
        self.counters.preemptions += 1;
        self.counters.preempt_send_ns += p.send;
        let c = &mut self.q.cores[core as usize];
        let req = c.current;
        slab[req].set(Req::PREEMPTED, true);
        if p.receive > 0 {
            c.set_mode(CoreMode::Overhead, now, &mut self.q.ledger);
            c.after_overhead = AfterOverhead::Requeue;
            c.gen = c.gen.wrapping_add(1);
            evq.push(now + p.receive, Event::OverheadDone { node: self.node, core, gen: c.gen });
            return SliceEnd::Running;
        }
        self.requeue_preempted(core, now, slab, evq);
        SliceEnd::Freed
    }

    fn requeue_preempted(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        let c = &mut self.q.cores[core as usize];
        let req = c.current;
        c.current = NONE;
        slab[req].enqueued_at = now;
        if self.per_request {
            self.policy.clock(now);
        }
        let place = self.policy.requeue(core, Requeue::Preempted, &self.q);
        // Onto a queue, not straight to a spinner: the freed core itself looks for work next.
        self.q.push(place, req);
        if let Place::Core(c) = place {
            self.stealable_again(c, now, evq);
        }
        // A shared queue that idle cores poll (Synergy's wait queue): one of them takes it.
        if place == Place::Shared {
            if let Some(idle) = self.policy.notify(place, &self.q) {
                self.q.spinners.remove(idle);
                let r = self.q.pop(Place::Shared).expect("just queued");
                if !self.start(idle, r, now, slab, evq) {
                    let next = self.find_work(idle, now, slab, evq);
                    self.idled.push((idle, next));
                }
            }
        }
    }

    /// The end of a core's overhead stretch (preemption receive or return cost).
    pub fn overhead_done(&mut self, core: u16, gen: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> SliceEnd {
        let c = &mut self.q.cores[core as usize];
        if c.gen != gen {
            return SliceEnd::Stale;
        }
        c.set_mode(CoreMode::Busy, now, &mut self.q.ledger);
        match c.after_overhead {
            AfterOverhead::Requeue => {
                self.requeue_preempted(core, now, slab, evq);
                SliceEnd::Freed
            }
            AfterOverhead::Resume => self.after_run(core, now, slab, evq),
        }
    }

    /// Cancels the core's pending slice end, crediting the request with the part of the slice
    /// it ran, and preempts it now (a dispatcher's or a policy's early preemption).
    #[allow(dead_code)] // the mechanism for dispatcher-driven (Concord-style) preemption
    pub fn preempt_now(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> SliceEnd {
        let c = &mut self.q.cores[core as usize];
        if c.current == NONE || c.mode != CoreMode::Busy || slab[c.current].has(Req::WAITING_LOCK) || now < c.slice_start {
            return SliceEnd::Stale;
        }
        let ran = now - c.slice_start;
        c.gen = c.gen.wrapping_add(1);
        if c.lazy_from != Nanos::MAX {
            let period = c.quantum + self.cfg.preemption.propagation;
            self.counters.avoided_preemptions += now.saturating_sub(c.lazy_from).div_ceil(period);
            c.lazy_from = Nanos::MAX;
        }
        let r = &mut slab[c.current];
        r.left -= ran.min(r.left);
        if r.left == 0 {
            r.in_op = false;
            r.pc += 1;
        }
        self.preempt(core, now, slab, evq)
    }

    /// Moves the oldest `steal_amount` of `victim`'s queue to `thief`, which runs it after the
    /// steal cost.
    fn steal_from(&mut self, thief: u16, victim: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        let q = &mut self.q;
        let take = self.policy.steal(thief, victim, q.cores[victim as usize].queue.len());
        debug_assert!(take > 0 && q.cores[thief as usize].queue.is_empty());
        for _ in 0..take {
            let r = q.cores[victim as usize].queue.pop_front().expect("counted");
            q.cores[thief as usize].queue.push_back(r);
        }
        q.cores[victim as usize].dequeued_total += take as u64;
        if q.cores[victim as usize].queue.is_empty() {
            q.victims.remove(victim);
            q.nonempty.remove(victim);
        }
        q.nonempty.insert(thief);
        let t = &mut q.cores[thief as usize];
        t.save_tick(&q.ledger);
        t.enqueued_total += take as u64;
        t.epoch = t.epoch.wrapping_add(1);
        t.set_mode(CoreMode::Search, now, &mut q.ledger);
        t.stealing = true;
        q.victims.remove(thief);
        if self.cfg.steal_cost == 0 {
            self.end_steal(thief);
            self.stealable_again(thief, now, evq);
            if !self.run_own(thief, now, slab, evq) {
                let next = self.find_work(thief, now, slab, evq);
                self.idled.push((thief, next));
            }
        } else {
            evq.push(now + self.cfg.steal_cost, Event::StealDone { node: self.node, core: thief });
        }
    }

    /// Runs the head of the core's own queue; false if it is empty (or what it took left the
    /// core at once).
    fn run_own(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> bool {
        match self.q.pop(Place::Core(core)) {
            Some(r) => self.start(core, r, now, slab, evq),
            None => false,
        }
    }

    /// A core looks for work where its queueing policy says; with none, it spins (or parks, if
    /// a policy asked it to yield).
    #[inline(always)]
    pub fn find_work(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Idle {
        if self.q.cores[core as usize].yield_requested {
            self.park(core, now);
            return Idle::Yielded;
        }
        if self.probe.is_some() {
            return self.find_work_probed(core, now, slab, evq);
        }
        if self.per_request {
            self.policy.clock(now);
        }
        // A loop, not recursion: each request taken may block or yield at once.
        loop {
            match self.policy.next(core, &self.q) {
                Next::Run(place) => {
                    let r = self.q.pop(place).expect("the policy saw work there");
                    if self.start(core, r, now, slab, evq) {
                        if self.pushes {
                            self.push_shared(now, slab, evq);
                        }
                        return Idle::Working;
                    }
                }
                Next::Steal(victim) => {
                    self.steal_from(core, victim, now, slab, evq);
                    return Idle::Working;
                }
                Next::Idle => break,
            }
        }
        let c = &mut self.q.cores[core as usize];
        if c.mode != CoreMode::Search {
            c.set_mode(CoreMode::Search, now, &mut self.q.ledger);
        }
        self.q.spinners.insert(core);
        Idle::Spinning
    }

    /// A core took work, so a slot may have freed: the dispatcher pushes shared-queue work to
    /// the cores the policy names (JBSQ's `dispatch_requests`).
    fn push_shared(&mut self, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        while !self.q.shared.is_empty() {
            let Some(c) = self.policy.push_target(&self.q) else { break };
            let r = self.q.pop(Place::Shared).expect("non-empty");
            self.make_runnable(r, Place::Core(c), now, slab, evq);
        }
    }

    fn end_steal(&mut self, core: u16) {
        let c = &mut self.q.cores[core as usize];
        c.stealing = false;
        if !c.queue.is_empty() {
            self.q.victims.insert(core);
        }
    }

    /// A steal finished: run what was taken.
    pub fn steal_done(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Idle {
        self.end_steal(core);
        self.stealable_again(core, now, evq);
        if self.run_own(core, now, slab, evq) {
            Idle::Working
        } else {
            self.find_work(core, now, slab, evq)
        }
    }

    /// Parks an idle core: it goes to the best-effort co-tenant.
    pub fn park(&mut self, core: u16, now: Nanos) {
        self.q.spinners.remove(core);
        self.q.active.remove(core);
        let c = &mut self.q.cores[core as usize];
        debug_assert!(c.current == NONE);
        c.yield_requested = false;
        c.park_attempting = false;
        c.epoch = c.epoch.wrapping_add(1);
        c.set_mode(CoreMode::Parked, now, &mut self.q.ledger);
    }

    /// Grants one parked core (preferring one with queued work, else the lowest index); it can
    /// run work after the allocation delay. Returns it, or None if every core is allocated.
    pub fn grant(&mut self, now: Nanos, evq: &mut EventQueue) -> Option<u16> {
        self.grant_after(now, self.cfg.alloc_delay, evq)
    }

    /// [`Server::grant`] with the allocation delay the allocator's own mechanism sets.
    pub fn grant_after(&mut self, now: Nanos, alloc_delay: Nanos, evq: &mut EventQueue) -> Option<u16> {
        let q = &mut self.q;
        let with_work = q.nonempty.items.iter().copied().filter(|&c| q.cores[c as usize].mode == CoreMode::Parked).min();
        let pick = with_work.or_else(|| q.ledger.lowest_parked())?;
        q.cores[pick as usize].set_mode(CoreMode::Waking, now, &mut q.ledger);
        evq.push(now + alloc_delay, Event::WakeDone { node: self.node, core: pick });
        Some(pick)
    }

    /// A granted core is ready.
    pub fn wake_done(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Idle {
        self.q.cores[core as usize].set_mode(CoreMode::Search, now, &mut self.q.ledger);
        self.q.active.insert(core);
        self.find_work(core, now, slab, evq)
    }

    /// Asks an active core to park: at once if it is idle, else when it next runs out of work.
    pub fn request_yield(&mut self, core: u16, now: Nanos) {
        if self.q.spinners.contains(core) {
            self.park(core, now);
        } else if self.q.cores[core as usize].is_active() {
            self.q.cores[core as usize].yield_requested = true;
            self.yields_asked.push(core);
        }
    }

    /// The core's park attempt was refused for now; it keeps polling.
    pub fn mark_park_attempt(&mut self, core: u16) {
        self.q.cores[core as usize].park_attempting = true;
    }

    pub fn withdraw_yield_requests(&mut self) {
        for c in self.yields_asked.drain(..) {
            self.q.cores[c as usize].yield_requested = false;
        }
    }

    /// Enqueue time of the oldest waiting request, per core (the shared queue is reported on
    /// core 0, as one queue of the server).
    fn oldest(&self, core: usize, slab: &Slab) -> Option<Nanos> {
        let own = self.q.cores[core].queue.front().map(|&r| slab[r].enqueued_at);
        if core == 0 {
            if let Some(&r) = self.q.shared.front() {
                let t = slab[r].enqueued_at;
                return Some(own.map_or(t, |o| o.min(t)));
            }
        }
        own
    }

    /// The congestion signal: max over queues (the dispatcher's included) of the oldest
    /// waiting request's age.
    pub fn max_delay(&self, now: Nanos, slab: &Slab) -> Nanos {
        // The age of the oldest queued request anywhere: overload controllers read it on
        // every arrival, so a plain loop over the non-empty queues' heads.
        let q = &self.q;
        let mut oldest = Nanos::MAX;
        for &c in &q.nonempty.items {
            if let Some(&r) = q.cores[c as usize].queue.front() {
                oldest = oldest.min(slab[r].enqueued_at);
            }
        }
        if let Some(&r) = q.shared.front() {
            oldest = oldest.min(slab[r].enqueued_at);
        }
        if let Some(r) = self.dispatcher.as_ref().and_then(|d| d.oldest()) {
            oldest = oldest.min(slab[r].enqueued_at);
        }
        if oldest == Nanos::MAX {
            0
        } else {
            now - oldest
        }
    }

    /// Requests waiting in any queue, the dispatcher's included.
    pub fn queued_total(&self) -> u64 {
        self.q.queued + self.dispatcher.as_ref().map_or(0, |d| d.queued() as u64)
    }

    /// The cores with waiting requests: a non-empty queue of their own, or core 0 when the
    /// shared queue holds some (it is reported there, as one queue of the server).
    fn queued_cores(&self) -> impl Iterator<Item = u16> + '_ {
        let q = &self.q;
        let shared_only = !q.shared.is_empty() && !q.nonempty.contains(0);
        q.nonempty.items.iter().copied().chain(shared_only.then_some(0))
    }

    /// What a core allocator sees now.
    pub fn alloc_view<'a>(&'a self, now: Nanos, slab: &'a Slab) -> TickView<'a> {
        TickView { server: self, slab, now }
    }

    /// The allocator ticked at `now`: from here on, changes to a core save what it saw.
    pub fn mark_tick(&mut self, now: Nanos) {
        self.q.ledger.tick = self.q.ledger.tick.wrapping_add(1);
        self.q.ledger.tick_at = now;
    }

    /// The idle core with the lowest index, if any.
    pub fn first_spinner(&self) -> Option<u16> {
        self.q.spinners.items.iter().copied().min()
    }

    /// Sum over cores (the dispatcher's included) of (busy, search, parked, transition,
    /// overhead) up to `now`.
    pub fn core_times(&self, now: Nanos) -> [Nanos; 5] {
        let mut acc = self.q.ledger.times_at(now);
        if let Some(d) = &self.dispatcher {
            let (busy, search) = d.times_at(now);
            acc[0] += busy;
            acc[1] += search;
        }
        acc
    }
}

/// The server as a core allocator sees it: built from the live state at each call, so that only
/// the cores the policy looks at cost anything.
pub struct TickView<'a> {
    server: &'a Server,
    slab: &'a Slab,
    now: Nanos,
}

impl TickView<'_> {
    fn obs(&self, i: u16) -> CoreObs {
        let q = &self.server.q;
        let c = &q.cores[i as usize];
        let (busy_ns, search_ns) = busy_search(&c.times_at(self.now));
        let queued = (c.queue.len() + if i == 0 { q.shared.len() } else { 0 }) as u32;
        CoreObs {
            state: core_state(c.mode),
            queued,
            oldest_enqueued_at: self.server.oldest(i as usize, self.slab),
            enqueued_total: c.enqueued_total,
            dequeued_total: c.dequeued_total,
            busy_ns,
            search_ns,
        }
    }
}

impl AllocView for TickView<'_> {
    fn now(&self) -> Nanos {
        self.now
    }
    fn active(&self) -> usize {
        self.server.q.active.len()
    }
    fn waking(&self) -> usize {
        self.server.q.ledger.in_mode[CoreMode::Waking as usize] as usize
    }
    fn parked(&self) -> usize {
        self.server.q.ledger.in_mode[CoreMode::Parked as usize] as usize
    }
    fn busy_search_totals(&self) -> (Nanos, Nanos) {
        busy_search(&self.server.q.ledger.times_at(self.now))
    }
    // These two read only what they need of each core with queued work, not its whole
    // observation: they run at every tick.
    fn max_delay(&self) -> Nanos {
        self.server.max_delay(self.now, self.slab)
    }
    fn parked_with_work(&self) -> bool {
        let cores = &self.server.q.cores;
        self.server.queued_cores().any(|i| cores[i as usize].mode == CoreMode::Parked)
    }
    fn for_each_idle(&self, f: &mut dyn FnMut(CoreId)) {
        for &i in &self.server.q.spinners.items {
            f(i);
        }
    }
    fn for_each_queued(&self, f: &mut dyn FnMut(CoreId, &CoreObs)) {
        for i in self.server.queued_cores() {
            f(i, &self.obs(i));
        }
    }
    fn for_each_active(&self, f: &mut dyn FnMut(CoreId, &CoreObs)) {
        for &i in &self.server.q.active.items {
            f(i, &self.obs(i));
        }
    }
    // Every revoke visits every active core: only what the choice reads, and a core unchanged
    // since the tick has run its present mode all along.
    fn for_each_active_load(&self, f: &mut dyn FnMut(CoreId, CoreLoad)) {
        let (q, now) = (&self.server.q, self.now);
        let l = &q.ledger;
        for &i in &q.active.items {
            let c = &q.cores[i as usize];
            let queued = (c.queue.len() + if i == 0 { q.shared.len() } else { 0 }) as u32;
            let delay = match queued {
                0 => 0,
                _ => self.server.oldest(i as usize, self.slab).map_or(0, |t| now.saturating_sub(t)),
            };
            let busy = if c.at_tick.tick == l.tick {
                busy_search(&c.times_at(now)).0.saturating_sub(c.at_tick.busy)
            } else if matches!(c.mode, CoreMode::Busy | CoreMode::Overhead) {
                now - l.tick_at
            } else {
                0
            };
            f(i, CoreLoad { delay, queued, busy });
        }
    }
    fn prev(&self, core: CoreId) -> CoreObs {
        let q = &self.server.q;
        let c = &q.cores[core as usize];
        let t = if c.at_tick.tick == q.ledger.tick { c.at_tick } else { c.seen_at_tick(&q.ledger) };
        CoreObs {
            state: core_state(t.mode),
            enqueued_total: t.enqueued_total,
            busy_ns: t.busy,
            search_ns: t.search,
            ..CoreObs::new(core_state(t.mode))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use microsched_core::sched::cfcfs::CentralFcfs;

    fn one_core() -> Server {
        let preemption = Preemption { quantum: Nanos::MAX, ..Preemption::default() };
        let cfg = ServerCfg { max_cores: 1, dispatcher: None, steal_cost: 0, packet_cost: 0, alloc_delay: 0, preemption };
        Server::new(0, cfg, 1, Box::new(CentralFcfs), vec![])
    }

    #[test]
    fn a_cancelled_slice_end_never_acts_on_the_next_request() {
        let (mut s, mut slab, mut evq) = (one_core(), Slab::default(), EventQueue::with_capacity(8));
        let a = slab.insert(Req { service: 1000, ..Req::default() }, 0);
        let b = slab.insert(Req { service: 300, ..Req::default() }, 1);
        s.arrive(a, 0, &mut slab, &mut evq);
        s.arrive(b, 100, &mut slab, &mut evq);
        // A is preempted at 400 with 600 ns left; B (queued since 100) runs next.
        assert_eq!(s.preempt_now(0, 400, &mut slab, &mut evq), SliceEnd::Freed);
        assert_eq!(s.find_work(0, 400, &mut slab, &mut evq), Idle::Working);
        assert_eq!(s.core(0).current, b);
        let mut finished = vec![];
        while let Some((t, ev)) = evq.pop() {
            let Event::CoreDone { core, gen, .. } = ev else { panic!("{ev:?}") };
            match s.slice_end(core, gen, t, &mut slab, &mut evq) {
                SliceEnd::Finished(r) => {
                    finished.push((r, t));
                    s.find_work(core, t, &mut slab, &mut evq);
                }
                SliceEnd::Stale => assert_eq!(t, 1000, "only A's cancelled slice end is stale"),
                other => panic!("{other:?} at {t}"),
            }
        }
        assert_eq!(finished, vec![(b, 700), (a, 1300)]);
        // A queued from 400 to 700 after its preemption; B from 100 to 400.
        assert_eq!((slab[a].queued_ns, slab[b].queued_ns), (300, 300));
        assert_eq!(s.counters.preemptions, 1);
    }

    /// The view's aggregates and tick snapshots against a full pass over the cores, through
    /// arrivals, steals, grants, wake-ups, yields and parks at random.
    #[test]
    fn the_tick_view_agrees_with_a_scan_of_every_core() {
        use microsched_core::alloc::SliceView;
        use microsched_core::rng::stream;
        use microsched_core::sched::dfcfs::DistributedFcfs;
        use rand::Rng;

        let n = 6;
        let preemption = Preemption { quantum: Nanos::MAX, ..Preemption::default() };
        let cfg = ServerCfg { max_cores: n, dispatcher: None, steal_cost: 50, packet_cost: 0, alloc_delay: 300, preemption };
        let mut s = Server::new(0, cfg, 2, Box::new(DistributedFcfs::new(true, stream(1, "steal"))), vec![]);
        let (mut slab, mut evq, mut rng) = (Slab::default(), EventQueue::with_capacity(64), stream(1, "test"));
        let mut prev: Vec<CoreObs> = (0..n as u16).map(|i| s.alloc_view(0, &slab).obs(i)).collect();
        evq.push(0, Event::Generate { app: 0 });
        evq.push(1_000, Event::AllocTick { node: 0 });
        let (mut ticks, mut saw_queued) = (0, false);
        while let Some((t, ev)) = evq.pop() {
            match ev {
                Event::Generate { .. } if t < 400_000 => {
                    let req = slab.insert(Req { service: rng.gen_range(100..3_000), flow: rng.gen(), ..Req::default() }, 0);
                    s.arrive(req, t, &mut slab, &mut evq);
                    evq.push(t + rng.gen_range(0..700), Event::Generate { app: 0 });
                }
                Event::CoreDone { core, gen, .. } => {
                    if let SliceEnd::Finished(r) = s.slice_end(core, gen, t, &mut slab, &mut evq) {
                        slab.remove(r);
                        s.find_work(core, t, &mut slab, &mut evq);
                    }
                }
                Event::StealDone { core, .. } => {
                    s.steal_done(core, t, &mut slab, &mut evq);
                }
                Event::WakeDone { core, .. } => {
                    s.wake_done(core, t, &mut slab, &mut evq);
                }
                Event::AllocTick { .. } if t < 400_000 => {
                    let view = s.alloc_view(t, &slab);
                    let cores: Vec<CoreObs> = (0..n as u16).map(|i| view.obs(i)).collect();
                    let scan = SliceView { now: t, cores: &cores, prev: &prev };
                    let state = |v: &dyn AllocView| {
                        let (mut queued, mut active, mut loads) = (vec![], vec![], vec![]);
                        v.for_each_queued(&mut |i, c| queued.push((i, *c)));
                        v.for_each_active(&mut |i, c| active.push((i, *c)));
                        v.for_each_active_load(&mut |i, l| loads.push((i, l)));
                        queued.sort_by_key(|e| e.0);
                        active.sort_by_key(|e| e.0);
                        loads.sort_by_key(|e| e.0);
                        let prev: Vec<_> = (0..n as u16)
                            .map(|i| v.prev(i))
                            .map(|p| (p.state, p.enqueued_total, p.busy_ns, p.search_ns))
                            .collect();
                        let counts = (v.active(), v.waking(), v.parked(), v.busy_search_totals());
                        (counts, v.max_delay(), v.parked_with_work(), queued, active, loads, prev)
                    };
                    assert_eq!(state(&view), state(&scan), "at {t}");
                    assert_eq!(s.max_delay(t, &slab), scan.max_delay());
                    let times = (0..n).fold([0; 5], |acc, i| {
                        let c = s.core(i as u16).times_at(t);
                        std::array::from_fn(|m| acc[m] + c[m])
                    });
                    assert_eq!(s.core_times(t), times);
                    saw_queued |= !state(&scan).3.is_empty();
                    s.mark_tick(t);
                    prev = cores;
                    ticks += 1;
                    s.withdraw_yield_requests();
                    match rng.gen_range(0..4) {
                        0 => {
                            s.grant(t, &mut evq);
                        }
                        1 if s.active_count() > 1 => s.request_yield(s.q.active.items[0], t),
                        2 if s.active_count() > 1 => {
                            if let Some(c) = s.first_spinner() {
                                s.park(c, t);
                            }
                        }
                        _ => {}
                    }
                    evq.push(t + rng.gen_range(500..1_500), Event::AllocTick { node: 0 });
                }
                _ => {}
            }
        }
        assert!(ticks > 200 && saw_queued, "{ticks} ticks");
    }

    /// A server of `workers` worker cores and a 100 ns dispatcher with the scenario's
    /// `[policy.sched]` (2 µs quantum, costless preemption), fed random arrivals of 0.3–8 µs
    /// (a share `long` of 40 µs) at `load` (of the workers); `check` runs after every event.
    /// Returns how many requests finished on workers and on the dispatcher, and the latter's
    /// service.
    fn drive(workers: usize, load: f64, long: f64, sched: &str, mut check: impl FnMut(&Server, &Slab)) -> (u64, u64, Nanos) {
        use microsched_core::rng::stream;
        use microsched_core::scenario::{Format, Scenario};
        use rand::Rng;

        let toml = format!(
            "duration_ms = 10\n[load]\nfraction = 0.5\n[server]\nmax_cores = {}\n[server.dispatcher]\ncost_ns = 100\n[server.preemption]\nquantum_us = 2\n\
             [[workload.types]]\nname = \"t\"\nservice = {{ dist = \"constant\", value_us = 1 }}\n\
             [policy.allocator]\nkind = \"static\"\n[policy.sched]\n{sched}\n",
            workers + 1
        );
        let sc = Scenario::load(&toml, Format::Toml, std::path::Path::new("."), &[]).expect("valid").scenario;
        let cfg = ServerCfg {
            max_cores: workers,
            dispatcher: Some(100),
            steal_cost: 0,
            packet_cost: 0,
            alloc_delay: 0,
            preemption: sc.server.preemption.build(),
        };
        let mut s = Server::new(0, cfg, workers, microsched_core::sched::build(&sc, 1), vec![]);
        let (mut slab, mut evq, mut rng) = (Slab::default(), EventQueue::with_capacity(64), stream(1, "test"));
        evq.push(0, Event::Generate { app: 0 });
        let (mut on_workers, mut on_dispatcher, mut generated, mut dispatcher_ns) = (0, 0, 0, 0);
        let mean = (1.0 - long) * 4_150.0 + long * 40_000.0;
        let gap = (mean / workers as f64 / load) as u64;
        while let Some((t, ev)) = evq.pop() {
            match ev {
                Event::Generate { .. } if t < 2_000_000 => {
                    let service = if rng.gen_bool(long) { 40_000 } else { rng.gen_range(300..8_000) };
                    let req = slab.insert(Req { service, ..Req::default() }, generated);
                    generated += 1;
                    s.arrive(req, t, &mut slab, &mut evq);
                    evq.push(t + rng.gen_range(0..2 * gap), Event::Generate { app: 0 });
                }
                Event::DispatchDone { .. } => s.dispatch_done(t, &mut slab, &mut evq),
                Event::DispatcherWork { gen, .. } => {
                    if let Some(r) = s.dispatcher_work(gen, t, &mut slab, &mut evq) {
                        dispatcher_ns += slab.remove(r).service;
                        on_dispatcher += 1;
                    }
                }
                Event::CoreDone { core, gen, .. } | Event::OverheadDone { core, gen, .. } => {
                    let end = if matches!(ev, Event::CoreDone { .. }) {
                        s.slice_end(core, gen, t, &mut slab, &mut evq)
                    } else {
                        s.overhead_done(core, gen, t, &mut slab, &mut evq)
                    };
                    match end {
                        SliceEnd::Finished(r) => {
                            slab.remove(r);
                            on_workers += 1;
                            s.find_work(core, t, &mut slab, &mut evq);
                        }
                        SliceEnd::Freed => {
                            s.find_work(core, t, &mut slab, &mut evq);
                        }
                        _ => {}
                    }
                }
                _ => {}
            }
            check(&s, &slab);
        }
        assert_eq!(on_workers + on_dispatcher, generated, "every request finishes once");
        assert_eq!(slab.live(), 0);
        assert_eq!((s.counters.dispatcher_requests, s.counters.dispatcher_work_ns), (on_dispatcher, dispatcher_ns));
        (on_workers, on_dispatcher, dispatcher_ns)
    }

    #[test]
    fn concord_never_exceeds_its_jbsq_bound_and_its_dispatcher_works_in_its_slack() {
        for k in [1usize, 2, 3] {
            let mut full_seen = false;
            let (workers, dispatcher, _) = drive(4, 0.95, 0.05, &format!("kind = \"concord\"\njbsq = {k}"), |s, _| {
                let occupancy = |c: &Core| c.queue.len() + (c.current != NONE) as usize;
                for c in &s.q.cores {
                    assert!(occupancy(c) <= k, "core {} holds {} > JBSQ({k})", c.id, occupancy(c));
                }
                // Central work waits only while every mailbox is full (the dispatcher pushes
                // as soon as a slot frees).
                if !s.q.shared.is_empty() {
                    full_seen = true;
                    for c in &s.q.cores {
                        assert_eq!(occupancy(c), k, "core {} has a free slot while {} wait centrally", c.id, s.q.shared.len());
                    }
                }
            });
            assert!(full_seen, "JBSQ({k}): the central queue never held work");
            assert!(dispatcher > 0 && workers > 1000, "JBSQ({k}): {dispatcher} on the dispatcher, {workers} on workers");
        }
        // Without its slack work the dispatcher runs nothing.
        let (_, dispatcher, _) = drive(4, 0.95, 0.05, "kind = \"concord\"\ndispatcher_work = false", |_, _| {});
        assert_eq!(dispatcher, 0);
    }

    #[test]
    fn tiny_quanta_never_serves_more_than_its_coroutines_on_a_worker() {
        for cap in [8, 3] {
            let mut most = 0;
            drive(3, 1.05, 0.5, &format!("kind = \"tiny_quanta\"\ncoroutines = {cap}"), |s, slab| {
                for c in &s.q.cores {
                    // Requests on this worker that hold a coroutine and have run: its busy list
                    // and the one it runs (none migrates).
                    let busy = s.q.classes.get(c.id as usize).map_or(0, |q| q.len()) + (c.current != NONE) as usize;
                    assert!(busy <= cap, "worker {} time-slices {busy} requests", c.id);
                    assert!(c.queue.iter().all(|&r| !slab[r].started), "a started request back in the ring");
                    most = most.max(busy);
                }
            });
            assert_eq!(most, cap, "the cap never bound");
        }
    }
}
