//! Breakwater v2's worker-start drop (`policy.overload.latency_budget_us`, the artifact's
//! `SBW_LATENCY_BUDGET` check in `srpc_worker`): a request whose worker starts while the
//! server's queueing-delay signal exceeds the budget is not run but answered with a failure
//! (wire `StartDropped`), its credit returned as a drop (no pool update, as the simulator does).
//!
//! The signal is the one the credit controller reads: the controller thread's sample
//! (`runtime.tick_us`), the simulator's `server.delay_signal = "sampled"` — the artifact reads
//! `runtime_queue_us()`, the runtime's oldest-waiter age, not the request's own wait.

use std::sync::atomic::Ordering;

use microsched_core::scenario::{OverloadCfg, Scenario};
use microsched_core::time::us;
use microsched_core::Nanos;

use crate::queue::Job;
use crate::report::Counters;
use crate::rpc::CreditMsg;
use crate::server::Shared;
use crate::wire::Status;

/// The budget of `sc`, if its Breakwater has one.
pub(crate) fn budget(sc: &Scenario) -> Option<Nanos> {
    match &sc.policy.overload {
        OverloadCfg::Breakwater(b) => b.latency_budget_us.map(us),
        _ => None,
    }
}

/// Drops `job` if it is over budget at its start (a fresh request without a program: a
/// program's lock steps have ASQM); true if it was dropped and answered.
#[inline]
pub(crate) fn check(sh: &Shared, job: &Job, started: Nanos, msgs: &mut Vec<CreditMsg>) -> bool {
    let Some(budget) = sh.start_budget_ns else { return false };
    if job.task.is_some() || sh.delay_ns.load(Ordering::Relaxed) <= budget {
        return false;
    }
    reply(sh, job, started, msgs);
    true
}

#[cold]
fn reply(sh: &Shared, job: &Job, started: Nanos, msgs: &mut Vec<CreditMsg>) {
    Counters::bump(&sh.counters.start_dropped);
    crate::asqm::reply_failure(sh, job, started, msgs, Status::StartDropped);
}
