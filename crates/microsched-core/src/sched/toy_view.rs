//! A toy server for the queueing policies' unit tests: per-core queue lengths, a central
//! queue, class queues and the spinning cores, set by hand.

use super::{Place, ServerView};

#[derive(Debug, Clone, Default)]
pub struct ToyView {
    /// Per core: its own queue's length (`Place::Core`); also the core count.
    pub own: Vec<usize>,
    /// The central queue's length (`Place::Shared`).
    pub shared: usize,
    /// Per class: its queue's length (`Place::Class`); missing classes are empty.
    pub class: Vec<usize>,
    pub spinners: Vec<u16>,
}

impl ServerView for ToyView {
    fn max_cores(&self) -> usize {
        self.own.len()
    }
    fn is_active(&self, _core: u16) -> bool {
        true
    }
    fn active(&self) -> &[u16] {
        &[]
    }
    fn spinners(&self) -> &[u16] {
        &self.spinners
    }
    fn victims(&self) -> &[u16] {
        &[]
    }
    fn queue_len(&self, place: Place) -> usize {
        match place {
            Place::Core(c) => self.own[c as usize],
            Place::Shared => self.shared,
            Place::Class(k) => self.class.get(k as usize).copied().unwrap_or(0),
        }
    }
    fn queued(&self) -> u64 {
        0
    }
}
