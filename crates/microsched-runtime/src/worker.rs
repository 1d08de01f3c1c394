//! A worker thread: one "core" of the latency-critical application.
//!
//! Loop: ask the queueing policy ([`crate::sched`]) where to find work and take it from there
//! (d-FCFS: own run queue and own inbox; c-FCFS: the shared queue), else poll the socket (a
//! non-blocking receive of up to [`RX_BATCH`] datagrams, validated and steered like every
//! datagram: Caladan's kthreads poll their RX queue in `schedule()`) and ask again, else steal
//! from the victim the policy chose, as much as it says ([`crate::queue::LocalQueue`]; d-FCFS
//! with `server.steal = false` chooses none); run the request through the
//! [`Handler`](crate::handler::Handler), answer. A request with a program runs as a coroutine
//! ([`crate::coro`]): at a yield point it goes back to the queue the policy's `requeue` names
//! (d-FCFS: the tail of this worker's run queue, behind what arrived meanwhile), at a taken
//! mutex it joins the mutex's waiters ([`crate::mutex`]), and either way the worker goes on
//! with other work; a mutex it releases is handed to the first waiter, which becomes runnable
//! where the policy says (d-FCFS: this worker's run queue, Shenango's `thread_ready`). A fruitless search is a pass; once
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
use microsched_core::sched::{Next, Place, Requeue};
use microsched_core::Nanos;

use crate::coro::{Coro, Step, Suspend, Task};
use crate::asqm::Verdict;
use crate::handler::{Cx, Outcome, Request};
use crate::park::Phase;
use microsched_core::trace::{instant, Arg};
use crate::queue::{Job, LocalQueue};
use crate::report::Counters;
use crate::rpc::CreditMsg;
use crate::sched::Sched;
use crate::server::{poll_socket, Shared};
use crate::wire::{encode, Msg, Status};

/// Datagrams received per socket poll (Caladan's RX batch).
pub const RX_BATCH: usize = 16;
/// A worker whose run queue holds only yielding requests polls the socket at least this often
/// (one `recvfrom` per 5 µs yield would cost a fifth of the CPU).
pub const YIELD_RX_PERIOD_NS: Nanos = 5_000;

pub(crate) fn run(sh: Arc<Shared>, me: usize, local: LocalQueue, mut sched: Sched) {
    crate::clock::default_priority();
    let core = &sh.cores[me];
    core.parker.register();
    if sh.preempt.enabled {
        sh.preempt.bind(me);
    }
    let stopping = || sh.stop.load(Ordering::Relaxed);
    let mut buf = [0u8; 2048];
    let mut msgs: Vec<CreditMsg> = Vec::new();
    if core.parker.phase() == Phase::Parked {
        core.parker.park(sh.clock.now(), stopping);
        woke(&sh, me, &mut msgs);
    }
    let rule = sh.park_rule;
    let mut idle_since: Option<Nanos> = None;
    let mut passes: u32 = 0;
    // A park attempt was refused since the last work found (the allocator must hear the abort).
    let mut attempting = false;
    // When this worker last polled the socket.
    let mut last_rx: Nanos = 0;
    let dispatch = sh.dispatch.as_ref();
    while !stopping() {
        // A request the dispatcher handed to this worker directly comes first.
        let own = match dispatch {
            Some(d) if d.own_first => local.find_own(&sh.cores, me),
            _ => None,
        };
        let mut next = if own.is_some() { Next::Run(Place::Core(me as u16)) } else { sched.next(me) };
        let mut job = own.or_else(|| run_from(&sh, &local, me, next));
        if let (None, Next::Run(place)) = (&job, next) {
            // The view ran ahead of the queue: the policy takes back what `next` counted.
            sched.missed(me, place);
        }
        // With a dispatcher, it alone receives from the socket.
        if job.is_none() && dispatch.is_none() {
            last_rx = sh.clock.now();
            // The socket before a steal, as Caladan's `schedule()` polls its RX queue before
            // stealing: what arrived for this worker is its own work.
            if poll_socket(&sh, &mut sched, RX_BATCH, &mut buf, &mut msgs) > 0 {
                next = sched.next(me);
                job = run_from(&sh, &local, me, next);
                if let (None, Next::Run(place)) = (&job, next) {
                    sched.missed(me, place);
                }
                if job.is_none() {
                    // Received something (for another core, or not a request): not a fruitless pass.
                    idle_since = None;
                    passes = 0;
                    continue;
                }
            }
        }
        if job.is_none() {
            if let Next::Steal(v) = next {
                job = local.steal_from(&sh.cores, me, v as usize, |len| sched.steal(me, v as usize, len));
            }
        }
        if let Some(job) = job {
            idle_since = None;
            passes = 0;
            if attempting {
                attempting = false;
                park_abort(&sh, me, &mut msgs);
            }
            if serve(&sh, me, &local, &mut sched, job, &mut msgs) {
                let now = sh.clock.now();
                if dispatch.is_none() && now.saturating_sub(last_rx) >= YIELD_RX_PERIOD_NS {
                    last_rx = now;
                    poll_socket(&sh, &mut sched, RX_BATCH, &mut buf, &mut msgs);
                }
            }
            continue;
        }
        passes = passes.saturating_add(1);
        let now = sh.clock.now();
        let since = *idle_since.get_or_insert(now);
        if dispatch.is_some() && now - since >= crate::dispatcher::IDLE_SPIN_NS {
            // Nothing to do until the dispatcher hands something over: sleep, not spin (on 2
            // CPUs a spinning worker takes the dispatcher's CPU).
            crate::dispatcher::idle_wait(&sh);
            idle_since = None;
            passes = 0;
            continue;
        }
        let mut park = core.yield_requested.swap(false, Ordering::AcqRel);
        let asked = park;
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
                let mut alloc = sh.alloc.lock();
                let gate_before = sh.trace.get().and_then(|_| alloc.park_gate());
                let verdict = alloc.on_park_attempt(now, me as u16, active, rpc.link());
                park = verdict == ParkVerdict::Park;
                if let Some(t) = sh.trace.get() {
                    t.park_attempt(me, now, park, gate_before, alloc.park_gate());
                }
                drop(alloc);
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
            if let (Some(t), true) = (sh.trace.get(), asked) {
                t.instant(Some(me), instant::PARK, now, Some(("reason", Arg::Str("the allocator asked it to yield"))));
            }
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

/// Takes the head of the queue `next` says to run, if it says to run one (a steal waits until
/// the socket was polled).
fn run_from(sh: &Shared, local: &LocalQueue, me: usize, next: Next) -> Option<Job> {
    match next {
        Next::Run(Place::Core(c)) if c as usize == me => local.find_own(&sh.cores, me),
        // No policy runs another core's queue in place; taking its head is a steal of one.
        Next::Run(Place::Core(c)) => {
            let job = local.steal_from(&sh.cores, me, c as usize, |_| 1);
            if let (Some(t), Some(_)) = (sh.trace.get(), &job) {
                t.instant(Some(me), instant::STEAL, sh.clock.now(), Some(("from core", Arg::Int(c as u64))));
            }
            job
        }
        Next::Run(Place::Shared) => sh.shared.take(),
        Next::Run(Place::Class(k)) => sh.dispatch.as_ref().and_then(|d| d.take_class(k)),
        Next::Steal(_) | Next::Idle => None,
    }
}

/// A request that ran on `me` goes back to the queue the policy names, stamped now (the delay
/// signal counts its wait from when it became ready, as Caladan's runqueue delay does for a
/// woken thread). A yielder going back to this worker's run queue goes behind what arrived
/// meanwhile (`refill`), else a run queue of yielders would never let the worker reach its
/// inbox.
fn requeue(sh: &Shared, me: usize, local: &LocalQueue, sched: &mut Sched, why: Requeue, refill: bool, mut job: Job) {
    let core = &sh.cores[me];
    let now = sh.clock.now();
    // Its runqueue wait from here to its next resume joins its accumulated delay (ASQM).
    if let Some(Task::Running { coro, .. }) = job.task.as_deref_mut() {
        coro.ready_at = now;
    }
    // A preempted request goes back through the dispatcher where the policy routes it there.
    if let Some(d) = sh.dispatch.as_ref().filter(|d| why == Requeue::Preempted && d.routes.preempted) {
        d.post_preempted(sched.requeue(me, why), job);
        return;
    }
    match sched.requeue(me, why) {
        Place::Core(c) if c as usize == me => {
            if refill {
                local.refill(core);
            }
            local.requeue(core, job, now);
            if sh.preempt.enabled {
                sh.preempt.queued_at(me, &sh.clock, &sh.counters);
            }
        }
        place => sh.deliver(place, job, now),
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

/// Runs `job` until it completes or suspends. Returns whether it yielded (the worker then
/// checks the socket: a run queue of requests that keep yielding would otherwise never let the
/// worker reach its idle-time poll).
fn serve(sh: &Shared, me: usize, local: &LocalQueue, sched: &mut Sched, mut job: Job, msgs: &mut Vec<CreditMsg>) -> bool {
    let core = &sh.cores[me];
    let start = sh.clock.now();
    if crate::startdrop::check(sh, &job, start, msgs) {
        return false;
    }
    core.parker.set(start, Phase::Busy);
    if let Some(t) = sh.trace.get() {
        t.running(me, start, job.req_id);
    }
    // Time-slice preemption: this run's quantum, as the policy gives it (`Nanos::MAX`: it runs
    // to completion or to its own suspension points, directly on the worker's stack if it can).
    let quantum = if sh.preempt.enabled {
        sched.quantum(me, job.rtype, job.service_ns, sh.preempt.default_quantum)
    } else {
        Nanos::MAX
    };
    let preemptible = quantum != Nanos::MAX;
    let (mut coro, started) = match job.task.take().map(|t| *t) {
        None if !sh.handler.coroutine(job.rtype) && !preemptible => {
            let req = Request {
                session: job.session,
                req_id: job.req_id,
                rtype: job.rtype,
                service_ns: job.service_ns,
                program: &[],
            };
            if sh.handler.handle(&req, &mut Cx::direct()) == Outcome::Dropped {
                crate::asqm::reply_dropped(sh, &job, start, msgs);
                core.parker.set(sh.clock.now(), Phase::Search);
            } else {
                finish(sh, me, &job, start, msgs);
                sched.finished(me, job.service_ns);
            }
            return false;
        }
        Some(Task::Running { mut coro, started }) => {
            coro.acc_ns += start.saturating_sub(coro.ready_at);
            (coro, started)
        }
        task => {
            let Some(stack) = sh.stacks.take() else {
                // Every stack is held by a suspended request: this one waits its turn behind
                // them (they are in run queues or behind a mutex holder that is).
                job.task = task.map(Box::new);
                Counters::bump(&sh.counters.stack_waits);
                // It has not run yet: no refill, it keeps its place among the waiting.
                requeue(sh, me, local, sched, Requeue::Yielded, false, job);
                core.parker.set(sh.clock.now(), Phase::Search);
                return false;
            };
            let program = match task {
                Some(Task::Program(ops)) => ops,
                _ => Vec::new(),
            };
            let req = Request {
                session: job.session,
                req_id: job.req_id,
                rtype: job.rtype,
                service_ns: job.service_ns,
                program: &[],
            };
            Counters::bump(&sh.counters.coroutines);
            let mut coro = Coro::new(stack, sh.handler.clone(), req, program);
            coro.acc_ns = crate::asqm::seed(sh, &job, start);
            (coro, start)
        }
    };
    if preemptible {
        sh.preempt.arm(me, sh.clock.now(), quantum);
    }
    let disarm = || {
        if preemptible {
            sh.preempt.disarm(me);
        }
    };
    loop {
        let step = match coro.resume() {
            // The latency-aware synchronization API: answered here, or a plain lock step.
            Step::Suspended(Suspend::Asqm(ask)) => match crate::asqm::decide(sh, &coro, ask) {
                Verdict::Answer(a) => {
                    coro.answer = a;
                    continue;
                }
                Verdict::Acquire(id) => Step::Suspended(Suspend::Acquire(id)),
                Verdict::Reply => {
                    if !coro.replied {
                        coro.replied = true;
                        crate::asqm::reply_dropped(sh, &job, started, msgs);
                    }
                    continue;
                }
            },
            step => step,
        };
        match step {
            Step::Done(outcome) => {
                disarm();
                let replied = coro.replied;
                sh.stacks.give(coro.into_stack());
                if replied {
                    core.parker.set(sh.clock.now(), Phase::Search);
                } else if outcome == Outcome::Dropped {
                    crate::asqm::reply_dropped(sh, &job, started, msgs);
                    core.parker.set(sh.clock.now(), Phase::Search);
                } else {
                    finish(sh, me, &job, started, msgs);
                    sched.finished(me, job.service_ns);
                }
                return false;
            }
            Step::Suspended(Suspend::Preempt) => {
                disarm();
                Counters::bump(&sh.counters.preemptions);
                let now = sh.clock.now();
                job.task = Some(Box::new(Task::Running { coro, started }));
                // Behind what arrived meanwhile if it goes back here (Synergy sends it to the
                // wait queue, which any worker serves).
                if let Some(t) = sh.trace.get() {
                    t.instant(Some(me), instant::PREEMPTION, sh.clock.now(), Some(("request", Arg::Int(job.req_id))));
                }
                requeue(sh, me, local, sched, Requeue::Preempted, true, job);
                core.parker.set(now, Phase::Search);
                return true;
            }
            Step::Suspended(Suspend::Release(id)) => {
                // Shenango's thread_ready: the new owner becomes runnable here; the releaser
                // runs on.
                if let Some((mut waiter, since)) = sh.mutexes.release(id) {
                    let now = sh.clock.now();
                    crate::asqm::handed(sh, &mut waiter, id, since, now);
                    sh.counters.mutex_wait_ns.fetch_add(now.saturating_sub(since), Ordering::Relaxed);
                    requeue(sh, me, local, sched, Requeue::Woken, false, waiter);
                }
            }
            Step::Suspended(Suspend::Wait { cv, mutex }) => {
                disarm();
                Counters::bump(&sh.counters.condvar_waits);
                sh.condvar_stats.lock().wait(cv);
                let now = sh.clock.now();
                let mut parked = Some((job, coro));
                let handed = sh.mutexes.wait(cv, mutex, now, || {
                    let (mut j, coro) = parked.take().expect("parked once");
                    j.task = Some(Box::new(Task::Running { coro, started }));
                    j
                });
                if let Some((mut waiter, since)) = handed {
                    crate::asqm::handed(sh, &mut waiter, mutex, since, now);
                    sh.counters.mutex_wait_ns.fetch_add(now.saturating_sub(since), Ordering::Relaxed);
                    requeue(sh, me, local, sched, Requeue::Woken, false, waiter);
                }
                core.parker.set(now, Phase::Search);
                return false;
            }
            Step::Suspended(Suspend::Notify { cv, all }) => {
                let now = sh.clock.now();
                for (mut waiter, since) in sh.mutexes.notify(cv, all) {
                    Counters::bump(&sh.counters.condvar_wakeups);
                    sh.condvar_stats.lock().woken(cv, now.saturating_sub(since));
                    crate::asqm::signalled(&mut waiter, since, now);
                    requeue(sh, me, local, sched, Requeue::Woken, false, waiter);
                }
            }
            Step::Suspended(Suspend::Acquire(id)) => {
                Counters::bump(&sh.counters.lock_acquisitions);
                if coro.replied {
                    Counters::bump(&sh.counters.lock_cleanups);
                    crate::asqm::cleanup(sh, id);
                }
                let now = sh.clock.now();
                if sh.mutexes.is_spin(id) {
                    // A spin lock: wait in its FIFO on this worker, spinning until handed it.
                    if let Some(flag) = sh.mutexes.acquire_spin(id, now) {
                        crate::asqm::acquired(sh, id, true);
                        Counters::bump(&sh.counters.mutex_waits);
                        while !flag.load(Ordering::Acquire) {
                            if stopping(sh) {
                                // The holder will not run again: the request is abandoned
                                // (still counted among the mutex's waiters).
                                disarm();
                                std::mem::forget(coro);
                                return false;
                            }
                            std::hint::spin_loop();
                        }
                        let done = sh.clock.now();
                        let waited = done.saturating_sub(now);
                        sh.counters.mutex_wait_ns.fetch_add(waited, Ordering::Relaxed);
                        coro.acc_ns += waited;
                        if let Some(a) = &sh.asqm {
                            let over = coro.acc_ns > a.rule.budget_ns;
                            sh.counters.waits_over_budget.fetch_add(u64::from(over), Ordering::Relaxed);
                            a.stats.lock().handed(id, waited, done, over);
                        }
                    } else {
                        crate::asqm::acquired(sh, id, false);
                    }
                    continue;
                }
                let mut parked = Some((job, coro));
                let got = sh.mutexes.acquire(id, now, || {
                    // Under the mutex table's lock: counted as a waiter before anyone can hand
                    // it the mutex.
                    crate::asqm::acquired(sh, id, true);
                    let (mut j, coro) = parked.take().expect("parked once");
                    j.task = Some(Box::new(Task::Running { coro, started }));
                    j
                });
                if got {
                    crate::asqm::acquired(sh, id, false);
                }
                if !got {
                    disarm();
                    Counters::bump(&sh.counters.mutex_waits);
                    core.parker.set(sh.clock.now(), Phase::Search);
                    return false;
                }
                (job, coro) = parked.take().expect("not parked");
            }
            Step::Suspended(Suspend::Yield) => {
                disarm();
                Counters::bump(&sh.counters.yields);
                let now = sh.clock.now();
                job.task = Some(Box::new(Task::Running { coro, started }));
                requeue(sh, me, local, sched, Requeue::Yielded, true, job);
                core.parker.set(now, Phase::Search);
                return true;
            }
            Step::Suspended(Suspend::Asqm(_)) => unreachable!("answered above"),
        }
    }
}

fn stopping(sh: &Shared) -> bool {
    sh.stop.load(Ordering::Relaxed)
}

/// The request is done: account for it, return its credit, answer.
fn finish(sh: &Shared, me: usize, job: &Job, started: Nanos, msgs: &mut Vec<CreditMsg>) {
    let core = &sh.cores[me];
    let done = sh.clock.now();
    core.parker.set(done, Phase::Search);
    if let Some(t) = sh.trace.get() {
        t.request(me, job.req_id, job.arrived, done, false);
    }
    core.completed.fetch_add(1, Ordering::Relaxed);
    let credits = sh.complete_credits(done, job.session, msgs);
    Counters::bump(&sh.counters.completed);
    if let Some(d) = sh.dispatch.as_ref().filter(|d| d.routes.completions) {
        d.completed();
    }
    let msg = Msg::Response {
        req_id: job.req_id,
        credits,
        status: Status::Ok,
        qdelay_ns: started.saturating_sub(job.arrived),
        service_ns: done.saturating_sub(started),
    };
    sh.send(&encode(&msg), job.peer);
}
