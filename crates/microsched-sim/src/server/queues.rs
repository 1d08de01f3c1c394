//! The runqueues and core sets, apart from the mechanism that acts on them: what a queueing
//! policy may see of the server is exactly this file's [`ServerView`].

use std::collections::VecDeque;

use microsched_core::sched::{Place, ServerView};

use super::cores::{Core, CoreSet, Ledger};

/// The queues and core sets: what a queueing policy sees ([`ServerView`]).
#[derive(Debug)]
pub struct Queues {
    pub(super) max_cores: usize,
    pub cores: Vec<Core>,
    pub(super) shared: VecDeque<u32>,
    /// Class queues (`Place::Class`), created as policies first use them.
    pub(super) classes: Vec<VecDeque<u32>>,
    /// Active cores with nothing to do, polling: the first to hear of new work.
    pub(super) spinners: CoreSet,
    /// Active cores (busy or searching), for steering packets away from parked cores.
    pub(super) active: CoreSet,
    /// Cores a thief may steal from: a non-empty queue and not mid-steal themselves.
    pub(super) victims: CoreSet,
    /// Cores with a non-empty queue, mid-steal or not: the only ones with a queueing delay.
    pub(super) nonempty: CoreSet,
    pub(super) ledger: Ledger,
    /// Requests waiting in any queue.
    pub queued: u64,
}

impl ServerView for Queues {
    #[inline]
    fn max_cores(&self) -> usize {
        self.max_cores
    }
    #[inline]
    fn is_active(&self, core: u16) -> bool {
        self.cores[core as usize].is_active()
    }
    #[inline]
    fn active(&self) -> &[u16] {
        &self.active.items
    }
    #[inline]
    fn spinners(&self) -> &[u16] {
        &self.spinners.items
    }
    #[inline]
    fn victims(&self) -> &[u16] {
        &self.victims.items
    }
    #[inline]
    fn queue_len(&self, place: Place) -> usize {
        match place {
            Place::Core(c) => self.cores[c as usize].queue.len(),
            Place::Shared => self.shared.len(),
            Place::Class(k) => self.classes.get(k as usize).map_or(0, |q| q.len()),
        }
    }
    #[inline]
    fn queued(&self) -> u64 {
        self.queued
    }
}

impl Queues {
    /// Appends a runnable request to a queue (its enqueue time is set by the caller).
    #[inline(always)]
    pub(super) fn push(&mut self, place: Place, req: u32) {
        match place {
            Place::Core(c) => {
                let core = &mut self.cores[c as usize];
                core.save_tick(&self.ledger);
                core.queue.push_back(req);
                core.enqueued_total += 1;
                if !core.stealing {
                    self.victims.insert(c);
                }
                self.nonempty.insert(c);
            }
            Place::Shared => {
                // The shared queue is reported on core 0 (see `queued_cores`), its turnover
                // too: Shenango's standing-queue test differences these counters, and without
                // them it never saw a central queue's congestion (one core served an M/M/16).
                let core = &mut self.cores[0];
                core.save_tick(&self.ledger);
                core.enqueued_total += 1;
                self.shared.push_back(req)
            }
            Place::Class(k) => {
                if self.classes.len() <= k as usize {
                    self.classes.resize_with(k as usize + 1, VecDeque::new);
                }
                self.classes[k as usize].push_back(req)
            }
        }
        self.queued += 1;
    }

    #[inline(always)]
    pub(super) fn pop(&mut self, place: Place) -> Option<u32> {
        let r = match place {
            Place::Core(c) => {
                let core = &mut self.cores[c as usize];
                let r = core.queue.pop_front()?;
                core.dequeued_total += 1;
                if core.queue.is_empty() {
                    self.victims.remove(c);
                    self.nonempty.remove(c);
                }
                r
            }
            Place::Shared => {
                let r = self.shared.pop_front()?;
                self.cores[0].dequeued_total += 1;
                r
            }
            Place::Class(k) => self.classes.get_mut(k as usize)?.pop_front()?,
        };
        self.queued -= 1;
        Some(r)
    }
}
