//! The server mechanism: cores, their queues, running requests slice by slice (preemption at a
//! quantum, blocking and spinning mutexes, yield points), work stealing, parking and the exact
//! accounting of core time. Policy is decided elsewhere: where work queues and where an idle
//! core looks is a [`QueuePolicy`]; when to grant or park a core is the core allocator's. This
//! module only carries decisions out.

use std::collections::VecDeque;

use microsched_core::program::Op;
use microsched_core::sched::mutex::MutexTable;
use microsched_core::sched::preemption::Preemption;
use microsched_core::sched::{Place, QueuePolicy, Requeue};
use microsched_core::Nanos;

use crate::dispatcher::Dispatcher;
use crate::events::{Event, EventQueue};
use crate::requests::{Req, Slab};

use cores::{AfterOverhead, CoreSet, Ledger};
use locks::Droppable;

pub use cores::{Core, CoreMode};
pub use condvars::CondvarState;
pub use locks::LockDropState;
pub use queues::Queues;
pub use timeshare::Timesharing;

mod cores;
mod dispatch;
mod handlers;
mod condvars;
mod locks;
mod packet_irq;
mod park;
mod preemption;
mod queues;
mod search;
mod steal;
mod surface;
mod timeshare;
mod trace_view;
#[cfg(test)]
mod tests;
mod view;
mod walks;

const NONE: u32 = u32::MAX;

/// Static facts of the server.
#[derive(Debug, Clone)]
pub struct ServerCfg {
    /// Cores that run requests (a dispatcher's core is not one of them).
    pub max_cores: usize,
    /// A dispatcher core's costs per kind of work, if the server has one.
    pub dispatcher: Option<microsched_core::sched::dispatcher::DispatcherCosts>,
    pub steal_cost: Nanos,
    pub packet_cost: Nanos,
    pub alloc_delay: Nanos,
    pub preemption: Preemption,
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
    /// The Secondary's turns on cores it shares with Primary requests (`mechanism.timeshare`),
    /// and their time: inside those requests' run, so in the cores' busy time.
    pub secondary_turns: u64,
    pub secondary_turn_ns: u64,
}

pub struct Server {
    /// Its index among the scenario's nodes, carried by the events it schedules.
    node: u16,
    cfg: ServerCfg,
    q: Queues,
    policy: Box<dyn QueuePolicy<Queues>>,
    /// The policy's `per_request`, read once.
    per_request: bool,
    /// The policy's `preempts_only_for_own_queue`, read once: expiries are lazy.
    lazy: bool,
    /// The policy's `pushes`, read once: shared-queue work is pushed to cores' own queues.
    pushes: bool,
    /// Concrete programs of live requests that have one, by request slot.
    programs: Vec<Vec<Op>>,
    mutexes: MutexTable<u32>,
    /// Per mutex: a spin lock (its waiters hold their cores).
    spin_locks: Vec<bool>,
    dispatcher: Option<Dispatcher>,
    counters: SchedCounters,
    /// Cores that found work in the middle of a park attempt, for the driver to report.
    aborted_parks: Vec<u16>,
    /// Cores that ran out of work inside the server (a request handed to a spinning core
    /// blocked or yielded at once), with what they did next, for the driver's parking logic.
    idled: Vec<(u16, Idle)>,
    /// Cores asked to yield since the last withdrawal (some may have parked since).
    yields_asked: Vec<u16>,
    /// Drops at lock steps (`server.lock_control`), with the state they need; `None`: lock
    /// steps block, and nothing below is kept.
    locks: Option<Box<LockDropState>>,
    /// The request programs' condition variables (`workload.condvars`); `None`: there are none.
    condvars: Option<Box<CondvarState>>,
    /// Breakwater v2's worker-start drop (`latency_budget_us`); `None`: off.
    start_drop: Option<StartDrop>,
    /// The probe-cost work search (`server.search.kind = "probe"`); None: the instant search.
    probe: Option<Box<search::ProbeState>>,
    /// NIC interrupt handlers interleaved with requests (`server.irq`); None: no interrupts.
    irq: Option<Box<microsched_core::sched::irq::Irq>>,
    /// A harvesting controller's `mechanism.timeshare`; None: a Primary has a lent core it took
    /// to itself.
    timeshare: Option<Box<Timesharing>>,
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
    pub fn new(node: u16, mut cfg: ServerCfg, initially_active: usize, policy: Box<dyn QueuePolicy<Queues>>, spin_locks: Vec<bool>) -> Self {
        if !policy.preemptible() {
            cfg.preemption.quantum = Nanos::MAX;
        }
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
            dispatcher: dispatcher.map(|costs| Dispatcher::new(node, costs)),
            spin_locks,
            counters: SchedCounters::default(),
            aborted_parks: Vec::new(),
            idled: Vec::new(),
            yields_asked: Vec::new(),
            locks: None,
            condvars: None,
            start_drop: None,
            probe: None,
            irq: None,
            timeshare: None,
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
            service += irq.stolen(service) + handlers::wait(c, irq, now);
        }
        if (c.refill != 0 || c.shared) && !r.has_program {
            self.refill_cold_core(core, req, service, slab);
            if self.q.cores[core as usize].shared {
                self.take_turns(core, req, now, slab);
            }
            return self.start_general(core, now, slab, evq);
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
        self.start_general(core, now, slab, evq)
    }

    fn start_general(&mut self, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) -> bool {
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

    /// The first request on a core taken back from the Secondary runs longer by the core's
    /// cache refill (requests with programs do not pay it: their next step need not compute).
    #[cold]
    fn refill_cold_core(&mut self, core: u16, req: u32, service: Nanos, slab: &mut Slab) {
        let c = &mut self.q.cores[core as usize];
        let r = &mut slab[req];
        if !r.in_op {
            r.in_op = true;
            r.left = service;
        }
        r.left += c.refill;
        c.refill = 0;
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
        if slab[req].has_program && !slab[req].has(Req::RECEIVED) && self.cfg.packet_cost > 0 {
            // The stack's work runs before the program's first step, outside any lock the
            // program takes (charged with its first compute, it would serialise on the lock).
            slab[req].set(Req::RECEIVED, true);
            self.schedule_slice(core, now, self.cfg.packet_cost, evq);
            let c = &mut self.q.cores[core as usize];
            c.slice_start = now + self.cfg.packet_cost;
            c.slice_len = 0;
            return Ran::Pending;
        }
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
                            r.left += irq.stolen(r.left) + handlers::wait(&mut self.q.cores[core as usize], irq, now);
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
                    if let Some(ran) = self.lock(core, req, m, Droppable::Yes, now, slab) {
                        return ran;
                    }
                }
                Op::Release(m) => {
                    r.pc += 1;
                    if let Some((w, since)) = self.mutexes.release(m) {
                        self.hand_over(w, since, m, core, now, slab, evq);
                    }
                }
                Op::Wait { cv, mutex } => {
                    if r.has(Req::NOTIFIED) {
                        r.set(Req::NOTIFIED, false);
                        // Woken: re-take the mutex, a plain lock as the artifact's condvar_wait
                        // re-locks (never dropped), then check again (pc stays here: the
                        // mutex is a blocking one, as the scenario requires of a condvar's, so a
                        // hand-over makes it runnable owning the mutex, back at this op).
                        if let Some(ran) = self.lock(core, req, mutex, Droppable::No, now, slab) {
                            return ran;
                        }
                        continue;
                    }
                    let st = self.condvars.as_mut().expect("programs with condvars install their state");
                    if st.take_item(cv) {
                        r.pc += 1;
                        continue;
                    }
                    if let Some(l) = &mut self.locks {
                        let acc = l.accumulated(req, r);
                        if !r.has(Req::GHOST) && l.rule.condvar_drops(acc, st.oldest_wait(cv, now)) {
                            st.dropped(cv);
                            r.pc += 1;
                            self.drop_unwind(req, slab);
                            continue;
                        }
                    }
                    st.wait(cv, req, now);
                    self.q.cores[core as usize].current = NONE;
                    if let Some((w, since)) = self.mutexes.release(mutex) {
                        self.hand_over(w, since, mutex, core, now, slab, evq);
                    }
                    return Ran::Left;
                }
                Op::Signal(cv) => {
                    r.pc += 1;
                    let st = self.condvars.as_mut().expect("programs with condvars install their state");
                    if let Some((w, since)) = st.signal(cv, now) {
                        // The wait joins the waiter's accumulated delay (condvar_signal's
                        // `acc_qdel += now - enque_ts`); it queues to re-take the mutex.
                        let wr = &mut slab[w];
                        wr.set(Req::NOTIFIED, true);
                        wr.queued_ns += now - since;
                        wr.enqueued_at = now;
                        let place = self.policy.requeue(core, Requeue::Woken, &self.q);
                        self.make_runnable(w, place, now, slab, evq);
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
}
