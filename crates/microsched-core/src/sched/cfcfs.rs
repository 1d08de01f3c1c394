//! c-FCFS: one central FIFO queue served by every allocated core. Everything that goes back to
//! a runqueue (preempted, yielded, woken) joins its tail.

use super::{Next, Place, QueuePolicy, Requeue, ServerView};

#[derive(Debug, Clone, Copy, Default)]
pub struct CentralFcfs;

impl<V: ServerView + ?Sized> QueuePolicy<V> for CentralFcfs {
    fn name(&self) -> &'static str {
        "c-fcfs"
    }

    fn steer(&mut self, _flow: u32, _view: &V) -> Place {
        Place::Shared
    }

    fn notify(&mut self, _place: Place, _view: &V) -> Option<u16> {
        None
    }

    fn next(&mut self, _core: u16, view: &V) -> Next {
        if view.queue_len(Place::Shared) > 0 {
            Next::Run(Place::Shared)
        } else {
            Next::Idle
        }
    }

    fn requeue(&mut self, _core: u16, _why: Requeue, _view: &V) -> Place {
        Place::Shared
    }
}
