//! Live requests, in a slab indexed by u32 so that events and queues carry 4-byte handles.

use std::ops::{Index, IndexMut};

use microsched_core::Nanos;

/// What the engine needs of a live request. Kept to one cache line (what only the request log
/// reads is in [`Stamps`], rarely-set flags share a byte): a run far above capacity holds
/// millions of them, and a request taken off a long queue is cold, so every line it spans is a
/// miss (cachegrind, overload-2x-none 20 s: 210 k LL read misses at 80 bytes, 100 k at 64).
#[derive(Debug, Clone, Copy, Default)]
pub struct Req {
    /// Creation at the client: latency is measured from here.
    pub created: Nanos,
    pub service: Nanos,
    /// When it last joined a runqueue (arrival, preemption, yield, wake-up): the age of the
    /// oldest queued request is the congestion signal.
    pub enqueued_at: Nanos,
    /// Time spent queued so far, runqueue and lock waits, across re-queues.
    pub queued_ns: Nanos,
    /// Remaining time of the current compute op.
    pub left: Nanos,
    /// Its client session, numbered within its application.
    pub session: u32,
    /// Its session numbered across applications: what steering hashes and credit controllers
    /// key on.
    pub flow: u32,
    pub rtype: u16,
    pub app: u16,
    /// The server node it was sent to.
    pub node: u16,
    /// Index of the current op of its program.
    pub pc: u16,
    /// The core it last ran on.
    pub core: u16,
    /// Times it was resent to another replica after a failure reply.
    pub tries: u8,
    pub dropped: bool,
    /// Its ops are in the server's program table (else: one compute of `service`).
    pub has_program: bool,
    /// `left` belongs to the current op (it was entered).
    pub in_op: bool,
    pub started: bool,
    /// [`Req::RECEIVED`], [`Req::PREEMPTED`], [`Req::WAITING_LOCK`], [`Req::GHOST`],
    /// [`Req::NOTIFIED`].
    pub flags: u8,
}

const _: () = assert!(std::mem::size_of::<Req>() == 64);

impl Req {
    /// Its packet cost was paid.
    pub const RECEIVED: u8 = 1;
    /// Preempted since it last ran: resuming costs the mechanism's return cost.
    pub const PREEMPTED: u8 = 2;
    pub const WAITING_LOCK: u8 = 4;
    /// A dropped request's cleanup thread: it answers no client and is never dropped.
    pub const GHOST: u8 = 8;
    /// A signal woke it from a condvar wait: it must re-take the condvar's mutex before
    /// checking again.
    pub const NOTIFIED: u8 = 16;

    #[inline(always)]
    pub fn has(&self, flag: u8) -> bool {
        self.flags & flag != 0
    }

    #[inline(always)]
    pub fn set(&mut self, flag: u8, on: bool) {
        if on {
            self.flags |= flag;
        } else {
            self.flags &= !flag;
        }
    }
}

/// A request's id and timeline, kept only when requests are logged.
#[derive(Debug, Clone, Copy, Default)]
pub struct Stamps {
    /// Sequence number in creation order (the same across policies on one seed).
    pub id: u64,
    /// Arrival at the server.
    pub arrive: Nanos,
    /// First run on a core.
    pub start: Nanos,
    /// Its response (or failure reply) leaves the server.
    pub done: Nanos,
}

#[derive(Debug, Default)]
pub struct Slab {
    reqs: Vec<Req>,
    free: Vec<u32>,
    /// By slot, when requests are logged.
    stamps: Option<Vec<Stamps>>,
}

impl Slab {
    /// A slab that keeps each request's [`Stamps`] (for the request log).
    pub fn with_stamps() -> Self {
        Self { stamps: Some(Vec::new()), ..Self::default() }
    }

    /// Stores a new request numbered `id`. Inlined into the arrival: once per request.
    #[inline(always)]
    pub fn insert(&mut self, r: Req, id: u64) -> u32 {
        let i = match self.free.pop() {
            Some(i) => {
                self.reqs[i as usize] = r;
                i
            }
            None => {
                self.reqs.push(r);
                (self.reqs.len() - 1) as u32
            }
        };
        if let Some(st) = &mut self.stamps {
            if st.len() <= i as usize {
                st.resize(i as usize + 1, Stamps::default());
            }
            st[i as usize] = Stamps { id, ..Stamps::default() };
        }
        i
    }

    /// Updates request `i`'s timeline, if timelines are kept.
    #[inline(always)]
    pub fn stamp(&mut self, i: u32, f: impl FnOnce(&mut Stamps)) {
        if let Some(st) = &mut self.stamps {
            f(&mut st[i as usize]);
        }
    }

    pub fn stamps(&self, i: u32) -> Stamps {
        self.stamps.as_ref().map_or_else(Stamps::default, |st| st[i as usize])
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
