//! Requests as stackful coroutines (corosensei): a handler that reaches a yield point or a
//! contended mutex suspends, and its worker runs other work meanwhile, as Shenango's and
//! Caladan's uthreads do. The coroutine only *asks* ([`Suspend`]); the worker carries the
//! request out (requeue, mutex waiters, wake-ups: [`crate::worker`], [`crate::mutex`]), so that a
//! suspended request is plain data in a queue, never tied to a thread.
//!
//! Stacks come from a bounded pool ([`StackPool`]) and are reused: mapping a fresh stack costs
//! two system calls and page faults, more than a short request's whole service time.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use corosensei::stack::DefaultStack;
use corosensei::{Coroutine, CoroutineResult, Yielder};
use microsched_core::program::Op;
use microsched_core::Nanos;
use parking_lot::Mutex;

use crate::handler::{Handler, Outcome, Request};

/// Bytes of one coroutine stack (plus a guard page). Handlers run small loops; one that needs
/// deep recursion would overflow into the guard page and crash the server, not corrupt it.
pub const STACK_SIZE: usize = 64 * 1024;
/// Most coroutine stacks alive at once (mapped lazily: only touched pages cost memory). At the
/// limit a request that would need a new one waits in its run queue until one is returned.
pub const MAX_STACKS: usize = 4096;

/// What a suspended request asks its worker to do before it may continue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Suspend {
    /// Put me at the tail of the run queue (a yield point).
    Yield,
    /// Give me mutex `id`, or make me one of its waiters.
    Acquire(u32),
    /// Release mutex `id` (handing it to its first waiter); I continue at once.
    Release(u32),
    /// Release mutex `mutex` and wait on condition variable `cv`, off my worker, until a
    /// notify makes me runnable (I then take `mutex` again with an `Acquire`).
    Wait { cv: u32, mutex: u32 },
    /// Make the oldest waiter of `cv` (every waiter with `all`) runnable; I continue at once.
    Notify { cv: u32, all: bool },
    /// A question or request of the latency-aware synchronization API ([`crate::asqm`]); the
    /// worker's answer is what the coroutine resumes with.
    Asqm(crate::asqm::Ask),
    /// My quantum expired and the timer flagged my worker ([`crate::preempt`]): requeue me as
    /// preempted.
    Preempt,
}

/// A suspended request's coroutine, with the request's ASQM accounting (it moves with it).
/// The coroutine resumes with a `u64`: the answer to its last [`Suspend::Asqm`] ask (1, "yes",
/// for every other suspension: a waiter resumes owning its mutex).
pub struct Coro {
    co: Coroutine<u64, Suspend, Outcome, DefaultStack>,
    /// What the next resume passes in.
    pub answer: u64,
    /// Accumulated queueing delay (ns): seeded when it first runs, then every runqueue and lock
    /// wait (Protego's `acc_qdel`).
    pub acc_ns: Nanos,
    /// When it last became ready (requeued after a yield or a lock hand-over).
    pub ready_at: Nanos,
    /// Its (failure) reply has already gone: finishing sends nothing.
    pub replied: bool,
}

// SAFETY: a request moves between workers only while suspended, and while suspended its stack
// holds only the handler's locals. `Handler` requires that they be `Send` across suspension
// points (no thread-locals or thread-bound guards held over `yield_now`/`lock`), which is the
// condition corosensei documents for sending a coroutine.
unsafe impl Send for Coro {}

impl std::fmt::Debug for Coro {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Coro")
    }
}

/// The work that remains of a request beyond "spin for its service time".
#[derive(Debug)]
pub enum Task {
    /// Admitted with a program (drawn from the scenario), not started yet.
    Program(Vec<Op>),
    /// Started and suspended; `started` is when it first ran (its queueing delay ends there).
    Running { coro: Coro, started: Nanos },
}

/// How a resumed coroutine stopped.
pub enum Step {
    Done(Outcome),
    Suspended(Suspend),
}

impl Coro {
    /// A coroutine that runs `req` (its program moved in) on `stack`.
    pub fn new(
        stack: DefaultStack,
        handler: Arc<dyn Handler>,
        req: Request<'static>,
        program: Vec<Op>,
    ) -> Self {
        let co = Coroutine::with_stack(
            stack,
            move |y: &Yielder<u64, Suspend>, _: u64| {
                let req = Request {
                    program: &program,
                    ..req
                };
                handler.handle(&req, &mut Cx { y: Some(y) })
            },
        );
        Coro { co, answer: 1, acc_ns: 0, ready_at: 0, replied: false }
    }

    pub fn resume(&mut self) -> Step {
        let a = std::mem::replace(&mut self.answer, 1);
        match self.co.resume(a) {
            CoroutineResult::Yield(s) => Step::Suspended(s),
            CoroutineResult::Return(o) => Step::Done(o),
        }
    }

    /// The stack of a finished coroutine, for reuse.
    pub fn into_stack(self) -> DefaultStack {
        self.co.into_stack()
    }
}

/// What a handler may do besides computing: suspension points. Outside a coroutine (a request
/// the runtime runs directly, see [`Handler::coroutine`]) a yield point is a no-op (running on
/// is one legal outcome of a yield) and a mutex cannot be waited for, so `lock` panics.
pub struct Cx<'a> {
    y: Option<&'a Yielder<u64, Suspend>>,
}

impl Cx<'_> {
    /// For requests run directly on the worker's stack.
    pub fn direct() -> Self {
        Cx { y: None }
    }

    pub fn in_coroutine(&self) -> bool {
        self.y.is_some()
    }

    /// A yield point: the request goes to the tail of its worker's run queue.
    pub fn yield_now(&mut self) {
        if let Some(y) = self.y {
            y.suspend(Suspend::Yield);
        }
    }

    /// Computes for `ns` of the request's own run time (spinning, the synthetic work). On a
    /// server with time-slice preemption the spin is instrumented: it polls the worker's preempt
    /// flag about every microsecond and, when the timer set it, suspends the request (the rest
    /// of `ns` runs when it resumes, wherever). Elsewhere: a plain spin.
    pub fn compute(&mut self, ns: Nanos) {
        match self.y {
            Some(y) if crate::preempt::bound() => crate::preempt::spin_preemptible(ns, || {
                y.suspend(Suspend::Preempt);
            }),
            _ => crate::clock::spin_for(ns),
        }
    }

    /// Acquires mutex `id` (an index into the scenario's flattened `workload.locks`), waiting
    /// in its FIFO without holding the worker if it is taken.
    pub fn lock(&mut self, id: u32) {
        self.y
            .expect(
                "Cx::lock outside a coroutine: the handler must ask for one (Handler::coroutine)",
            )
            .suspend(Suspend::Acquire(id));
    }

    /// Releases mutex `id`, handing it to its first waiter.
    pub fn unlock(&mut self, id: u32) {
        self.y
            .expect(
                "Cx::unlock outside a coroutine: the handler must ask for one (Handler::coroutine)",
            )
            .suspend(Suspend::Release(id));
    }

    /// Caladan's `condvar_wait`: releases mutex `mutex` (held), waits on condition variable
    /// `cv` (any id; waiters are FIFO) without holding the worker, and takes `mutex` again once
    /// notified. Release and enqueue are one step, so a notify cannot slip between them; as
    /// with every condition variable the caller re-checks its condition in a loop.
    pub fn wait(&mut self, cv: u32, mutex: u32) {
        self.y
            .expect("Cx::wait outside a coroutine: the handler must ask for one (Handler::coroutine)")
            .suspend(Suspend::Wait { cv, mutex });
        self.lock(mutex);
    }

    /// `condvar_signal`: the oldest waiter of `cv`, if any, becomes runnable.
    pub fn notify_one(&mut self, cv: u32) {
        self.notify(cv, false);
    }

    /// `condvar_broadcast`: every waiter of `cv` becomes runnable.
    pub fn notify_all(&mut self, cv: u32) {
        self.notify(cv, true);
    }

    fn notify(&mut self, cv: u32, all: bool) {
        self.y
            .expect("Cx::notify outside a coroutine: the handler must ask for one (Handler::coroutine)")
            .suspend(Suspend::Notify { cv, all });
    }

    /// Asks the worker (see [`crate::asqm`]); outside a coroutine: `direct`.
    pub(crate) fn ask(&mut self, a: crate::asqm::Ask, direct: u64) -> u64 {
        match self.y {
            Some(y) => y.suspend(Suspend::Asqm(a)),
            None => direct,
        }
    }
}

/// Reused coroutine stacks, shared by the workers (a request may finish on another worker than
/// the one that started it).
pub struct StackPool {
    free: Mutex<Vec<DefaultStack>>,
    live: AtomicUsize,
    cap: usize,
}

impl std::fmt::Debug for StackPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StackPool")
            .field("mapped", &self.mapped())
            .field("cap", &self.cap)
            .finish()
    }
}

impl StackPool {
    pub fn new(cap: usize) -> Self {
        Self {
            free: Mutex::new(Vec::new()),
            live: AtomicUsize::new(0),
            cap,
        }
    }

    /// A stack, or `None` when `cap` are in use (or the kernel refuses to map one).
    pub fn take(&self) -> Option<DefaultStack> {
        if let Some(s) = self.free.lock().pop() {
            return Some(s);
        }
        if self.live.fetch_add(1, Ordering::AcqRel) >= self.cap {
            self.live.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        match DefaultStack::new(STACK_SIZE) {
            Ok(s) => Some(s),
            Err(_) => {
                self.live.fetch_sub(1, Ordering::AcqRel);
                None
            }
        }
    }

    pub fn give(&self, s: DefaultStack) {
        self.free.lock().push(s);
    }

    /// Stacks mapped so far (in use or free).
    pub fn mapped(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handler::Synthetic;

    #[test]
    fn a_program_suspends_at_its_yield_and_mutex_points_and_its_stack_is_reused() {
        let pool = StackPool::new(1);
        let req = Request {
            session: 0,
            req_id: 1,
            rtype: 0,
            service_ns: 0,
            program: &[],
        };
        let prog = vec![
            Op::Compute(10),
            Op::Yield,
            Op::Acquire(3),
            Op::Compute(5),
            Op::Release(3),
        ];
        let mut c = Coro::new(pool.take().unwrap(), Arc::new(Synthetic), req, prog);
        assert!(pool.take().is_none(), "the pool is bounded");
        let mut seen = Vec::new();
        loop {
            match c.resume() {
                Step::Suspended(s) => seen.push(s),
                Step::Done(o) => {
                    assert_eq!(o, Outcome::Ok);
                    break;
                }
            }
        }
        assert_eq!(
            seen,
            [Suspend::Yield, Suspend::Acquire(3), Suspend::Release(3)]
        );
        pool.give(c.into_stack());
        assert!(pool.take().is_some(), "a returned stack is reused");
        assert_eq!(pool.mapped(), 1);
    }

    #[test]
    fn a_request_suspended_when_the_server_stops_is_dropped_cleanly() {
        // Its stack is unwound (the handler's locals dropped) on whichever thread drops it.
        let pool = StackPool::new(1);
        let req = Request { session: 0, req_id: 1, rtype: 0, service_ns: 0, program: &[] };
        let mut c = Coro::new(pool.take().unwrap(), Arc::new(Synthetic), req, vec![Op::Yield, Op::Compute(1)]);
        assert!(matches!(c.resume(), Step::Suspended(Suspend::Yield)));
        std::thread::spawn(move || drop(c)).join().expect("dropped without a panic");
    }
}
