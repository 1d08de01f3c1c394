//! Live requests, in a slab indexed by u32 so that events and queues carry 4-byte handles.

use std::ops::{Index, IndexMut};

use microsched_core::Nanos;

#[derive(Debug, Clone, Copy, Default)]
pub struct Req {
    /// Sequence number in creation order (the same across policies on one seed).
    pub id: u64,
    /// Creation at the client: latency is measured from here.
    pub created: Nanos,
    pub service: Nanos,
    /// Arrival at the server: queueing delay is measured from here.
    pub arrive: Nanos,
    pub start: Nanos,
    pub done: Nanos,
    /// Its client session, numbered within its application.
    pub session: u32,
    /// Its session numbered across applications: what steering hashes and credit controllers
    /// key on.
    pub flow: u32,
    pub rtype: u16,
    pub app: u16,
    /// The server node it was sent to.
    pub node: u16,
    /// Times it was resent to another replica after a failure reply.
    pub tries: u8,
    pub dropped: bool,
    /// When it last joined a runqueue (arrival, preemption, yield, wake-up): the age of the
    /// oldest queued request is the congestion signal.
    pub enqueued_at: Nanos,
    /// Time spent queued so far, runqueue and lock waits, across re-queues.
    pub queued_ns: Nanos,
    /// Remaining time of the current compute op.
    pub left: Nanos,
    /// Index of the current op of its program.
    pub pc: u16,
    /// The core it last ran on.
    pub core: u16,
    /// Its ops are in the server's program table (else: one compute of `service`).
    pub has_program: bool,
    /// `left` belongs to the current op (it was entered).
    pub in_op: bool,
    /// Its packet cost was paid.
    pub received: bool,
    pub started: bool,
    /// Preempted since it last ran: resuming costs the mechanism's return cost.
    pub preempted: bool,
    pub waiting_lock: bool,
    /// A dropped request's cleanup thread: it answers no client and is never dropped.
    pub ghost: bool,
}

#[derive(Debug, Default)]
pub struct Slab {
    reqs: Vec<Req>,
    free: Vec<u32>,
}

impl Slab {
    pub fn insert(&mut self, r: Req) -> u32 {
        match self.free.pop() {
            Some(i) => {
                self.reqs[i as usize] = r;
                i
            }
            None => {
                self.reqs.push(r);
                (self.reqs.len() - 1) as u32
            }
        }
    }

    pub fn remove(&mut self, i: u32) -> Req {
        self.free.push(i);
        self.reqs[i as usize]
    }

    /// Requests currently alive (counted from the slab itself, not from the counters it is
    /// checked against).
    pub fn live(&self) -> usize {
        self.reqs.len() - self.free.len()
    }
}

impl Index<u32> for Slab {
    type Output = Req;
    #[inline]
    fn index(&self, i: u32) -> &Req {
        &self.reqs[i as usize]
    }
}

impl IndexMut<u32> for Slab {
    #[inline]
    fn index_mut(&mut self, i: u32) -> &mut Req {
        &mut self.reqs[i as usize]
    }
}
