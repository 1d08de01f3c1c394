//! The dispatcher thread: the runtime's counterpart of the simulator's dispatcher core
//! (`microsched_core::sched::dispatcher`), for the policies whose artifacts have one (Shinjuku,
//! Concord, Tiny Quanta, DARC) and for any scenario with `server.dispatcher`.
//!
//! It is the only thread that receives from the socket (workers and the controller no longer
//! poll it): every arrival is validated and admitted as before ([`crate::server::poll_socket`])
//! and steered by the scenario's policy object, the simulator's own (`steer_typed`: Shinjuku's
//! and DARC's per-type class queues; Concord's JBSQ mailboxes or its central queue; Tiny
//! Quanta's JSQ over the workers' rings). A class-queue request that the policy gives to an idle
//! worker (`notify`) goes straight to that worker's own queue, as Shinjuku's and Perséphone's
//! dispatchers write it into the worker's slot. Then, as the policy's `DISPATCHER_ROUTES` say:
//!
//! * completions: each worker reports its completions (a counter and a wake-up); the dispatcher
//!   takes them, and under JBSQ (Concord, `pushes`) refills the freed mailboxes from its central
//!   queue (`push_target`);
//! * preempted requests: the worker hands a preempted request to the dispatcher, which queues
//!   it where the policy's `requeue` says (Shinjuku, its type's queue; Concord, the central
//!   queue's tail; asked when the worker gives it up, while the policy still knows what that
//!   worker ran);
//! * signals: the dispatcher watches the workers' quantum deadlines instead of a timer thread
//!   and writes the preempt flag of an expired one ([`crate::preempt::scan`]; Shinjuku's posted
//!   interrupt and Concord's `concord_preempt_now` write are both a flag the request's yield
//!   points poll here). Tiny Quanta's workers keep their own timer (the timer thread), DARC
//!   never preempts.
//!
//! Concord's dispatcher also works when it has slack (`dispatcher_slack`): it takes the oldest
//! never-started request of the central queue (one without a program; with every mailbox full)
//! and runs it itself in slices as long as the policy's slack, a coroutine it resumes until it
//! completes, never handing it to a worker.
//!
//! On 2 CPUs nothing may spin for long: when a pass finds nothing to do for
//! [`IDLE_SPIN_NS`], the dispatcher blocks in `ppoll` on the socket and an event fd (the
//! workers' reports, a newly armed quantum) until the next quantum deadline; an idle worker
//! sleeps in `park` after [`IDLE_SPIN_NS`] until the dispatcher hands it work. Its utilisation
//! (time in passes that did something over the run), whether it saturated (≥ 99 %, the
//! simulator's rule) and its blocking are in the server's report, under the simulator's
//! `sched.dispatcher` keys.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use microsched_core::scenario::{Scenario, SchedCfg};
use microsched_core::sched::dispatcher::Routes;
use microsched_core::sched::{Place, Slack};
use microsched_core::summary::DispatcherLoad;
use microsched_core::Nanos;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use crate::coro::{Coro, Step, Suspend};
use crate::handler::Request;
use crate::park::Phase;
use crate::queue::{Job, SharedQueue};
use crate::report::Counters;
use crate::rpc::CreditMsg;
use crate::sched::Sched;
use crate::server::Shared;
use crate::wire::{encode, Msg, Status};

/// Idle time a dispatcher or worker spins before it blocks (a short spin keeps the hand-off
/// fast under load; a long one would take a CPU from the other threads on 2 CPUs).
pub const IDLE_SPIN_NS: Nanos = 20_000;
/// Longest block with nothing armed (a stop request is seen within it).
const MAX_BLOCK: Duration = Duration::from_millis(5);
/// Datagrams received per pass.
const RX_BATCH: usize = 32;

/// What the dispatcher shares with the workers.
pub(crate) struct Dispatch {
    pub routes: Routes,
    /// The dispatcher writes the preempt flags (else the timer thread does).
    pub signals_here: bool,
    /// A worker looks at its own queue before asking the policy (requests handed to it
    /// directly: Shinjuku's and DARC's class queues).
    pub own_first: bool,
    /// Central queues by class (`Place::Class`): Shinjuku's per type, DARC's per group, Tiny
    /// Quanta's busy list per worker.
    classes: Vec<SharedQueue>,
    /// Preempted requests handed back by their worker, with where the policy requeues them
    /// (decided by the worker when it gives the request up: Shinjuku's type is that of the
    /// request the worker ran, which its next request would overwrite).
    preempted: Mutex<Vec<(Place, Job)>>,
    /// Tiny Quanta (the dispatcher steers it without spinners: [`Sched::without_spinners`]).
    tq: bool,
    /// Completions reported and not yet taken.
    completions: AtomicU64,
    /// The dispatcher is blocked (a report must wake it).
    blocked: AtomicBool,
    efd: OwnedFd,
    /// Times idle workers went to sleep.
    pub worker_sleeps: AtomicU64,
    arrivals: AtomicU64,
    arrival_ns: AtomicU64,
}

/// The dispatcher's part of the server's report: the simulator's `sched.dispatcher` keys, and
/// how it waited.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct DispatcherReport {
    #[serde(flatten)]
    pub load: DispatcherLoad,
    /// It blocks when idle instead of spinning (always, on the runtime).
    pub blocks_when_idle: bool,
    /// Times it blocked, and its time blocked.
    pub blocks: u64,
    pub blocked_ns: u64,
    /// Times an idle worker went to sleep until the dispatcher handed it work.
    pub worker_sleeps: u64,
    /// Requests it ran itself with its slack (Concord), and its time on them.
    pub requests: u64,
    pub work_ns: u64,
    /// Length of the run it covers (s).
    pub duration_s: f64,
}

/// Whether the runtime runs `sc` with a dispatcher thread: the policies whose artifacts have
/// one, and any scenario with a dispatcher core.
pub fn wanted(sc: &Scenario) -> bool {
    sc.server.dispatcher.is_some() || !matches!(sc.policy.sched, SchedCfg::Queue | SchedCfg::Synergy(_))
}

impl Dispatch {
    pub(crate) fn new(sc: &Scenario, workers: usize, preempts: bool) -> std::io::Result<Self> {
        let routes = microsched_core::sched::dispatcher_routes(sc);
        // SAFETY: eventfd returns a new fd we own, or -1.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: fd is a fresh, valid descriptor owned by nothing else.
        let efd = unsafe { OwnedFd::from_raw_fd(fd) };
        let nclasses = sc.workload.types.len().max(workers).max(1);
        Ok(Dispatch {
            routes,
            signals_here: routes.signals && preempts,
            own_first: matches!(sc.policy.sched, SchedCfg::Shinjuku(_) | SchedCfg::Darc(_)),
            classes: (0..nclasses).map(|_| SharedQueue::default()).collect(),
            preempted: Mutex::new(Vec::new()),
            tq: matches!(sc.policy.sched, SchedCfg::TinyQuanta(_)),
            completions: AtomicU64::new(0),
            blocked: AtomicBool::new(false),
            efd,
            worker_sleeps: AtomicU64::new(0),
            arrivals: AtomicU64::new(0),
            arrival_ns: AtomicU64::new(0),
        })
    }

    pub fn fd(&self) -> i32 {
        self.efd.as_raw_fd()
    }

    pub fn class_len(&self, k: u8) -> usize {
        self.classes.get(k as usize).map_or(0, |q| q.stamps.len() as usize)
    }

    pub fn class_queued(&self) -> u64 {
        self.classes.iter().map(|q| q.stamps.len()).sum()
    }

    pub fn push_class(&self, k: u8, job: Job, at: Nanos) {
        self.classes[k as usize].push(job, at)
    }

    pub fn take_class(&self, k: u8) -> Option<Job> {
        self.classes.get(k as usize)?.take()
    }

    /// Requests handed back and not yet requeued (the dispatcher's backlog).
    pub fn backlog(&self) -> u64 {
        self.preempted.lock().len() as u64
    }

    /// Wakes the dispatcher if it is blocked.
    fn wake(&self) {
        if self.blocked.load(Ordering::SeqCst) {
            kick(self.fd());
        }
    }

    /// A worker hands back a preempted request, to be queued at `place`.
    pub fn post_preempted(&self, place: Place, job: Job) {
        self.preempted.lock().push((place, job));
        self.wake();
    }


    /// A worker reports a completion.
    pub fn completed(&self) {
        self.completions.fetch_add(1, Ordering::SeqCst);
        self.wake();
    }

    /// An admitted request (from [`crate::server::poll_socket`], on the dispatcher thread):
    /// steered by the policy and handed on.
    pub(crate) fn arrival(&self, sh: &Shared, sched: &mut Sched, sid: u32, job: Job, now: Nanos) {
        self.arrivals.fetch_add(1, Ordering::Relaxed);
        let place = sched.steer_typed(sid, job.rtype);
        let place = match place {
            // An idle worker runs it at once: into its own queue.
            Place::Class(_) if self.own_first => sched.notify(place).map_or(place, Place::Core),
            p => p,
        };
        hand(sh, place, job, now);
    }
}

/// Queues `job` at `place` and wakes a worker that can take it.
fn hand(sh: &Shared, place: Place, job: Job, at: Nanos) {
    sh.deliver(place, job, at);
    match place {
        Place::Core(c) => sh.cores[c as usize].parker.wake(),
        // Any idle worker may take it (the policy's `next` decides which class it serves).
        Place::Shared | Place::Class(_) => wake_idle(sh),
    }
}

/// Wakes the idle workers (few: the runtime runs 1–64; an idle one finds nothing and sleeps
/// again).
fn wake_idle(sh: &Shared) {
    for c in sh.cores.iter() {
        if c.parker.phase() == Phase::Search {
            c.parker.wake();
        }
    }
}

/// Adds one to event fd `fd` (wakes a `ppoll` on it).
pub(crate) fn kick(fd: i32) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a valid u64 to an fd we own; errors (counter full) are harmless.
    unsafe {
        libc::write(fd, &one as *const u64 as *const libc::c_void, 8);
    }
}

/// Empties event fd `fd`.
fn drain(fd: i32) {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a valid u64 from a non-blocking fd we own.
    unsafe {
        libc::read(fd, &mut v as *mut u64 as *mut libc::c_void, 8);
    }
}

/// Blocks until the socket or the event fd is readable or `timeout` passed.
fn block(sock: i32, efd: i32, timeout: Duration) {
    let mut fds = [
        libc::pollfd { fd: sock, events: libc::POLLIN, revents: 0 },
        libc::pollfd { fd: efd, events: libc::POLLIN, revents: 0 },
    ];
    let ts = libc::timespec { tv_sec: timeout.as_secs() as libc::time_t, tv_nsec: timeout.subsec_nanos() as libc::c_long };
    // SAFETY: two valid pollfds, a valid timespec, no signal mask.
    unsafe {
        libc::ppoll(fds.as_mut_ptr(), 2, &ts, std::ptr::null());
    }
    if fds[1].revents != 0 {
        drain(efd);
    }
}

/// The request the dispatcher runs with its slack (Concord), suspended between slices.
struct OwnWork {
    job: Job,
    coro: Coro,
    started: Nanos,
}

/// The dispatcher thread's loop.
pub(crate) fn run(sh: Arc<Shared>, sched: Sched) -> DispatcherReport {
    crate::clock::tight_timer_slack();
    let d = sh.dispatch.as_ref().expect("a dispatcher");
    let mut sched = if d.tq { sched.without_spinners() } else { sched };
    if d.signals_here {
        sh.preempt.watched_by(d.fd());
    }
    let pushes = sched.pushes();
    let mut rep = DispatcherReport { blocks_when_idle: true, ..Default::default() };
    let mut buf = [0u8; 2048];
    let mut msgs: Vec<CreditMsg> = Vec::new();
    let first = sh.clock.now();
    let mut busy: Nanos = 0;
    let mut idle_since: Option<Nanos> = None;
    let mut own: Option<OwnWork> = None;
    let mut slack_again: Nanos = 0;
    // The central queue's head, taken for the dispatcher's own work but not one it runs (it
    // has a program, or ran already): the next to push.
    let mut front: Option<Job> = None;
    while !sh.stop.load(Ordering::Relaxed) {
        let t0 = sh.clock.now();
        let mut did = false;
        // Preempted requests back to where the policy says.
        let back = std::mem::take(&mut *d.preempted.lock());
        if !back.is_empty() {
            for (place, job) in back {
                hand(&sh, place, job, sh.clock.now());
                rep.load.requeues += 1;
            }
            let t = sh.clock.now();
            rep.load.requeue_ns += t - t0;
            did = true;
        }
        let done = d.completions.swap(0, Ordering::SeqCst);
        if done > 0 {
            rep.load.completions += done;
            did = true;
        }
        // Quantum expiries: the preemption signals.
        let mut deadline = Nanos::MAX;
        if d.signals_here {
            let t = sh.clock.now();
            let (earliest, sent) = crate::preempt::scan(&sh, &mut sched);
            deadline = earliest;
            if sent > 0 {
                rep.load.signals += sent;
                rep.load.signal_ns += sh.clock.now() - t;
                did = true;
            }
        }
        // Arrivals.
        let t = sh.clock.now();
        let before = d.arrivals.load(Ordering::Relaxed);
        if crate::server::poll_socket(&sh, &mut sched, RX_BATCH, &mut buf, &mut msgs) > 0 {
            did = true;
            if d.arrivals.load(Ordering::Relaxed) > before {
                d.arrival_ns.fetch_add(sh.clock.now() - t, Ordering::Relaxed);
            }
        }
        // JBSQ: the central queue's head to a worker with a free mailbox slot.
        if pushes {
            while front.is_some() || !sh.shared.stamps.is_empty() {
                let Some(c) = sched.push_target() else { break };
                let Some(job) = front.take().or_else(|| sh.shared.take()) else { break };
                hand(&sh, Place::Core(c), job, sh.clock.now());
                did = true;
            }
        }
        let t1 = sh.clock.now();
        if did {
            busy += t1 - t0;
        }
        // Concord: its own request in the slack, when the mailboxes are full.
        if pushes && t1 >= slack_again {
            match sched.dispatcher_slack(t1) {
                Slack::Run(ns) => {
                    if own.is_none() && front.is_none() {
                        own = take_own(&sh, &mut front);
                    }
                    if let Some(w) = own.take() {
                        own = run_slice(&sh, w, ns, &mut rep, &mut msgs);
                        let t2 = sh.clock.now();
                        busy += t2 - t1;
                        rep.work_ns += t2 - t1;
                        idle_since = None;
                        continue;
                    }
                }
                Slack::After(at) => slack_again = at,
                Slack::Never => slack_again = Nanos::MAX,
            }
        }
        if did || own.is_some() {
            idle_since = None;
            continue;
        }
        let since = *idle_since.get_or_insert(t1);
        if t1 - since < IDLE_SPIN_NS {
            std::hint::spin_loop();
            continue;
        }
        // Block: until a datagram, a worker's report, a quantum armed, or the next deadline.
        d.blocked.store(true, Ordering::SeqCst);
        if d.signals_here {
            sh.preempt.idle(true);
        }
        let pending = d.completions.load(Ordering::SeqCst) > 0 || !d.preempted.lock().is_empty();
        if !pending {
            let now = sh.clock.now();
            let wait = match deadline {
                Nanos::MAX => MAX_BLOCK,
                dl => Duration::from_nanos(dl.saturating_sub(now)).min(MAX_BLOCK),
            };
            if !wait.is_zero() {
                block(sh.sock.as_raw_fd(), d.fd(), wait);
                rep.blocks += 1;
                rep.blocked_ns += sh.clock.now() - now;
            }
        }
        d.blocked.store(false, Ordering::SeqCst);
        if d.signals_here {
            sh.preempt.idle(false);
        }
        idle_since = None;
    }
    let end = sh.clock.now();
    let span = end.saturating_sub(first).max(1);
    rep.load.utilization = busy as f64 / span as f64;
    rep.load.saturated = rep.load.utilization >= DispatcherLoad::SATURATED;
    rep.load.arrivals = d.arrivals.load(Ordering::Relaxed);
    rep.load.arrival_ns = d.arrival_ns.load(Ordering::Relaxed);
    // Its own request and the central queue's head; the requests handed back are added once
    // every worker stopped (a worker may hand one back after this loop ended).
    rep.load.queued_end = own.is_some() as u64 + front.is_some() as u64;
    rep.worker_sleeps = d.worker_sleeps.load(Ordering::Relaxed);
    rep.duration_s = span as f64 / 1e9;
    if let Some(w) = own {
        sh.stacks.give(w.coro.into_stack());
    }
    rep
}

/// The oldest never-started request of the central queue, as a coroutine the dispatcher can
/// run in slices. A head with a program (locks, yields) or that ran already is left to the
/// workers: it goes to `front`, pushed before the rest; so does any when no stack is free.
fn take_own(sh: &Shared, front: &mut Option<Job>) -> Option<OwnWork> {
    let job = sh.shared.take()?;
    let stack = if job.task.is_none() && !sh.handler.coroutine(job.rtype) { sh.stacks.take() } else { None };
    let Some(stack) = stack else {
        *front = Some(job);
        return None;
    };
    let req = Request { session: job.session, req_id: job.req_id, rtype: job.rtype, service_ns: job.service_ns, program: &[] };
    Counters::bump(&sh.counters.coroutines);
    let coro = Coro::new(stack, sh.handler.clone(), req, Vec::new());
    let started = sh.clock.now();
    Some(OwnWork { job, coro, started })
}

/// Runs the dispatcher's own request for at most `ns`; returns it if unfinished.
fn run_slice(sh: &Shared, mut w: OwnWork, ns: Nanos, rep: &mut DispatcherReport, msgs: &mut Vec<CreditMsg>) -> Option<OwnWork> {
    crate::preempt::slice(ns);
    let step = w.coro.resume();
    crate::preempt::slice_end();
    match step {
        Step::Done(_) => {
            sh.stacks.give(w.coro.into_stack());
            rep.requests += 1;
            respond(sh, &w.job, w.started, msgs);
            None
        }
        Step::Suspended(Suspend::Preempt) => Some(w),
        // A plain request only computes: no other suspension happens.
        Step::Suspended(_) => Some(w),
    }
}

/// The dispatcher's own request is done: its credit back, its answer.
fn respond(sh: &Shared, job: &Job, started: Nanos, msgs: &mut Vec<CreditMsg>) {
    let done = sh.clock.now();
    let credits = sh.complete_credits(done, job.session, msgs);
    Counters::bump(&sh.counters.completed);
    let msg = Msg::Response { req_id: job.req_id, credits, status: Status::Ok, qdelay_ns: started.saturating_sub(job.arrived), service_ns: done.saturating_sub(started) };
    sh.send(&encode(&msg), job.peer);
}

/// An idle worker `me` in a server with a dispatcher: sleeps until handed work (or 1 ms).
pub(crate) fn idle_wait(sh: &Shared) {
    if let Some(d) = &sh.dispatch {
        d.worker_sleeps.fetch_add(1, Ordering::Relaxed);
    }
    std::thread::park_timeout(Duration::from_millis(1));
}
