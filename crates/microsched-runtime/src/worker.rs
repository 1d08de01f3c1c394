//! A worker thread: one "core" of the latency-critical application.
//!
//! Loop: find work (own run queue, own inbox, then steal: [`crate::queue::LocalQueue::find`]),
//! run it through the [`Handler`](crate::handler::Handler), answer. A fruitless search is a pass;
//! once the worker has searched for the allocator's poll period and pass count
//! ([`ParkRule`](microsched_core::alloc::ParkRule)), it asks the allocator
//! ([`CoreAllocator::on_park_attempt`](microsched_core::alloc::CoreAllocator::on_park_attempt))
//! and parks if allowed (Caladan's `schedule()` → `kthread_park`, reference §4.2). A yield request
//! from the allocator parks it at its next idle point. Parking blocks the thread
//! ([`crate::park`]); the controller's core grant wakes it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use microsched_core::alloc::{ParkMode, ParkVerdict};
use microsched_core::Nanos;

use crate::handler::Request;
use crate::park::Phase;
use crate::queue::{Job, LocalQueue};
use crate::report::Counters;
use crate::server::Shared;
use crate::wire::{encode, Msg, Status};

pub(crate) fn run(sh: Arc<Shared>, me: usize, local: LocalQueue) {
    let core = &sh.cores[me];
    core.parker.register();
    let stopping = || sh.stop.load(Ordering::Relaxed);
    if core.parker.phase() == Phase::Parked {
        core.parker.park(sh.clock.now(), stopping);
        woke(&sh, me);
    }
    let rule = sh.park_rule;
    let mut rotor = me;
    let mut idle_since: Option<Nanos> = None;
    let mut passes: u32 = 0;
    while !stopping() {
        if let Some(job) = local.find(&sh.cores, me, &mut rotor) {
            idle_since = None;
            passes = 0;
            serve(&sh, me, job);
            continue;
        }
        passes = passes.saturating_add(1);
        let now = sh.clock.now();
        let since = *idle_since.get_or_insert(now);
        let mut park = core.yield_requested.swap(false, Ordering::AcqRel);
        if !park && now - since >= rule.min_poll_ns && passes >= rule.min_passes {
            let eligible = match rule.mode {
                ParkMode::Never => false,
                ParkMode::AfterPoll => true,
                ParkMode::OnlyLastCore => sh.active_cores() == 1,
            };
            if eligible {
                let active = sh.active_cores();
                park = sh.alloc.lock().on_park_attempt(now, me as u16, active, None) == ParkVerdict::Park;
            }
        }
        if park {
            sh.parks.fetch_add(1, Ordering::Relaxed);
            core.parker.park(now, stopping);
            woke(&sh, me);
            idle_since = None;
            passes = 0;
            continue;
        }
        if sh.yield_when_idle {
            std::thread::yield_now();
        }
    }
}

/// Back from a park: the grant's transition time ends here.
fn woke(sh: &Shared, me: usize) {
    let now = sh.clock.now();
    sh.cores[me].parker.set(now, Phase::Search);
    sh.alloc.lock().on_park_abort(now, me as u16, None);
}

fn serve(sh: &Shared, me: usize, job: Job) {
    let core = &sh.cores[me];
    let start = sh.clock.now();
    core.parker.set(start, Phase::Busy);
    let req = Request { session: job.session, req_id: job.req_id, rtype: job.rtype, service_ns: job.service_ns };
    let _outcome = sh.handler.handle(&req);
    let done = sh.clock.now();
    core.parker.set(done, Phase::Search);
    core.completed.fetch_add(1, Ordering::Relaxed);
    let credits = if sh.credit_based {
        let delay = sh.delay_ns.load(Ordering::Relaxed);
        let mut rpc = sh.rpc.lock();
        let c = rpc.complete(done, job.session, delay);
        let mut msgs = Vec::new();
        rpc.wakeups(&mut msgs);
        drop(rpc);
        for m in msgs {
            sh.send_credit(m);
        }
        c
    } else {
        0
    };
    Counters::bump(&sh.counters.completed);
    let msg = Msg::Response { req_id: job.req_id, credits, status: Status::Ok, qdelay_ns: start.saturating_sub(job.arrived) };
    sh.send(&encode(&msg), job.peer);
}
