//! The simulator's integration tests, one file per concern, linked into one test binary: a
//! binary per file cost more to link than its tests take to run (`scripts/test` builds them
//! all). `proptest_scenarios` stays a binary of its own: its counting global allocator must see
//! only its own test's allocations.

#[path = "../common/mod.rs"]
mod common;

mod artifact_breakwater;
mod client_burst;
mod concord;
mod condvar;
mod dispatcher;
mod engine;
mod harvest;
mod harvest_irq;
mod harvest_irq_per_request;
mod overload;
mod registry;
mod robust;
mod sched;
mod search;
mod stack;
mod study_allocator;
mod synergy;
mod theory;
mod trace;
