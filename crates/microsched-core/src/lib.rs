//! microsched-core: everything the simulator and the real runtime share.
//!
//! * [`scenario`]: the scenario schema (one place, serde, unknown fields rejected) and its validation.
//! * [`alloc`]: core-allocation policies, pure state machines behind [`alloc::CoreAllocator`].
//! * [`overload`]: overload (credit) controllers behind [`overload::CreditController`].
//! * [`metrics`] and [`summary`]: the one result schema both drivers produce.
//! * [`trace`]: the timeline (trace-event JSON) both drivers write.
//!
//! Nothing in this crate reads a clock, sleeps, spawns or does I/O (except reading an
//! empirical CSV named by a scenario, which happens once, at load time, through [`files`]:
//! regular files only, of bounded size).

pub mod alloc;
pub mod dist;
pub mod env;
pub mod error;
pub mod files;
pub mod histograms;
pub mod log_linear;
pub mod metrics;
pub mod overload;
pub mod plugin;
pub mod program;
pub mod replay;
pub mod rng;
pub mod scenario;
pub mod sched;
pub mod stack;
pub mod summary;
pub mod time;
pub mod topology;
pub mod wake;
pub mod workload;
pub mod timeseries;
pub mod trace;

pub use error::ScenarioError;
pub use time::Nanos;
