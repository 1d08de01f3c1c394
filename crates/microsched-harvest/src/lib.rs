//! `microsched harvest`: HarvestContainers (Hall et al., NSDI'26) as a user-space Linux agent.
//! It lends the idle cores of latency-sensitive Primary processes to Secondary processes and
//! takes them back, deciding with the very controller objects the simulator runs
//! (`microsched_core::alloc::harvest_*`), monitoring from /proc (no kernel module), moving
//! threads with two-phase `sched_setaffinity`. See docs/reproductions/harvest.md, "The harvesting agent".

pub mod actuate;
pub mod agent;
pub mod cpus;
pub mod cpuset;
pub mod listener;
pub mod opts;
pub mod pods;
pub mod procfs;
pub mod state;

pub use agent::{Activity, Agent, Opts, PrimaryOpt, Report};
