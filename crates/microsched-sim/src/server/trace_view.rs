//! What the timeline recorder (`crate::trace`) reads of the server: read-only views, kept apart
//! from the mechanism so that tracing cannot change a run.

use microsched_core::trace::DispatcherActivity;

use super::cores::CoreMode;
use super::Server;

impl Server {
    pub fn core_count(&self) -> usize {
        self.q.cores.len()
    }

    /// Whether core `c` is in the middle of a steal.
    pub fn is_stealing(&self, c: u16) -> bool {
        self.q.cores[c as usize].stealing
    }

    /// The cores parked, and the cores busy (running or in preemption overhead), now.
    pub fn parked_busy_counts(&self) -> (usize, usize) {
        let m = &self.q.ledger.in_mode;
        (m[CoreMode::Parked as usize] as usize, (m[CoreMode::Busy as usize] + m[CoreMode::Overhead as usize]) as usize)
    }

    /// What the dispatcher does (None inside: polling) and for which request slot; None: the
    /// server has no dispatcher.
    pub fn dispatcher_activity(&self) -> Option<Option<(DispatcherActivity, u32)>> {
        self.dispatcher.as_ref().map(|d| d.activity())
    }
}
