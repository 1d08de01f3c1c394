//! A worker thread: one "core" of the latency-critical application.
//!
//! Loop: own run queue and own inbox, then the socket (a non-blocking receive of up to
//! [`RX_BATCH`] datagrams, validated and steered like every datagram: Caladan's kthreads poll
//! their RX queue in `schedule()`), then stealing ([`crate::queue::LocalQueue`]); run the request
//! through the [`Handler`](crate::handler::Handler), answer. A fruitless search is a pass; once
//! the worker has searched for the allocator's poll period and pass count
//! ([`ParkRule`](microsched_core::alloc::ParkRule)), it asks the allocator
//! ([`CoreAllocator::on_park_attempt`](microsched_core::alloc::CoreAllocator::on_park_attempt),
//! with the credit controller as its [`CreditLink`](microsched_core::overload::CreditLink), as the
//! simulator does) and parks if allowed (Caladan's `schedule()` → `kthread_park`, reference §4.2).
//! A worker whose attempt was refused (`KeepPolling`, CoreSync) and then finds work, or that wakes
//! after parking, reports it with `on_park_abort` (CoreSync returns the credits it withheld). A
//! yield request from the allocator parks it at its next idle point. Parking blocks the thread
//! ([`crate::park`]); the controller's core grant wakes it.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use microsched_core::alloc::{ParkMode, ParkVerdict};
use microsched_core::Nanos;

use crate::handler::Request;
use crate::park::Phase;
use crate::queue::{Job, LocalQueue};
use crate::report::Counters;
use crate::rpc::CreditMsg;
use crate::server::{poll_socket, Shared};
use crate::wire::{encode, Msg, Status};

/// Datagrams received per socket poll (Caladan's RX batch).
pub const RX_BATCH: usize = 16;

pub(crate) fn run(sh: Arc<Shared>, me: usize, local: LocalQueue) {
    crate::clock::default_priority();
    let core = &sh.cores[me];
    core.parker.register();
    let stopping = || sh.stop.load(Ordering::Relaxed);
    let mut buf = [0u8; 2048];
    let mut msgs: Vec<CreditMsg> = Vec::new();
    if core.parker.phase() == Phase::Parked {
        core.parker.park(sh.clock.now(), stopping);
        woke(&sh, me, &mut msgs);
    }
    let rule = sh.park_rule;
    let mut rotor = me;
    let mut idle_since: Option<Nanos> = None;
    let mut passes: u32 = 0;
    // A park attempt was refused since the last work found (the allocator must hear the abort).
    let mut attempting = false;
    while !stopping() {
        let mut job = local.find_own(&sh.cores, me);
        if job.is_none() && poll_socket(&sh, RX_BATCH, &mut buf, &mut msgs) > 0 {
            job = local.find_own(&sh.cores, me);
            if job.is_none() {
                // Received something (for another core, or not a request): not a fruitless pass.
                idle_since = None;
                passes = 0;
                continue;
            }
        }
        if job.is_none() {
            job = local.steal(&sh.cores, me, &mut rotor);
        }
        if let Some(job) = job {
            idle_since = None;
            passes = 0;
            if attempting {
                attempting = false;
                park_abort(&sh, me, &mut msgs);
            }
            serve(&sh, me, job, &mut msgs);
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
                // Lock order: rpc, then alloc.
                let mut rpc = sh.rpc.lock();
                let verdict = sh
                    .alloc
                    .lock()
                    .on_park_attempt(now, me as u16, active, rpc.link());
                park = verdict == ParkVerdict::Park;
                if park && rpc.drained() > 0 {
                    sh.parks_while_drained.fetch_add(1, Ordering::Relaxed);
                }
                attempting = !park;
                rpc.wakeups(&mut msgs);
                drop(rpc);
                for m in msgs.drain(..) {
                    sh.send_credit(m);
                }
            }
        }
        if park {
            sh.parks.fetch_add(1, Ordering::Relaxed);
            attempting = false;
            core.parker.park(now, stopping);
            woke(&sh, me, &mut msgs);
            idle_since = None;
            passes = 0;
            continue;
        }
        if sh.yield_when_idle {
            std::thread::yield_now();
        }
    }
}

/// The allocator hears that core `me` ended its park attempt (found work, or woke up).
fn park_abort(sh: &Shared, me: usize, msgs: &mut Vec<CreditMsg>) {
    let now = sh.clock.now();
    let mut rpc = sh.rpc.lock();
    sh.alloc.lock().on_park_abort(now, me as u16, rpc.link());
    rpc.wakeups(msgs);
    drop(rpc);
    for m in msgs.drain(..) {
        sh.send_credit(m);
    }
}

/// Back from a park: the grant's transition time ends here.
fn woke(sh: &Shared, me: usize, msgs: &mut Vec<CreditMsg>) {
    let now = sh.clock.now();
    sh.cores[me].parker.set(now, Phase::Search);
    park_abort(sh, me, msgs);
}

fn serve(sh: &Shared, me: usize, job: Job, msgs: &mut Vec<CreditMsg>) {
    let core = &sh.cores[me];
    let start = sh.clock.now();
    core.parker.set(start, Phase::Busy);
    let req = Request {
        session: job.session,
        req_id: job.req_id,
        rtype: job.rtype,
        service_ns: job.service_ns,
    };
    let _outcome = sh.handler.handle(&req);
    let done = sh.clock.now();
    core.parker.set(done, Phase::Search);
    core.completed.fetch_add(1, Ordering::Relaxed);
    let credits = if sh.credit_based {
        let delay = sh.delay_ns.load(Ordering::Relaxed);
        let mut rpc = sh.rpc.lock();
        let c = rpc.complete(done, job.session, delay);
        rpc.wakeups(msgs);
        drop(rpc);
        for m in msgs.drain(..) {
            sh.send_credit(m);
        }
        c
    } else {
        0
    };
    Counters::bump(&sh.counters.completed);
    let msg = Msg::Response {
        req_id: job.req_id,
        credits,
        status: Status::Ok,
        qdelay_ns: start.saturating_sub(job.arrived),
    };
    sh.send(&encode(&msg), job.peer);
}
