//! What the load generator and the controller cost the workers when they share the machine's
//! CPUs (one machine, loopback): each of those threads sleeps between wake-ups, and on a small
//! VM a wake-up costs tens of µs of CPU (timer, scheduler, system calls), taken from whichever
//! worker's CPU it lands on. Their own thread clocks measure it; the simulator replays it as
//! preemptive-resume interference spread over the cores (`server.irq`), so that a scenario run
//! in both can be compared with the harness's cost on both sides.

use serde::Serialize;

use crate::loadgen::ClientCounters;
use crate::report::ControllerReport;

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Harness {
    /// CPUs' worth of harness work (CPU-seconds per second of each thread's run, summed).
    pub cpus: f64,
    /// CPU per wake-up of a harness thread, µs: the size of one burst of interference.
    pub burst_us: f64,
    /// Bursts per second that make `cpus` (`server.irq.rate_per_s`).
    pub rate_per_s: f64,
}

impl Harness {
    pub fn of(client: &ClientCounters, ctl: &ControllerReport) -> Self {
        let ctl_ms = ctl.ticks as f64 * ctl.mean_tick_us / 1e3;
        let share = |cpu_ms: f64, run_ms: f64| if run_ms > 0.0 { cpu_ms / run_ms } else { 0.0 };
        let cpus = share(client.cpu_ms, client.loop_ms) + share(ctl.cpu_ms, ctl_ms);
        let wakeups = client.wakeups + ctl.ticks;
        let burst_us = if wakeups > 0 { (client.cpu_ms + ctl.cpu_ms) * 1e3 / wakeups as f64 } else { 0.0 };
        let rate_per_s = if burst_us > 0.0 { cpus / (burst_us * 1e-6) } else { 0.0 };
        Self { cpus, burst_us, rate_per_s }
    }

    /// The simulator's overrides that replay it. The closed-loop `client_ns` of the
    /// `this-machine` stack profile is set to 0: the load generator's CPU is in the bursts.
    pub fn sim_overrides(&self) -> Vec<String> {
        if self.rate_per_s <= 0.0 {
            return Vec::new();
        }
        vec![
            "server.stack.client_ns=0".into(),
            format!("server.irq.rate_per_s={:.0}", self.rate_per_s),
            format!("server.irq.cost_us={:.2}", self.burst_us),
        ]
    }
}
