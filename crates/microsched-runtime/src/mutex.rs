//! The runtime's blocking mutexes: the core [`MutexTable`] (FIFO waiters with their enqueue
//! times, ownership handed to the first waiter on release, as Shenango's mutex), whose waiters
//! are suspended requests parked here, off every run queue, until the holder releases.
//!
//! A spin lock (`workload.locks[].spin`) queues its waiters in the same FIFO, but a waiter keeps
//! its worker: it spins on a flag of its own ([`SpinWait`]) until the releaser hands it the
//! mutex, as the simulator's spin-waiting core stays busy until the hand-over.
//!
//! One lock guards every mutex: a family may have a million members, and the critical sections
//! here are a few pointer moves; with a handful of workers a lock per mutex would buy nothing.
//! Condition variables are few and each is hot in its own producer/consumer loop, so each has
//! its own state ([`Condvar`]): a wait or signal on one never waits for the mutex table or for
//! another condvar.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use microsched_core::sched::mutex::MutexTable;
use microsched_core::Nanos;
use parking_lot::{Mutex, RwLock};

use crate::queue::Job;

/// Condition variable ids from this on are refused: ids index a table, grown on first use (a
/// scenario's `workload.condvars` is held below it by validation; a custom handler's ids are its
/// own).
pub use microsched_core::program::MAX_CONDVARS;

#[derive(Debug)]
pub struct Mutexes {
    inner: Mutex<Inner>,
    n: u32,
    /// Per mutex: a spin lock.
    spin: Vec<bool>,
    /// Condition variables by id (the table grows to an id on its first use; growing is the
    /// only writer, so waits and signals on existing condvars share the read side).
    condvars: RwLock<Vec<Condvar>>,
}

/// One condition variable's state.
#[derive(Debug, Default)]
struct Condvar {
    /// Its waiters, oldest first, each with when it began waiting.
    waiters: Mutex<VecDeque<(Job, Nanos)>>,
    /// A request program's condvar: items signalled and not yet taken (changed only by holders
    /// of its mutex; atomic so that reading the count takes no lock).
    items: AtomicU64,
}

/// A spinning waiter's hand-over flag: set once the mutex is its.
pub type SpinWait = Arc<AtomicBool>;

#[derive(Debug)]
struct Inner {
    /// Waiters are slots of `parked`.
    table: MutexTable<usize>,
    parked: Vec<Option<Job>>,
    free: Vec<usize>,
    /// Waiting slots whose request spins on its worker, with their hand-over flags.
    spinning: HashMap<usize, SpinWait>,
}

impl Inner {
    /// A free waiter slot (a new one if none is free).
    fn take_slot(&mut self) -> usize {
        self.free.pop().unwrap_or_else(|| {
            self.parked.push(None);
            self.parked.len() - 1
        })
    }

    fn unpark(&mut self, slot: usize) -> Job {
        self.free.push(slot);
        self.parked[slot].take().expect("a waiter's slot holds its request")
    }

    /// The new owner of a released mutex: a parked request to make runnable, or (`None`) a
    /// spinning one, which is told by its flag.
    fn hand(&mut self, slot: usize, since: Nanos) -> Option<(Job, Nanos)> {
        if let Some(flag) = self.spinning.remove(&slot) {
            self.free.push(slot);
            flag.store(true, Ordering::Release);
            return None;
        }
        Some((self.unpark(slot), since))
    }
}

impl Mutexes {
    pub fn new(n: u32) -> Self {
        Self {
            inner: Mutex::new(Inner {
                table: MutexTable::new(n),
                parked: Vec::new(),
                free: Vec::new(),
                spinning: HashMap::new(),
            }),
            n,
            spin: vec![false; n as usize],
            condvars: RwLock::new(Vec::new()),
        }
    }

    /// Runs `f` on condvar `cv`'s state, growing the table to it on first use.
    fn condvar<R>(&self, cv: u32, f: impl FnOnce(&Condvar) -> R) -> R {
        assert!(cv < MAX_CONDVARS, "condition variable {cv} does not exist: ids are below {MAX_CONDVARS}");
        let i = cv as usize;
        {
            let t = self.condvars.read();
            if let Some(c) = t.get(i) {
                return f(c);
            }
        }
        let mut t = self.condvars.write();
        if t.len() <= i {
            t.resize_with(i + 1, Condvar::default);
        }
        f(&parking_lot::RwLockWriteGuard::downgrade(t)[i])
    }

    /// The same, with `spin[m]` telling which mutexes are spin locks.
    pub fn with_spin(mut self, spin: Vec<bool>) -> Self {
        assert_eq!(spin.len(), self.n as usize, "one flag per mutex");
        self.spin = spin;
        self
    }

    /// Whether mutex `id` is a spin lock.
    pub fn is_spin(&self, id: u32) -> bool {
        self.spin.get(id as usize).copied().unwrap_or(false)
    }

    /// A request asks for spin lock `id` at `now`: `None` if it holds it now; else it waits in
    /// the mutex's FIFO without leaving its worker, which spins until the returned flag is set.
    pub fn acquire_spin(&self, id: u32, now: Nanos) -> Option<SpinWait> {
        self.check(id);
        let mut g = self.inner.lock();
        let slot = g.take_slot();
        if g.table.acquire(id, slot, now) {
            g.free.push(slot);
            return None;
        }
        let flag: SpinWait = Arc::new(AtomicBool::new(false));
        g.spinning.insert(slot, flag.clone());
        Some(flag)
    }

    fn check(&self, id: u32) {
        assert!(
            id < self.n,
            "mutex {id} does not exist: the scenario's workload.locks declare {} (families counted lock by lock)",
            self.n
        );
    }

    /// A suspended request asks for mutex `id` at `now`: true if it holds it now (resume it);
    /// else `park` gives up the request, which waits in the mutex's FIFO. Deciding and parking
    /// under one lock is what keeps a release from slipping between them (a lost wake-up).
    pub fn acquire(&self, id: u32, now: Nanos, park: impl FnOnce() -> Job) -> bool {
        self.check(id);
        let mut g = self.inner.lock();
        let slot = g.take_slot();
        if g.table.acquire(id, slot, now) {
            g.free.push(slot);
            return true;
        }
        g.parked[slot] = Some(park());
        false
    }

    /// Releases mutex `id`; the waiter that now owns it, with when it began waiting.
    pub fn release(&self, id: u32) -> Option<(Job, Nanos)> {
        self.check(id);
        let mut g = self.inner.lock();
        let (slot, since) = g.table.release(id)?;
        g.hand(slot, since)
    }

    /// A request holding mutex `mutex` waits on condition variable `cv` from `now`: `park` gives
    /// it up to the condvar's FIFO, and only then is the mutex released, so a notify from
    /// whoever takes the mutex next finds it there (no lost wake-up). Returns the waiter the
    /// mutex was handed to, with when it began waiting.
    pub fn wait(&self, cv: u32, mutex: u32, now: Nanos, park: impl FnOnce() -> Job) -> Option<(Job, Nanos)> {
        self.check(mutex);
        self.condvar(cv, |c| c.waiters.lock().push_back((park(), now)));
        let mut g = self.inner.lock();
        g.table.release(mutex).and_then(|(slot, since)| g.hand(slot, since))
    }

    /// The oldest waiter of `cv` (all of them with `all`), oldest first, each with when it began
    /// waiting.
    pub fn notify(&self, cv: u32, all: bool) -> Vec<(Job, Nanos)> {
        self.condvar(cv, |c| {
            let mut q = c.waiters.lock();
            let n = if all { q.len() } else { q.len().min(1) };
            q.drain(..n).collect()
        })
    }

    /// Condition variable `cv`'s queueing delay at `now`: its oldest waiter's age (0 with none),
    /// the artifact's `condvar_queue_tsc`.
    pub fn condvar_oldest_wait(&self, cv: u32, now: Nanos) -> Nanos {
        self.condvar(cv, |c| c.waiters.lock().front().map_or(0, |&(_, since)| now.saturating_sub(since)))
    }

    /// Takes an item of program condvar `cv` if there is one (the caller holds its mutex).
    pub fn take_item(&self, cv: u32) -> bool {
        self.condvar(cv, |c| c.items.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1)).is_ok())
    }

    /// Adds an item to program condvar `cv` (the caller holds its mutex).
    pub fn put_item(&self, cv: u32) {
        self.condvar(cv, |c| c.items.fetch_add(1, Ordering::AcqRel));
    }

    /// Items of program condvar `cv` not taken yet.
    pub fn items(&self, cv: u32) -> u64 {
        self.condvar(cv, |c| c.items.load(Ordering::Acquire))
    }

    /// Whether mutex `id` is held (a snapshot: ASQM's `try_lock` mode reads it).
    pub fn is_held(&self, id: u32) -> bool {
        self.check(id);
        self.inner.lock().table.is_held(id)
    }

    /// Mutex `id`'s queueing delay at `now`: its oldest waiter's age (0 with none).
    pub fn oldest_wait(&self, id: u32, now: Nanos) -> Nanos {
        self.check(id);
        self.inner.lock().table.oldest_wait(id, now)
    }

    /// Requests waiting for a mutex.
    pub fn waiting(&self) -> usize {
        self.inner.lock().table.waiting()
    }

    /// Mutexes in all.
    pub fn len(&self) -> u32 {
        self.n
    }

    pub fn is_empty(&self) -> bool {
        self.n == 0
    }
}
