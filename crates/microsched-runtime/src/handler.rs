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
        if req.program.is_empty() {
            cx.compute(req.service_ns);
            return Outcome::Ok;
        }
        for op in req.program {
            match *op {
                Op::Compute(ns) => cx.compute(ns),
                Op::Yield => cx.yield_now(),
                Op::Acquire(id) => cx.lock(id),
                Op::Release(id) => cx.unlock(id),
                // Holding the condvar's mutex: take an item, waiting (the mutex released, the
                // request off its worker) while there is none; a woken waiter checks again.
                Op::Wait { cv, mutex } => {
                    while !cx.condvar_take_item(cv) {
                        cx.wait(cv, mutex);
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
}
