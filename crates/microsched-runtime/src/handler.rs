//! Application handlers: what a worker runs for a request. An application implements
//! [`Handler`]; the runtime ships the synthetic one, which runs the request's program as the
//! simulator does, its ASQM variant ([`crate::asqm::ProgramHandler`]) and a key-value store
//! ([`crate::kv::KvStore`]).

use microsched_core::program::Op;

pub use crate::coro::Cx;

/// A request as the handler sees it (validated by the receive path).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request<'a> {
    pub session: u32,
    pub req_id: u64,
    /// Request type (index into the scenario's `workload.types`).
    pub rtype: u16,
    /// The CPU time the request asks for (the load generator draws it from the scenario).
    pub service_ns: u64,
    /// Its program, drawn by the server from the scenario's `paths` of its type (empty for a
    /// type without paths: compute the service time).
    pub program: &'a [Op],
}

/// What a handler says about a request it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    /// Dropped (ASQM refused it a lock): its failure reply went with [`Cx::reply_dropped`], or
    /// goes now.
    Dropped,
}

/// Runs requests on worker threads. Called concurrently from every worker.
///
/// A request with a program, or one of a type for which [`Handler::coroutine`] says so, runs
/// as a coroutine and may suspend at [`Cx::yield_now`] and [`Cx::lock`]; it may then resume on
/// another worker thread. So what the handler holds across those calls must be `Send`: no
/// thread-locals, no guards of thread-bound locks (a `std::sync::MutexGuard` held over a yield
/// would also stall every request behind it; use [`Cx::lock`]).
pub trait Handler: Send + Sync + 'static {
    fn handle(&self, req: &Request, cx: &mut Cx) -> Outcome;

    /// Whether requests of type `rtype` without a program still need a coroutine (they call
    /// `cx.lock`). Default: no; they run on the worker's stack, as fast as before coroutines.
    fn coroutine(&self, _rtype: u16) -> bool {
        false
    }
}

/// Runs the request's program: compute steps spin on the clock (the synthetic workload of the
/// papers), yield points and mutexes suspend. Without a program: spins for the service time.
#[derive(Debug, Clone, Copy, Default)]
pub struct Synthetic;

impl Handler for Synthetic {
    fn handle(&self, req: &Request, cx: &mut Cx) -> Outcome {
        run_program(req, cx, &mut PlainSteps)
    }
}

/// How a program handler carries out the steps in which handlers differ (computing, taking,
/// releasing and waiting); the loop over a request's ops is [`run_program`], one for all of
/// them.
pub(crate) trait ProgramSteps {
    /// Computes for `ns` (also the whole service time of a request without a program).
    fn compute(&mut self, cx: &mut Cx, ns: u64);
    /// Takes mutex `id`; false if the request is refused it (dropped).
    fn acquire(&mut self, cx: &mut Cx, id: u32) -> bool;
    fn release(&mut self, cx: &mut Cx, id: u32);
    /// Waits on `cv`, releasing `mutex` (held) and re-taking it once notified; false if the
    /// wait is refused (the request is dropped, the mutex still held).
    fn wait(&mut self, cx: &mut Cx, cv: u32, mutex: u32) -> bool;
    /// Unwinds a request refused a lock or a wait: what it replies.
    fn refused(&mut self, cx: &mut Cx) -> Outcome;
}

/// Runs `req`'s program with `steps` (without a program: computes its service time).
pub(crate) fn run_program(req: &Request, cx: &mut Cx, steps: &mut impl ProgramSteps) -> Outcome {
    if req.program.is_empty() {
        steps.compute(cx, req.service_ns);
        return Outcome::Ok;
    }
    for op in req.program {
        match *op {
            Op::Compute(ns) => steps.compute(cx, ns),
            Op::Yield => cx.yield_now(),
            Op::Acquire(id) => {
                if !steps.acquire(cx, id) {
                    return steps.refused(cx);
                }
            }
            Op::Release(id) => steps.release(cx, id),
            // Holding the condvar's mutex: take an item, waiting (the mutex released, the
            // request off its worker) while there is none; a woken waiter re-takes the mutex
            // and checks again, since another may have taken the item first (Mesa semantics).
            Op::Wait { cv, mutex } => {
                while !cx.condvar_take_item(cv) {
                    if !steps.wait(cx, cv, mutex) {
                        return steps.refused(cx);
                    }
                }
            }
            Op::Signal(cv) => {
                cx.condvar_put_item(cv);
                cx.notify_one(cv);
            }
        }
    }
    Outcome::Ok
}

/// [`Synthetic`]'s steps: compute steps spin on the clock (preemptible where the server
/// preempts), mutexes and waits are plain and never refused.
struct PlainSteps;

impl ProgramSteps for PlainSteps {
    fn compute(&mut self, cx: &mut Cx, ns: u64) {
        cx.compute(ns);
    }

    fn acquire(&mut self, cx: &mut Cx, id: u32) -> bool {
        cx.lock(id);
        true
    }

    fn release(&mut self, cx: &mut Cx, id: u32) {
        cx.unlock(id);
    }

    fn wait(&mut self, cx: &mut Cx, cv: u32, mutex: u32) -> bool {
        cx.wait(cv, mutex);
        true
    }

    fn refused(&mut self, _cx: &mut Cx) -> Outcome {
        unreachable!("plain lock steps and waits are never refused")
    }
}
