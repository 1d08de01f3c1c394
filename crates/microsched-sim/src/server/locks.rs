//! Mutexes and lock-level drops. Hand-overs and drop rules cut across running, queueing and the
//! driver's cleanups, so they are gathered here instead of spread through the run loop.

use microsched_core::program::Op;
use microsched_core::sched::asqm::{LockControl, LockStats, Seed};
use microsched_core::sched::Requeue;
use microsched_core::Nanos;

use super::{Ran, Server, SliceEnd, NONE};
use crate::events::{Event, EventQueue};
use crate::requests::{Req, Slab};

/// What lock-level drops need beyond the mutexes: the rule, per-request accumulated-delay
/// seeds and pending cleanups, per-lock statistics.
pub struct LockDropState {
    pub rule: LockControl,
    /// Per mutex: a dropped request that had taken it re-takes it to clean up.
    cleanup_lock: Vec<bool>,
    /// Per request slot: ASQM's accumulated delay is `queued_ns + seed` (signal seeding).
    pub(super) seed: Vec<i64>,
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

    pub(super) fn slot(&mut self, slot: u32) {
        let i = slot as usize;
        if self.seed.len() <= i {
            self.seed.resize(i + 1, 0);
            self.cleanup.resize(i + 1, NONE);
        }
    }

    /// ASQM's accumulated delay of request `r` in slot `slot`: its queueing so far plus its
    /// seed, never below zero (a signal seed can be negative).
    pub(super) fn accumulated(&mut self, slot: u32, r: &Req) -> Nanos {
        self.slot(slot);
        (r.queued_ns as i64 + self.seed[slot as usize]).max(0) as Nanos
    }
}

/// Whether a lock step may drop its request: an `Acquire` may (ASQM's lock-level drop); a woken
/// condvar waiter re-taking its mutex may not (the artifact's `condvar_wait` re-locks plainly).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Droppable {
    Yes,
    No,
}

impl Server {
    /// The artifact's `set_acc_qdel(runtime_queue_us())` when a request first runs: what it
    /// waited so far counts as the server's congestion signal now. `runtime_queue_us` is 0
    /// unless every kthread runs (`inc/runtime/runtime.h`: `runningks < maxks`), so with cores
    /// parked the request starts from no delay at all.
    pub(super) fn seed_delay(&mut self, req: u32, now: Nanos, slab: &Slab) {
        let all_running = self.active_count() == self.q.cores.len();
        let signal = if all_running { self.max_delay(now, slab) } else { 0 };
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
    pub(super) fn lock_drop(&mut self, req: u32, m: u32, slab: &mut Slab) {
        self.locks.as_mut().expect("lock drops on").stats.dropped(m);
        self.drop_unwind(req, slab);
    }

    /// Request `req`, running, is dropped at the op before its pc (a lock step, or a refused
    /// condvar wait): it releases what it holds, spends the drop cost producing its failure
    /// reply and ends as dropped (a cleanup lock it had taken is left for the driver).
    pub(super) fn drop_unwind(&mut self, req: u32, slab: &mut Slab) {
        let l = self.locks.as_mut().expect("lock drops on");
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

    /// Request `req`, running on `core`, takes mutex `m`. None: it goes on running its program
    /// (it took the mutex, or was dropped and runs its unwind); else where it got: spinning for
    /// the mutex on its core, or off the core until a hand-over makes it runnable again.
    /// Inlined into its two callers: out of line it cost protego/lucene 0.8 % of its instructions.
    #[inline(always)]
    pub(super) fn lock(&mut self, core: u16, req: u32, m: u32, droppable: Droppable, now: Nanos, slab: &mut Slab) -> Option<Ran> {
        self.counters.lock_acquisitions += 1;
        if let Some(l) = &mut self.locks {
            let held = self.mutexes.is_held(m);
            if droppable == Droppable::Yes {
                let r = &slab[req];
                let acc = l.accumulated(req, r);
                if !r.has(Req::GHOST) && l.rule.drops(acc, held, self.mutexes.oldest_wait(m, now)) {
                    self.lock_drop(req, m, slab);
                    return None;
                }
            }
            l.stats.acquire(m, held, now);
        }
        if self.mutexes.acquire(m, req, now) {
            return None;
        }
        slab[req].set(Req::WAITING_LOCK, true);
        if self.mutexes_spin(m) {
            // A spin waiter burns its core until the lock is handed to it.
            return Some(Ran::Pending);
        }
        self.q.cores[core as usize].current = NONE;
        Some(Ran::Left)
    }

    #[inline]
    pub(super) fn mutexes_spin(&self, m: u32) -> bool {
        self.spin_locks[m as usize]
    }

    /// Mutex `m`, released on `core`, now belongs to waiter `w` (waiting since `since`).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn hand_over(&mut self, w: u32, since: Nanos, m: u32, core: u16, now: Nanos, slab: &mut Slab, evq: &mut EventQueue) {
        let r = &mut slab[w];
        r.queued_ns += now - since;
        r.set(Req::WAITING_LOCK, false);
        if let Some(l) = &mut self.locks {
            let acc = l.accumulated(w, r);
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
}
