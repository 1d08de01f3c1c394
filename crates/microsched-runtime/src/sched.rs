//! The runtime as a driver of `microsched-core`'s queueing policies
//! ([`QueuePolicy`](microsched_core::sched::QueuePolicy)), the very objects the simulator
//! drives: where an arriving request waits (`steer`), where a yielded or woken one goes back to
//! (`requeue`), and where an idle worker finds work and how much it steals (`next`,
//! `steal`), which requests are preemptible and with what quantum (`quantum`, `finished`,
//! `preempt_at_quantum`: [`crate::preempt`]). The runtime only carries the decisions out.
//!
//! Every thread that decides (each worker, and the controller, which receives datagrams when no
//! worker polls the socket) owns a [`Sched`]: its own policy instance, built from the scenario
//! with a seed of its own, and its own view. Policies take `&mut self` (d-FCFS draws its victims
//! from a random stream), and one shared instance would need a lock on every arrival and every
//! idle pass. The policies' state is only that stream, so per-thread instances decide as one
//! would, except that the victim draws are interleaved differently (the simulator's single
//! stream has no counterpart in concurrent threads anyway). Synergy's state is more than that
//! (per-worker EMAs, which workers run long requests, soft-ring counts, the wait queue's
//! counters, read across workers when stealing), so a per-request policy is one instance that
//! every thread decides with, behind a lock ([`crate::preempt::Preempt::shared_policy`]): the
//! decisions are the simulator's, serialized as its event loop serializes them.
//!
//! The view ([`RtView`]) reads the live shared state without locks, lazily (a decision reads
//! only what its policy asks for) and at most once per decision (a decision sees one
//! snapshot). The snapshot is approximate: a worker's phase and a queue's length may change
//! between the read and the decision's effect, since the other workers run on. The driver
//! tolerates every such race: a request steered to a worker that parks meanwhile waits in its
//! inbox, where the controller sees it and grants that worker first; a steal from a queue that
//! emptied meanwhile is a fruitless pass; a length read as positive while the item is not yet
//! visible (stamps are taken before the push) costs one empty pop.

use std::cell::OnceCell;
use std::sync::Arc;

use microsched_core::rng::hash;
use microsched_core::scenario::Scenario;
use microsched_core::sched::{self, Next, Place, QueuePolicy, Requeue, ServerView};
use microsched_core::Nanos;

use crate::config::MAX_WORKERS;
use crate::park::Phase;
use crate::server::Shared;

/// A set of cores, in index order (the order policies that pick "a random victim" index into).
#[derive(Debug, Clone, Copy)]
struct Cores {
    ids: [u16; MAX_WORKERS as usize],
    n: usize,
}

impl Cores {
    fn collect(sh: &Shared, mut keep: impl FnMut(usize) -> bool) -> Self {
        let mut s = Cores { ids: [0; MAX_WORKERS as usize], n: 0 };
        for i in 0..sh.cores.len() {
            if keep(i) {
                s.ids[s.n] = i as u16;
                s.n += 1;
            }
        }
        s
    }
    fn as_slice(&self) -> &[u16] {
        &self.ids[..self.n]
    }
}

/// What a policy sees of the runtime: a lazily read, per-decision snapshot (see the module
/// doc for what is approximate).
pub struct RtView {
    sh: Arc<Shared>,
    active: OnceCell<Cores>,
    spinners: OnceCell<Cores>,
    /// Cores with waiting requests, and the total waiting (the shared queue's included): one
    /// pass over the queues fills both.
    victims: OnceCell<(Cores, u64)>,
    /// Report no spinning core (see [`Sched::without_spinners`]).
    no_spinners: bool,
}

impl RtView {
    fn new(sh: Arc<Shared>) -> Self {
        Self { sh, active: OnceCell::new(), spinners: OnceCell::new(), victims: OnceCell::new(), no_spinners: false }
    }

    /// Forgets the previous decision's snapshot.
    fn fresh(&mut self) -> &Self {
        self.active.take();
        self.spinners.take();
        self.victims.take();
        self
    }

    fn phase(&self, core: usize) -> Phase {
        self.sh.cores[core].parker.phase()
    }

    fn scan_queues(&self) -> &(Cores, u64) {
        self.victims.get_or_init(|| {
            let mut total = self.sh.shared.stamps.len() + self.sh.dispatch.as_ref().map_or(0, |d| d.class_queued());
            // Parked cores count: their queues are stealable (work steered to a core just
            // before it parked would otherwise wait for the controller's grant).
            let victims = Cores::collect(&self.sh, |i| {
                let q = self.sh.cores[i].queued();
                total += q;
                q > 0
            });
            (victims, total)
        })
    }
}

impl ServerView for RtView {
    #[inline]
    fn max_cores(&self) -> usize {
        self.sh.cores.len()
    }
    #[inline]
    fn is_active(&self, core: u16) -> bool {
        matches!(self.phase(core as usize), Phase::Busy | Phase::Search)
    }
    fn active(&self) -> &[u16] {
        self.active
            .get_or_init(|| Cores::collect(&self.sh, |i| matches!(self.phase(i), Phase::Busy | Phase::Search)))
            .as_slice()
    }
    fn spinners(&self) -> &[u16] {
        if self.no_spinners {
            return &[];
        }
        self.spinners.get_or_init(|| Cores::collect(&self.sh, |i| self.phase(i) == Phase::Search)).as_slice()
    }
    fn victims(&self) -> &[u16] {
        self.scan_queues().0.as_slice()
    }
    #[inline]
    fn queue_len(&self, place: Place) -> usize {
        match place {
            Place::Core(c) => self.sh.cores[c as usize].queued() as usize,
            Place::Shared => self.sh.shared.stamps.len() as usize,
            // Class queues live with the dispatcher (the policies that use them run with one).
            Place::Class(k) => self.sh.dispatch.as_ref().map_or(0, |d| d.class_len(k)),
        }
    }
    fn queued(&self) -> u64 {
        self.scan_queues().1
    }
}

/// One thread's policy instance and view. Policies with per-request state that other threads
/// read (Synergy) are one instance for every thread, behind a lock ([`crate::preempt::Preempt`]).
pub struct Sched {
    policy: Policy,
    view: RtView,
    per_request: bool,
}

enum Policy {
    Own(Box<dyn QueuePolicy<RtView>>),
    Shared(Arc<Shared>),
}

impl Sched {
    /// The policy of `sc` for deciding thread number `thread` (workers 0.., then the
    /// controller), with a random stream of its own.
    pub(crate) fn new(sc: &Scenario, thread: usize, sh: Arc<Shared>) -> Self {
        let seed = hash(sc.seed ^ hash(thread as u64 + 1));
        let (policy, per_request) = if sh.preempt.shared_policy.is_some() {
            (Policy::Shared(sh.clone()), true)
        } else {
            (Policy::Own(sched::build::<RtView>(sc, seed).expect("the scenario was validated, and the runtime refuses python queueing policies")), false)
        };
        Self { policy, view: RtView::new(sh), per_request }
    }

    /// Runs `f` on the policy and a fresh view.
    #[inline]
    fn with<R>(&mut self, f: impl FnOnce(&mut dyn QueuePolicy<RtView>, &RtView) -> R) -> R {
        let view = self.view.fresh();
        match &mut self.policy {
            Policy::Own(p) => f(p.as_mut(), view),
            Policy::Shared(sh) => {
                let mut p = sh.preempt.shared_policy.as_ref().expect("shared policy").lock();
                f(p.as_mut(), view)
            }
        }
    }

    /// This thread's decisions see no spinning core. The dispatcher steers Tiny Quanta this way:
    /// its `steer` counts a request sent to an idle worker as started at once, which the
    /// simulator does, but a runtime worker between two requests is "searching" too and still
    /// takes it through the policy's `next` (which counts it again); without spinners every
    /// request is counted once, by `next`, as an idle worker takes it from its ring.
    pub fn without_spinners(mut self) -> Self {
        self.view.no_spinners = true;
        self
    }

    pub fn name(&mut self) -> &'static str {
        self.with(|p, _| p.name())
    }

    /// The queue an arriving request of session `sid` joins.
    #[inline]
    pub fn steer(&mut self, sid: u32) -> Place {
        self.with(|p, v| p.steer(sid, v))
    }

    /// The queue an arriving request of session `sid` and type `rtype` joins (policies that
    /// queue by type: Shinjuku, DARC). Only the dispatcher steers this way; the other drivers
    /// call [`Self::steer`], which every policy without a dispatcher answers the same.
    pub fn steer_typed(&mut self, sid: u32, rtype: u16) -> Place {
        if self.per_request {
            let now = self.view.sh.clock.now();
            return self.with(|p, v| {
                p.clock(now);
                p.steer_typed(sid, rtype, v)
            });
        }
        self.with(|p, v| p.steer_typed(sid, rtype, v))
    }

    /// For a class queue, before the request is queued there: the idle worker that runs it at
    /// once, if any (the dispatcher hands it to that worker directly).
    pub fn notify(&mut self, place: Place) -> Option<u16> {
        let now = self.view.sh.clock.now();
        self.with(|p, v| {
            p.clock(now);
            p.notify(place, v)
        })
    }

    /// Whether the dispatcher pushes central work to the workers' bounded queues (JBSQ).
    pub fn pushes(&mut self) -> bool {
        self.with(|p, _| p.pushes())
    }

    /// While the shared queue holds work: the worker its head goes to, if any has room.
    pub fn push_target(&mut self) -> Option<u16> {
        self.with(|p, v| p.push_target(v))
    }

    /// The dispatcher's slack at `now` (Concord's work-conserving dispatcher).
    pub fn dispatcher_slack(&mut self, now: Nanos) -> microsched_core::sched::Slack {
        self.with(|p, _| {
            p.clock(now);
            p.dispatcher_slack(now)
        })
    }

    /// Where idle worker `me` finds work.
    #[inline]
    pub fn next(&mut self, me: usize) -> Next {
        if self.per_request {
            let now = self.view.sh.clock.now();
            return self.with(|p, v| {
                p.clock(now);
                p.next(me as u16, v)
            });
        }
        self.with(|p, v| p.next(me as u16, v))
    }

    /// `next` sent worker `me` to `place`, which it found empty (see [`QueuePolicy::missed`]).
    pub fn missed(&mut self, me: usize, place: Place) {
        if self.per_request {
            self.with(|p, _| p.missed(me as u16, place));
        }
    }

    /// How many of victim `v`'s `len` queued requests thief `me` takes.
    #[inline]
    pub fn steal(&mut self, me: usize, v: usize, len: usize) -> usize {
        self.with(|p, _| p.steal(me as u16, v as u16, len))
    }

    /// Where a request that ran on worker `me` goes back to.
    #[inline]
    pub fn requeue(&mut self, me: usize, why: Requeue) -> Place {
        // Shinjuku stamps the requeued request with the policy's clock (its dispatcher's; the
        // other drivers keep their decisions as they were).
        if self.per_request && self.view.sh.dispatch.is_some() {
            let now = self.view.sh.clock.now();
            return self.with(|p, v| {
                p.clock(now);
                p.requeue(me as u16, why, v)
            });
        }
        self.with(|p, v| p.requeue(me as u16, why, v))
    }

    /// The quantum of the request worker `me` starts or resumes (`Nanos::MAX`: not
    /// preemptible): the policy's for per-request policies, else the scenario's `default`.
    pub fn quantum(&mut self, me: usize, rtype: u16, service: Nanos, default: Nanos) -> Nanos {
        if !self.per_request {
            return default;
        }
        let now = self.view.sh.clock.now();
        self.with(|p, _| {
            p.clock(now);
            p.quantum(me as u16, rtype, service, default)
        })
    }

    /// A request of nominal service time `service` finished on worker `me`.
    pub fn finished(&mut self, me: usize, service: Nanos) {
        if self.per_request {
            self.with(|p, _| p.finished(me as u16, service));
        }
    }

    /// Whether worker `w`'s request is preempted now that its quantum expired.
    pub fn preempt_at_quantum(&mut self, w: usize) -> bool {
        self.with(|p, v| p.preempt_at_quantum(w as u16, v))
    }
}
