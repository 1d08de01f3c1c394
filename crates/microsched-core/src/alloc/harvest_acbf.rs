//! HarvestContainers' dynamic buffer (Hall et al., NSDI'26 §3.3): the buffer of idle Primary
//! cores is sized from the All-Cores-Busy Fraction (ACBF), the fraction of a sampling window
//! during which no core of the Primary was idle (lent cores count as busy: the buffer ran out).
//! Between window decisions the shared actuation ([`super::harvest`]) keeps exactly `buffer`
//! idle cores held and lends the rest, at microsecond pace.
//!
//! Two variants:
//!
//! * `paper` (default), §3.3: an **observation phase** (harvesting off: nothing lent) records
//!   ACBF for `observe_windows` windows; their minimum and maximum bound the Current Harvest
//!   Window (CHW). The **harvest phase** starts at the largest buffer and, per window: ACBF above
//!   the CHW grows the buffer by one (waxing) — at the largest buffer already, a new observation
//!   phase starts; inside the CHW for `confirm_windows` windows in a row shrinks it by one;
//!   below the CHW shrinks it at once (waning). The paper gives the CHW no tolerance, and read
//!   literally a Primary that was never all-busy while observed gets the window [0, 0], which
//!   any all-busy instant exceeds (the buffer then never shrinks for long). So "above" and
//!   "below" are judged `window_tolerance` outside the window: by default the Primary's
//!   `threshold`, the ACBF the artifact treats as insignificant for that application;
//!   `window_tolerance = 0` is the literal reading.
//! * `artifact`, `Balancer/main.c` (`doAdjust`, `within_error`): an EWMA (`alpha` 0.85 on the
//!   old value) of the all-busy time per window against a per-application absolute `threshold`;
//!   above it grow by one; otherwise shrink by one, but after a window above
//!   `within_error` × threshold only every `hysteresis_windows` + 1 windows (the first shrink is
//!   immediate: the artifact starts its counter at 11). The artifact's OBSERVE state affects
//!   only its first window and records values it never reads; it is not modelled, nor the
//!   "previous buffer was 1" clause of its all-busy test (the buffer never goes below 2).
//!
//! The buffer stays within [`min_buffer`, `max_buffer`] (the artifact's `LOW_TIC` 2 and
//! `static_targetIdleCores` 7 of 8 cores, hence "up to 75 % harvested"). Windows are the
//! paper's 1 s by default; scaled-down runs shorten them (ACBF is a fraction of the window, so
//! only the number of windows matters once a window holds many bursts).

use super::harvest::{HarvestReport, Harvester, Mechanism};
use super::{AllocAction, AllocView, CoreAllocator, ParkRule};
use crate::error::ScenarioError;
use crate::time::{ms, us, Nanos};

#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    Observe { windows: u32, low: f64, high: f64 },
    Harvest { low: f64, high: f64, within: u32 },
}

#[derive(Debug, Clone)]
pub struct AcbfAllocator {
    cfg: Config,
    poll: Nanos,
    window: Nanos,
    max_cores: usize,
    h: Harvester,
    buffer: usize,
    window_start: Nanos,
    busy_at_start: Nanos,
    phase: Phase,
    // artifact variant
    deficits: f64,
    latch: bool,
    surplus_evts: u32,
    /// ACBF of the last window (paper) or its EWMA (artifact).
    acbf: Option<f64>,
    /// Observation phases started (the first included).
    pub observations: u32,
    /// paper: how far outside the CHW an ACBF must be to count as above or below it.
    tolerance: f64,
}

impl AcbfAllocator {
    pub fn new(cfg: &Config, max_cores: u32) -> Self {
        let max_cores = max_cores as usize;
        let (phase, buffer) = match cfg.variant {
            Variant::Paper => (Phase::Observe { windows: 0, low: f64::INFINITY, high: 0.0 }, max_cores),
            Variant::Artifact => (Phase::Harvest { low: 0.0, high: 0.0, within: 0 }, cfg.max_buffer as usize),
        };
        Self {
            cfg: cfg.clone(),
            poll: us(cfg.poll_us),
            window: ms(cfg.window_ms),
            max_cores,
            h: Harvester::new(&cfg.mechanism),
            buffer,
            window_start: 0,
            busy_at_start: 0,
            phase,
            deficits: 0.0,
            latch: false,
            surplus_evts: cfg.hysteresis_windows + 1,
            acbf: None,
            observations: matches!(cfg.variant, Variant::Paper) as u32,
            tolerance: cfg.window_tolerance.unwrap_or(cfg.threshold),
        }
    }

    /// The buffer now, in cores (all cores during an observation phase).
    pub fn buffer(&self) -> usize {
        self.buffer
    }

    fn grow(&mut self) {
        self.buffer = (self.buffer + 1).min(self.cfg.max_buffer as usize);
    }
    fn shrink(&mut self) {
        self.buffer = self.buffer.saturating_sub(1).max(self.cfg.min_buffer as usize);
    }

    /// One window's decision, from its all-busy time over its length.
    pub fn end_window(&mut self, all_busy: Nanos, elapsed: Nanos) {
        let frac = all_busy as f64 / elapsed as f64;
        match self.cfg.variant {
            Variant::Paper => {
                self.acbf = Some(frac);
                self.phase = match self.phase {
                    Phase::Observe { windows, low, high } => {
                        let (windows, low, high) = (windows + 1, low.min(frac), high.max(frac));
                        if windows >= self.cfg.observe_windows {
                            self.buffer = self.cfg.max_buffer as usize;
                            Phase::Harvest { low, high, within: 0 }
                        } else {
                            Phase::Observe { windows, low, high }
                        }
                    }
                    Phase::Harvest { low, high, within } if frac > high + self.tolerance => {
                        if self.buffer >= self.cfg.max_buffer as usize {
                            // Waxing past the largest buffer: re-establish the CHW.
                            self.buffer = self.max_cores;
                            self.observations += 1;
                            Phase::Observe { windows: 0, low: f64::INFINITY, high: 0.0 }
                        } else {
                            self.grow();
                            let _ = within;
                            Phase::Harvest { low, high, within: 0 }
                        }
                    }
                    Phase::Harvest { low, high, within } if frac >= low - self.tolerance => {
                        let within = within + 1;
                        if within >= self.cfg.confirm_windows {
                            self.shrink();
                            Phase::Harvest { low, high, within: 0 }
                        } else {
                            Phase::Harvest { low, high, within }
                        }
                    }
                    Phase::Harvest { low, high, .. } => {
                        self.shrink();
                        Phase::Harvest { low, high, within: 0 }
                    }
                };
            }
            Variant::Artifact => {
                let a = self.cfg.alpha;
                self.deficits = a * self.deficits + (1.0 - a) * all_busy as f64;
                let acbf = self.deficits / elapsed as f64;
                self.acbf = Some(acbf);
                let thr = self.cfg.threshold;
                if acbf > thr {
                    self.grow();
                } else {
                    self.latch |= acbf > self.cfg.within_error * thr;
                    if self.latch {
                        if self.surplus_evts < self.cfg.hysteresis_windows {
                            self.surplus_evts += 1;
                        } else {
                            self.shrink();
                            self.surplus_evts = 0;
                            self.latch = false;
                        }
                    } else {
                        self.shrink();
                        self.surplus_evts = 0;
                    }
                }
            }
        }
    }
}

impl CoreAllocator for AcbfAllocator {
    fn interval(&self) -> Option<Nanos> {
        Some(self.poll)
    }
    fn tick(&mut self, obs: &dyn AllocView) -> AllocAction {
        let s = self.h.observe(obs);
        if s.now - self.window_start >= self.window {
            self.end_window(self.h.all_busy_ns - self.busy_at_start, s.now - self.window_start);
            self.window_start = s.now;
            self.busy_at_start = self.h.all_busy_ns;
        }
        self.h.act(&s, self.buffer, self.max_cores)
    }
    fn park_rule(&self) -> ParkRule {
        ParkRule::NEVER
    }
    fn grant_delay(&self) -> Option<Nanos> {
        Some(self.h.evict_delay)
    }
    fn refill_after_grant(&self) -> Nanos {
        self.h.refill
    }
    fn lent_wake(&self) -> Option<&crate::wake::WakeLatency> {
        Some(&self.h.lent_wake)
    }
    fn timeshare(&self) -> Option<super::harvest::Timeshare> {
        self.h.timeshare.is_on().then_some(self.h.timeshare)
    }
    fn grant_on_demand(&self) -> bool {
        self.h.last_grant_demand
    }
    /// The ACBF of the last window (its EWMA in the artifact variant), a fraction in [0, 1].
    fn signal(&self) -> Option<f64> {
        self.acbf
    }
    fn harvest_report(&self) -> Option<HarvestReport> {
        let paper = matches!(self.cfg.variant, Variant::Paper);
        let harvest_window = match self.phase {
            Phase::Harvest { low, high, .. } if paper => Some((low, high)),
            _ => None,
        };
        Some(HarvestReport { harvest_window, observations: paper.then_some(self.observations), ..self.h.report() })
    }
    fn name(&self) -> &'static str {
        "harvest_acbf"
    }
}

// ---------------------------------------------------------------------------------------------
// Configuration: the `[policy.allocator]` table of `kind = "harvest_acbf"`.

/// Which description of the ACBF controller runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Variant {
    /// The paper's observation / harvest phases with a Current Harvest Window.
    Paper,
    /// The artifact's EWMA against a per-application threshold with shrink hysteresis.
    Artifact,
}

/// HarvestContainers' ACBF-driven buffer of idle Primary cores.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// `paper` (observation / harvest phases, CHW) or `artifact` (EWMA + threshold).
    pub variant: Variant,
    /// ACBF sampling window, ms (the paper's and artifact's 1 s).
    pub window_ms: f64,
    /// Smallest buffer (the artifact's LOW_TIC).
    pub min_buffer: u32,
    /// Largest buffer, where the harvest phase starts (static_targetIdleCores).
    pub max_buffer: u32,
    /// Monitor / balancer poll period, µs (the artifact busy-polls).
    pub poll_us: f64,
    /// How cores move between Primary and Secondary.
    pub mechanism: Mechanism,
    /// paper: windows of an observation phase (60 × 1 s in the paper).
    pub observe_windows: u32,
    /// paper: windows inside the CHW before the buffer shrinks (the paper's "e.g. 10 seconds").
    pub confirm_windows: u32,
    /// paper: how far (in ACBF) outside the CHW a window's ACBF must be to count as above
    /// (grow) or below (shrink at once) it. Unset: `threshold`, the ACBF the artifact treats
    /// as insignificant for this Primary; 0: the paper read literally.
    pub window_tolerance: Option<f64>,
    /// artifact (and the paper variant's default `window_tolerance`): ACBF threshold of this
    /// Primary (LOWIDLEFREQ_THRESHOLD: memcached 0.001, MySQL 0.002, Xapian 0.33).
    pub threshold: f64,
    /// artifact: weight of the old value in the all-busy EWMA (ALPHA).
    pub alpha: f64,
    /// artifact: windows of shrink hysteresis (SURPLUS_EVTS_THRESH).
    pub hysteresis_windows: u32,
    /// artifact: fraction of the threshold above which the hysteresis latches (within_error).
    pub within_error: f64,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            variant: Variant::Paper,
            window_ms: 1000.0,
            min_buffer: 2,
            max_buffer: 7,
            poll_us: 1.0,
            mechanism: Mechanism::default(),
            observe_windows: 60,
            confirm_windows: 10,
            window_tolerance: None,
            threshold: 0.001,
            alpha: 0.85,
            hysteresis_windows: 10,
            within_error: 0.66,
        }
    }
}

impl super::AllocatorConfig for Config {
    fn validate(&self, field: &str) -> Result<(), ScenarioError> {
        use super::common::check_positive_us;
        super::common::check_window_ms(format!("{field}.window_ms"), self.window_ms)?;
        check_positive_us(format!("{field}.poll_us"), self.poll_us)?;
        if self.min_buffer > self.max_buffer {
            return Err(ScenarioError::new(
                format!("{field}.min_buffer"),
                format!("{} is not allowed: must be at most {field}.max_buffer ({})", self.min_buffer, self.max_buffer),
            ));
        }
        if self.observe_windows == 0 {
            return Err(ScenarioError::new(format!("{field}.observe_windows"), "0 is not allowed: must be at least 1"));
        }
        let tolerance = ("window_tolerance", self.window_tolerance.unwrap_or(0.0));
        for (key, v) in [("threshold", self.threshold), ("alpha", self.alpha), ("within_error", self.within_error), tolerance] {
            if !(0.0..=1.0).contains(&v) {
                return Err(ScenarioError::new(format!("{field}.{key}"), format!("{v} is not allowed: must be a fraction in [0, 1]")));
            }
        }
        self.mechanism.validate(&format!("{field}.mechanism"))
    }

    fn build(&self, env: &crate::env::AllocEnv) -> Box<dyn CoreAllocator> {
        let max_cores = env.max_cores;
        Box::new(AcbfAllocator::new(self, max_cores))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Nanos = 1_000_000_000;

    fn paper() -> AcbfAllocator {
        AcbfAllocator::new(&Config { observe_windows: 3, confirm_windows: 2, ..Default::default() }, 8)
    }

    /// ACBF fractions fed one window at a time; returns the buffer after each.
    fn feed(a: &mut AcbfAllocator, acbf: &[f64]) -> Vec<usize> {
        acbf.iter().map(|&f| {
            a.end_window((f * W as f64) as Nanos, W);
            a.buffer()
        }).collect()
    }

    #[test]
    fn paper_observes_then_waxes_and_wanes_around_the_chw() {
        let mut a = paper();
        assert_eq!(a.harvest_report().unwrap().harvest_window, None, "no CHW while observing");
        // Observation: nothing lent (buffer = all 8 cores); CHW = [0.01, 0.03].
        assert_eq!(feed(&mut a, &[0.01, 0.03, 0.02]), [8, 8, 7]);
        let (lo, hi) = a.harvest_report().unwrap().harvest_window.unwrap();
        assert!((lo - 0.01).abs() < 1e-9 && (hi - 0.03).abs() < 1e-9, "the summary reports the CHW: {lo} {hi}");
        assert_eq!(a.harvest_report().unwrap().observations, Some(1));
        // Inside the CHW: shrink only after 2 windows in a row; below it: shrink at once.
        assert_eq!(feed(&mut a, &[0.02, 0.02, 0.005, 0.0, 0.0, 0.0, 0.0]), [7, 6, 5, 4, 3, 2, 2]);
        // Waxing (above the CHW): grow by one per window, a window inside resets the count.
        assert_eq!(feed(&mut a, &[0.05, 0.05, 0.02, 0.05]), [3, 4, 4, 5]);
        // Above the CHW at the largest buffer: a new observation phase (harvesting off).
        assert_eq!(feed(&mut a, &[0.05, 0.05, 0.05]), [6, 7, 8]);
        assert_eq!(a.observations, 2);
        // The new CHW is [0.1, 0.2]: 0.15 is now inside.
        assert_eq!(feed(&mut a, &[0.1, 0.2, 0.15, 0.15, 0.15]), [8, 8, 7, 7, 6]);
    }

    #[test]
    fn the_chw_has_a_tolerance_and_the_literal_reading_is_an_option() {
        // Observed never all-busy: CHW [0, 0]. An ACBF of 0.0005 is inside it with the default
        // tolerance (threshold 0.001); read literally it is above, and at the largest buffer
        // that starts a new observation phase (8 cores held), whose CHW is then [0.0005, 0.0005].
        for (tolerance, after) in [(None, [6, 5]), (Some(0.0), [8, 7])] {
            let cfg = Config { observe_windows: 1, confirm_windows: 1, window_tolerance: tolerance, ..Default::default() };
            let mut a = AcbfAllocator::new(&cfg, 8);
            assert_eq!(feed(&mut a, &[0.0]), [7]);
            assert_eq!(feed(&mut a, &[0.0005, 0.0005]), after, "tolerance {tolerance:?}");
        }
        let bad = Config { window_tolerance: Some(1.5), ..Default::default() };
        let e = super::super::AllocatorConfig::validate(&bad, "policy.allocator").unwrap_err().to_string();
        assert!(e.contains("policy.allocator.window_tolerance") && e.contains("[0, 1]"), "{e}");
    }

    #[test]
    fn artifact_ewma_threshold_and_hysteresis() {
        let cfg = Config { variant: Variant::Artifact, threshold: 0.01, alpha: 0.0, hysteresis_windows: 2, ..Default::default() };
        let mut a = AcbfAllocator::new(&cfg, 8);
        assert_eq!(a.buffer(), 7);
        // Quiet: shrink each window, down to min 2.
        assert_eq!(feed(&mut a, &[0.0; 6]), [6, 5, 4, 3, 2, 2]);
        // Above the threshold: grow by one per window, up to 7.
        assert_eq!(feed(&mut a, &[0.02, 0.02]), [3, 4]);
        // Within error (> 0.66 × threshold) latches the hysteresis: the counter was reset to 0 by
        // the last immediate shrink, so 2 windows pass, then a shrink.
        assert_eq!(feed(&mut a, &[0.008, 0.0, 0.0, 0.0]), [4, 4, 3, 2]);
        // The EWMA: with alpha 0.85 one window of 0.1 reads as 0.015.
        let mut b = AcbfAllocator::new(&Config { variant: Variant::Artifact, threshold: 0.02, ..Default::default() }, 8);
        feed(&mut b, &[0.1]);
        assert!((b.signal().unwrap() - 0.015).abs() < 1e-12);
        assert_eq!(b.buffer(), 6);
    }
}
