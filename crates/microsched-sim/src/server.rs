//! The server mechanism: cores, their queues, dispatch, work stealing, parking and the exact
//! accounting of core time. Policy (when to grant or park a core) is decided elsewhere; this
//! module only carries decisions out.

use std::collections::VecDeque;

use microsched_core::alloc::{CoreObs, CoreState};
use microsched_core::scenario::QueueMode;
use microsched_core::Nanos;
use rand::Rng;

use crate::events::{Event, EventQueue};
use crate::requests::Slab;
use microsched_core::rng::{hash, Stream};

const NONE: u32 = u32::MAX;

/// What a core is doing. Busy and Search make up the LC allocation; the best-effort co-tenant
/// gets Parked time; Waking is the allocation delay, counted apart so that the four add up to
/// cores × time exactly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CoreMode {
    Busy,
    Search,
    Parked,
    Waking,
}

#[derive(Debug, Clone)]
pub struct Core {
    pub mode: CoreMode,
    since: Nanos,
    pub queue: VecDeque<u32>,
    pub enqueued_total: u64,
    pub dequeued_total: u64,
    pub busy_ns: Nanos,
    pub search_ns: Nanos,
    pub parked_ns: Nanos,
    pub transition_ns: Nanos,
    /// Request being run, or NONE.
    pub current: u32,
    /// Bumped whenever the core leaves the idle-spinning state, to invalidate its park timer.
    pub epoch: u32,
    /// A proactive policy asked this core to park at its next idle point.
    pub yield_requested: bool,
    /// Mid-steal: what it took is in its queue but already claimed, so no one steals it back.
    stealing: bool,
    /// Asked to park and told to keep polling (CoreSync): finding work must be reported.
    park_attempting: bool,
}

impl Core {
    fn new(mode: CoreMode) -> Self {
        Self {
            mode,
            since: 0,
            queue: VecDeque::new(),
            enqueued_total: 0,
            dequeued_total: 0,
            busy_ns: 0,
            search_ns: 0,
            parked_ns: 0,
            transition_ns: 0,
            current: NONE,
            epoch: 0,
            yield_requested: false,
            stealing: false,
            park_attempting: false,
        }
    }

    #[inline]
    fn set_mode(&mut self, mode: CoreMode, now: Nanos) {
        let dt = now - self.since;
        match self.mode {
            CoreMode::Busy => self.busy_ns += dt,
            CoreMode::Search => self.search_ns += dt,
            CoreMode::Parked => self.parked_ns += dt,
            CoreMode::Waking => self.transition_ns += dt,
        }
        self.mode = mode;
        self.since = now;
    }

    /// (busy, search, parked, transition) up to `now`, the current stretch included.
    pub fn times_at(&self, now: Nanos) -> [Nanos; 4] {
        let mut t = [self.busy_ns, self.search_ns, self.parked_ns, self.transition_ns];
        let i = match self.mode {
            CoreMode::Busy => 0,
            CoreMode::Search => 1,
            CoreMode::Parked => 2,
            CoreMode::Waking => 3,
        };
        t[i] += now - self.since;
        t
    }

    pub fn is_active(&self) -> bool {
        matches!(self.mode, CoreMode::Busy | CoreMode::Search)
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
    #[inline]
    fn insert(&mut self, c: u16) {
        if self.pos[c as usize] == NONE {
            self.pos[c as usize] = self.items.len() as u32;
            self.items.push(c);
        }
    }
    #[inline]
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
    #[inline]
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
    pub max_cores: usize,
    pub mode: QueueMode,
    pub steal: bool,
    pub steal_cost: Nanos,
    pub packet_cost: Nanos,
    pub alloc_delay: Nanos,
}

#[derive(Debug)]
pub struct Server {
    cfg: ServerCfg,
    pub cores: Vec<Core>,
    central: VecDeque<u32>,
    /// Active cores with nothing to do, polling: the first to hear of new work.
    spinners: CoreSet,
    /// Active cores (busy or searching), for steering packets away from parked cores.
    active: CoreSet,
    /// Cores a thief may steal from: a non-empty queue and not mid-steal themselves.
    victims: CoreSet,
    /// Requests waiting in any queue.
    pub queued: u64,
    /// Cores that found work in the middle of a park attempt, for the driver to report.
    pub aborted_parks: Vec<u16>,
    steal_rng: Stream,
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

impl Server {
    pub fn new(cfg: ServerCfg, initially_active: usize, steal_rng: Stream) -> Self {
        let n = cfg.max_cores;
        let mut cores = Vec::with_capacity(n);
        let mut spinners = CoreSet::new(n);
        let mut active = CoreSet::new(n);
        for c in 0..n {
            if c < initially_active {
                cores.push(Core::new(CoreMode::Search));
                active.insert(c as u16);
                spinners.insert(c as u16);
            } else {
                cores.push(Core::new(CoreMode::Parked));
            }
        }
        let victims = CoreSet::new(n);
        Self {
            cfg,
            cores,
            central: VecDeque::new(),
            spinners,
            active,
            victims,
            queued: 0,
            aborted_parks: Vec::new(),
            steal_rng,
        }
    }

    pub fn active_count(&self) -> usize {
        self.active.len()
    }

    pub fn is_spinning(&self, core: u16) -> bool {
        self.spinners.contains(core)
    }

    /// The core RSS steers `session`'s packets to: its hashed home if that core is active, else
    /// an active core chosen by the same hash (the IOKernel steers away from parked cores).
    #[inline]
    fn steer(&self, session: u32) -> u16 {
        let h = hash(session as u64);
        let home = (h % self.cfg.max_cores as u64) as u16;
        if self.cores[home as usize].is_active() || self.active.len() == 0 {
            home
        } else {
            self.active.items[(h % self.active.len() as u64) as usize]
        }
    }

    /// A request packet arrives at the server.
    pub fn arrive(&mut self, req: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        slab[req].arrive = now;
        match self.cfg.mode {
            QueueMode::Central => {
                if let Some(c) = self.spinners.pop() {
                    self.start(c, req, now, slab, evq);
                } else {
                    self.central.push_back(req);
                    self.queued += 1;
                }
            }
            QueueMode::PerCore => {
                let home = self.steer(slab[req].session);
                if self.spinners.remove(home) {
                    self.start(home, req, now, slab, evq);
                    return;
                }
                let core = &mut self.cores[home as usize];
                core.queue.push_back(req);
                core.enqueued_total += 1;
                if !core.stealing {
                    self.victims.insert(home);
                }
                self.queued += 1;
                // A spinning core notices the queued work on its next steal pass; the pass is
                // modelled as instantaneous, the steal itself costs `steal_cost`.
                if self.cfg.steal {
                    if let Some(thief) = self.spinners.pop() {
                        self.steal_from(thief, home, now, slab, evq);
                    }
                }
            }
        }
    }

    #[inline]
    fn start(&mut self, core: u16, req: u32, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        let c = &mut self.cores[core as usize];
        if c.park_attempting {
            c.park_attempting = false;
            self.aborted_parks.push(core);
        }
        c.epoch = c.epoch.wrapping_add(1);
        c.set_mode(CoreMode::Busy, now);
        c.current = req;
        let r = &mut slab[req];
        r.start = now;
        evq.push(now + self.cfg.packet_cost + r.service, Event::CoreDone { core });
    }

    /// The core finished its request; returns it.
    pub fn finish(&mut self, core: u16) -> u32 {
        let c = &mut self.cores[core as usize];
        let req = c.current;
        c.current = NONE;
        req
    }

    /// Moves the older half (rounded up) of `victim`'s queue to `thief` and has the thief run it
    /// after the steal cost.
    fn steal_from(&mut self, thief: u16, victim: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        let take = self.cores[victim as usize].queue.len().div_ceil(2);
        debug_assert!(take > 0 && self.cores[thief as usize].queue.is_empty());
        for _ in 0..take {
            let r = self.cores[victim as usize].queue.pop_front().expect("counted");
            self.cores[thief as usize].queue.push_back(r);
        }
        self.cores[victim as usize].dequeued_total += take as u64;
        if self.cores[victim as usize].queue.is_empty() {
            self.victims.remove(victim);
        }
        let t = &mut self.cores[thief as usize];
        t.enqueued_total += take as u64;
        t.epoch = t.epoch.wrapping_add(1);
        t.set_mode(CoreMode::Search, now);
        t.stealing = true;
        self.victims.remove(thief);
        if self.cfg.steal_cost == 0 {
            self.end_steal(thief);
            self.run_own(thief, now, slab, evq);
        } else {
            evq.push(now + self.cfg.steal_cost, Event::StealDone { core: thief });
        }
    }

    /// Runs the head of the core's own queue; false if it is empty.
    fn run_own(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> bool {
        let c = &mut self.cores[core as usize];
        match c.queue.pop_front() {
            Some(r) => {
                c.dequeued_total += 1;
                if c.queue.is_empty() {
                    self.victims.remove(core);
                }
                self.queued -= 1;
                self.start(core, r, now, slab, evq);
                true
            }
            None => false,
        }
    }

    /// A core looks for work: its own queue (or the central one), then a victim to steal from;
    /// with none, it spins (or parks, if a policy asked it to yield).
    pub fn find_work(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Idle {
        if self.cores[core as usize].yield_requested {
            self.park(core, now);
            return Idle::Yielded;
        }
        match self.cfg.mode {
            QueueMode::Central => {
                if let Some(r) = self.central.pop_front() {
                    self.queued -= 1;
                    self.start(core, r, now, slab, evq);
                    return Idle::Working;
                }
            }
            QueueMode::PerCore => {
                if self.run_own(core, now, slab, evq) {
                    return Idle::Working;
                }
                if self.cfg.steal && self.queued > 0 {
                    if let Some(victim) = self.pick_victim(core) {
                        self.steal_from(core, victim, now, slab, evq);
                        return Idle::Working;
                    }
                }
            }
        }
        let c = &mut self.cores[core as usize];
        if c.mode != CoreMode::Search {
            c.set_mode(CoreMode::Search, now);
        }
        self.spinners.insert(core);
        Idle::Spinning
    }

    /// A random core with stealable work, as Caladan's steal loop (which scans from a random
    /// start) finds one. The thief's own queue is empty, so it is never its own victim.
    fn pick_victim(&mut self, thief: u16) -> Option<u16> {
        let n = self.victims.len();
        if n == 0 {
            return None;
        }
        let v = self.victims.items[self.steal_rng.gen_range(0..n)];
        debug_assert!(v != thief);
        Some(v)
    }

    fn end_steal(&mut self, core: u16) {
        let c = &mut self.cores[core as usize];
        c.stealing = false;
        if !c.queue.is_empty() {
            self.victims.insert(core);
        }
    }

    /// A steal finished: run what was taken.
    pub fn steal_done(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Idle {
        self.end_steal(core);
        if self.run_own(core, now, slab, evq) {
            Idle::Working
        } else {
            self.find_work(core, now, slab, evq)
        }
    }

    /// Parks an idle core: it goes to the best-effort co-tenant.
    pub fn park(&mut self, core: u16, now: Nanos) {
        self.spinners.remove(core);
        self.active.remove(core);
        let c = &mut self.cores[core as usize];
        debug_assert!(c.current == NONE);
        c.yield_requested = false;
        c.park_attempting = false;
        c.epoch = c.epoch.wrapping_add(1);
        c.set_mode(CoreMode::Parked, now);
    }

    /// Grants one parked core (preferring one with queued work, else the lowest index); it can
    /// run work after the allocation delay. Returns it, or None if every core is allocated.
    pub fn grant(&mut self, now: Nanos, evq: &mut EventQueue) -> Option<u16> {
        let pick = self
            .cores
            .iter()
            .position(|c| c.mode == CoreMode::Parked && !c.queue.is_empty())
            .or_else(|| self.cores.iter().position(|c| c.mode == CoreMode::Parked))? as u16;
        self.cores[pick as usize].set_mode(CoreMode::Waking, now);
        evq.push(now + self.cfg.alloc_delay, Event::WakeDone { core: pick });
        Some(pick)
    }

    /// A granted core is ready.
    pub fn wake_done(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> Idle {
        let c = &mut self.cores[core as usize];
        c.set_mode(CoreMode::Search, now);
        self.active.insert(core);
        self.find_work(core, now, slab, evq)
    }

    /// Asks an active core to park: at once if it is idle, else when it next runs out of work.
    pub fn request_yield(&mut self, core: u16, now: Nanos) {
        if self.spinners.contains(core) {
            self.park(core, now);
        } else if self.cores[core as usize].is_active() {
            self.cores[core as usize].yield_requested = true;
        }
    }

    /// The core's park attempt was refused for now; it keeps polling.
    pub fn mark_park_attempt(&mut self, core: u16) {
        self.cores[core as usize].park_attempting = true;
    }

    pub fn withdraw_yield_requests(&mut self) {
        for c in &mut self.cores {
            c.yield_requested = false;
        }
    }

    /// Oldest waiting request's server arrival time, per core (central queue: reported on core 0).
    fn oldest(&self, core: usize, slab: &Slab) -> Option<Nanos> {
        match self.cfg.mode {
            QueueMode::Central if core == 0 => self.central.front().map(|&r| slab[r].arrive),
            QueueMode::Central => None,
            QueueMode::PerCore => self.cores[core].queue.front().map(|&r| slab[r].arrive),
        }
    }

    /// The congestion signal: max over cores of the oldest waiting request's age.
    pub fn max_delay(&self, now: Nanos, slab: &Slab) -> Nanos {
        (0..self.cores.len()).filter_map(|c| self.oldest(c, slab)).map(|t| now - t).max().unwrap_or(0)
    }

    /// Fills `out` with what a core allocator sees.
    pub fn observe(&self, now: Nanos, slab: &Slab, out: &mut Vec<CoreObs>) {
        out.clear();
        for (i, c) in self.cores.iter().enumerate() {
            let [busy, search, _, _] = c.times_at(now);
            let queued = match self.cfg.mode {
                QueueMode::Central if i == 0 => self.central.len(),
                QueueMode::Central => 0,
                QueueMode::PerCore => c.queue.len(),
            } as u32;
            out.push(CoreObs {
                state: match c.mode {
                    CoreMode::Busy | CoreMode::Search => CoreState::Active,
                    CoreMode::Parked => CoreState::Parked,
                    CoreMode::Waking => CoreState::Waking,
                },
                queued,
                oldest_enqueued_at: self.oldest(i, slab),
                enqueued_total: c.enqueued_total,
                dequeued_total: c.dequeued_total,
                busy_ns: busy,
                search_ns: search,
            });
        }
    }

    /// Sum over cores of (busy, search, parked, transition) up to `now`.
    pub fn core_times(&self, now: Nanos) -> [Nanos; 4] {
        let mut acc = [0; 4];
        for c in &self.cores {
            for (a, v) in acc.iter_mut().zip(c.times_at(now)) {
                *a += v;
            }
        }
        acc
    }

}
