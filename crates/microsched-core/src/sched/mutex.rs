//! Mutexes with FIFO waiters that remember when they started waiting: the oldest waiter's age
//! is a lock's queueing delay (what Protego's ASQM reads), and a waiter's wait is added to its
//! request's accumulated queueing time when the lock is handed to it. Ownership passes directly
//! to the first waiter on release (no barging), as Shenango's mutex does.

use std::collections::VecDeque;

use crate::Nanos;

#[derive(Debug, Clone)]
struct Mutex<W> {
    held: bool,
    waiters: VecDeque<(W, Nanos)>,
}

/// Every mutex of a workload, by id.
#[derive(Debug, Clone)]
pub struct MutexTable<W> {
    locks: Vec<Mutex<W>>,
    /// Waiters over all mutexes.
    waiting: usize,
}

impl<W: Copy> MutexTable<W> {
    pub fn new(n: u32) -> Self {
        Self { locks: (0..n).map(|_| Mutex { held: false, waiters: VecDeque::new() }).collect(), waiting: 0 }
    }

    /// Takes mutex `id` for `w` if it is free (true); else queues `w` as a waiter from `now`.
    pub fn acquire(&mut self, id: u32, w: W, now: Nanos) -> bool {
        let m = &mut self.locks[id as usize];
        if !m.held {
            m.held = true;
            return true;
        }
        m.waiters.push_back((w, now));
        self.waiting += 1;
        false
    }

    /// Releases mutex `id`; if someone waits, it now owns the mutex and is returned with the
    /// time it started waiting.
    pub fn release(&mut self, id: u32) -> Option<(W, Nanos)> {
        let m = &mut self.locks[id as usize];
        debug_assert!(m.held, "release of a free mutex");
        match m.waiters.pop_front() {
            Some(w) => {
                self.waiting -= 1;
                Some(w)
            }
            None => {
                m.held = false;
                None
            }
        }
    }

    /// Age of mutex `id`'s oldest waiter (0 with none).
    pub fn oldest_wait(&self, id: u32, now: Nanos) -> Nanos {
        self.locks[id as usize].waiters.front().map_or(0, |&(_, t)| now - t)
    }

    pub fn is_held(&self, id: u32) -> bool {
        self.locks[id as usize].held
    }

    /// Waiters over all mutexes.
    pub fn waiting(&self) -> usize {
        self.waiting
    }

}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_over_in_fifo_order_with_enqueue_times() {
        let mut t = MutexTable::new(2);
        assert!(t.acquire(0, 'a', 0));
        assert!(!t.acquire(0, 'b', 10));
        assert!(!t.acquire(0, 'c', 15));
        assert!(t.acquire(1, 'd', 15), "another mutex is independent");
        assert_eq!(t.oldest_wait(0, 40), 30);
        assert_eq!(t.waiting(), 2);
        assert_eq!(t.release(0), Some(('b', 10)));
        assert!(t.is_held(0), "ownership passes to the waiter");
        assert_eq!(t.release(0), Some(('c', 15)));
        assert_eq!(t.release(0), None);
        assert!(!t.is_held(0));
        assert_eq!(t.waiting(), 0);
    }
}
