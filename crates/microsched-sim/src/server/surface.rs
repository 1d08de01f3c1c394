//! What the driver does to a server besides handing it events: installs the mechanisms a node's
//! policies bring, starts the measured window, passes on the sampled congestion signal, takes
//! the follow-ups the server left for it, and reads the counters its summary reports. The driver
//! calls these; the server's state is private to `server/`.
//!
//! Invariants: installing happens before the run starts; the follow-up lists are drained in the
//! order the server left them (last first, as the driver always took them).

use microsched_core::sched::asqm::LockStats;
use microsched_core::sched::irq::Irq;
use microsched_core::Nanos;

use super::{CondvarState, Idle, LockDropState, SchedCounters, Server, StartDrop, Timesharing};

impl Server {
    /// A harvesting controller's `mechanism.timeshare`.
    pub fn install_timeshare(&mut self, t: Timesharing) {
        self.timeshare = Some(Box::new(t));
    }

    /// Drops at lock steps (`server.lock_control`).
    pub fn install_lock_control(&mut self, l: LockDropState) {
        self.locks = Some(Box::new(l));
    }

    /// The request programs' condition variables, by name in id order (their window starts
    /// with [`Self::start_window`], at 0 in a run without warm-up).
    pub fn install_condvars(&mut self, names: Vec<String>) {
        self.condvars = Some(Box::new(super::CondvarState::new(names)));
    }

    /// NIC interrupt handlers interleaved with requests (`server.irq`).
    pub fn install_irq(&mut self, irq: Irq) {
        self.irq = Some(Box::new(irq));
    }

    /// Breakwater v2's worker-start drop.
    pub fn install_start_drop(&mut self, sd: StartDrop) {
        self.start_drop = Some(sd);
    }

    /// The congestion signal the driver just sampled, for the worker-start drop.
    #[inline]
    pub fn sample_delay_signal(&mut self, delay: Nanos) {
        if let Some(sd) = &mut self.start_drop {
            sd.sampled = delay;
        }
    }

    /// The measured window starts at `now`: the window's drop counts restart.
    pub fn start_window(&mut self, now: Nanos) {
        if let Some(l) = &mut self.locks {
            l.stats.start_window(now);
            l.drops = 0;
        }
        if let Some(sd) = &mut self.start_drop {
            sd.drops = 0;
        }
        if let Some(c) = &mut self.condvars {
            c.start_window();
        }
    }

    /// A core that found work in the middle of a park attempt, for the driver to report.
    #[inline]
    pub fn take_aborted_park(&mut self) -> Option<u16> {
        self.aborted_parks.pop()
    }

    /// A core that ran out of work inside the server, with what it did next.
    #[inline]
    pub fn take_idled(&mut self) -> Option<(u16, Idle)> {
        self.idled.pop()
    }

    /// The gap to the next NIC interrupt handler (`server.irq`); None: no interrupts.
    #[inline]
    pub fn next_irq_gap(&mut self) -> Option<Nanos> {
        self.irq.as_mut().and_then(|irq| irq.next_gap())
    }

    /// The mechanism's counters over the whole run (the driver takes window differences).
    #[inline]
    pub fn counters(&self) -> SchedCounters {
        self.counters
    }

    /// The interrupt handlers' state and counts (`server.irq`); None: no interrupts.
    pub fn irq(&self) -> Option<&Irq> {
        self.irq.as_deref()
    }

    /// Requests the worker-start drop answered with a failure in the measured window; None: off.
    pub fn start_drops(&self) -> Option<u64> {
        self.start_drop.map(|sd| sd.drops)
    }

    /// The lock steps' statistics and their drops in the measured window (`server.lock_control`);
    /// None: lock steps block.
    pub fn lock_drops(&self) -> Option<(&LockStats, u64)> {
        self.locks.as_ref().map(|l| (&l.stats, l.drops))
    }

    /// How long a dropped request's cleanup holds its mutex (0 without `server.lock_control`).
    pub fn lock_cleanup_ns(&self) -> Nanos {
        self.locks.as_ref().map_or(0, |l| l.rule.cleanup_ns)
    }

    /// The request programs' condition variables (`workload.condvars`); None: there are none.
    pub fn condvars(&self) -> Option<&CondvarState> {
        self.condvars.as_deref()
    }
}
