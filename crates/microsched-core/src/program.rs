//! Request programs: what a request does on the server beyond "compute for its service time".
//!
//! A request type may list `paths`: each a probability and a list of steps (compute, a critical
//! section under a mutex, a yield point). At generation a request draws its path and every
//! sampled time from named streams of its own type (`paths.<i>`, `hold.<i>`, `lockkey.<i>`),
//! so two policies run on one seed see the same programs (common random numbers), and a type
//! without paths draws nothing more than before. The drivers run the concrete [`Op`] list; the
//! simulator and the real runtime's handler read the same one.
//!
//! Mutexes are declared once under `[[workload.locks]]`: a named lock, or a family of `count`
//! locks a request picks among by hashing a key (Memcached's item locks), with an optional hot
//! set of keys (the skewed popularity of a key-value workload).

use std::path::Path;

use rand::Rng;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::dist::Sampler;
use crate::error::ScenarioError;
use crate::rng::{hash, stream, Stream};
use crate::scenario::{non_negative, Dist, Workload};
use crate::Nanos;

// ---------------------------------------------------------------------------------------------
// Configuration

/// A mutex, or a family of mutexes picked by key.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LockCfg {
    /// What lock steps name.
    pub name: String,
    /// Locks in the family (1: one global lock); a request takes the one its key hashes to.
    #[serde(default = "one_u32")]
    pub count: u32,
    /// Keys hashed onto the family (default: `count`, one key per lock).
    #[serde(default)]
    pub keys: Option<u64>,
    /// Skewed key popularity: `hot_keys` (a fraction of the keys) receive `hot_share` of the
    /// accesses (e.g. 0.1 and 0.9); absent: uniform.
    #[serde(default)]
    pub hot: Option<HotKeys>,
    /// A waiter spins on its core instead of freeing it (a spin lock); default: blocking, the
    /// waiter leaves its core to other work and joins the mutex's FIFO of waiters.
    #[serde(default)]
    pub spin: bool,
}

/// A condition variable request programs wait on and signal (a producer/consumer queue of
/// items): `lock` guards it and its item count. Waits take an item, or wait until a signal
/// adds one; nothing is lost (a signal with no waiter leaves its item for the next wait).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CondvarCfg {
    /// What `wait` and `signal` steps name.
    pub name: String,
    /// The lock guarding it: a `workload.locks[].name` with `count = 1` (one mutex).
    pub lock: String,
}

#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HotKeys {
    /// The fraction of the keys that are hot, in (0, 1].
    pub hot_keys: f64,
    /// The share of the accesses that go to the hot keys, in [0, 1].
    pub hot_share: f64,
}

/// One way through a request type's handler, taken with probability `prob`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathCfg {
    /// Probability of this path (the paths' probabilities are normalised over the type).
    #[serde(default = "one_f64")]
    pub prob: f64,
    /// The steps a request on this path runs, in order.
    pub steps: Vec<StepCfg>,
}

/// A step's CPU time: `share` of the request's sampled service time (default 1), or `time`, a
/// distribution of its own.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "op", rename_all = "snake_case", deny_unknown_fields)]
pub enum StepCfg {
    /// Work on the core.
    Compute {
        /// Share of the request's sampled service time this step takes (default 1).
        #[serde(default)]
        share: Option<f64>,
        /// The step's own CPU-time distribution, instead of `share`.
        #[serde(default)]
        time: Option<Dist>,
    },
    /// Acquire `lock`, do the work holding it, release it.
    Lock {
        /// The name of the lock (a `workload.locks[].name`).
        lock: String,
        /// Share of the request's sampled service time spent holding the lock (default 1).
        #[serde(default)]
        share: Option<f64>,
        /// The critical section's own CPU-time distribution, instead of `share`.
        #[serde(default)]
        time: Option<Dist>,
    },
    /// A yield point: the request goes back to the runqueue and the core looks for other work
    /// (a cooperative preemption point, as compiler interrupts insert).
    Yield,
    /// Consume an item of `condvar`: take its lock; while it has no item, wait on it (the lock
    /// released, the request off its core; under `server.lock_control` asqm a wait is refused,
    /// and the request dropped as at a lock, when its accumulated queueing delay plus the age
    /// of the condvar's oldest waiter exceeds the budget); then take one item and do the work
    /// holding the lock, and release it.
    Wait {
        /// The name of the condition variable (a `workload.condvars[].name`).
        condvar: String,
        /// Share of the request's sampled service time spent holding the lock after the wait
        /// (default 1).
        #[serde(default)]
        share: Option<f64>,
        /// The step's own CPU-time distribution, instead of `share`.
        #[serde(default)]
        time: Option<Dist>,
    },
    /// Produce an item for `condvar`: take its lock, do the work holding it, add one item, wake
    /// the oldest waiter (notify one, FIFO), release the lock.
    Signal {
        /// The name of the condition variable (a `workload.condvars[].name`).
        condvar: String,
        /// Share of the request's sampled service time spent holding the lock (default 1).
        #[serde(default)]
        share: Option<f64>,
        /// The step's own CPU-time distribution, instead of `share`.
        #[serde(default)]
        time: Option<Dist>,
    },
}

fn one_u32() -> u32 {
    1
}
fn one_f64() -> f64 {
    1.0
}

// ---------------------------------------------------------------------------------------------
// Concrete programs

/// Condition variables a scenario may declare: their ids index the runtime's table.
pub const MAX_CONDVARS: u32 = 1 << 16;

/// A step of one request's concrete program. Mutex ids index the flattened lock table (a
/// family's locks are consecutive); condition-variable ids index `workload.condvars`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Compute(Nanos),
    Acquire(u32),
    Release(u32),
    Yield,
    /// Holding `mutex`: take an item of condition variable `cv`, waiting on it (releasing
    /// `mutex`, re-taking it once notified) while it has none. A `wait` step is
    /// `Acquire(m), Wait, Compute, Release(m)`.
    Wait { cv: u32, mutex: u32 },
    /// Holding the condvar's mutex: add an item to `cv` and wake its oldest waiter. A `signal`
    /// step is `Acquire(m), Compute, Signal, Release(m)`.
    Signal(u32),
}

impl Op {
    /// The op with its mutex and condvar ids numbered after `mutex_base` mutexes and `cv_base`
    /// condvars (applications after the first share the nodes' tables).
    #[inline]
    pub fn offset(&mut self, mutex_base: u32, cv_base: u32) {
        match self {
            Op::Acquire(m) | Op::Release(m) => *m += mutex_base,
            Op::Wait { cv, mutex } => {
                *cv += cv_base;
                *mutex += mutex_base;
            }
            Op::Signal(cv) => *cv += cv_base,
            Op::Compute(_) | Op::Yield => {}
        }
    }
}

/// Where a step's time comes from, compiled.
#[derive(Debug, Clone)]
enum Work {
    Share(f64),
    Own(Sampler),
}

#[derive(Debug, Clone)]
enum Step {
    Compute(Work),
    Lock { lock: usize, work: Work },
    Yield,
    Wait { cv: u32, work: Work },
    Signal { cv: u32, work: Work },
}

#[derive(Debug, Clone)]
struct Lock {
    name: String,
    first_id: u32,
    count: u32,
    keys: u64,
    hot: Option<(u64, f64)>,
}

#[derive(Debug, Clone)]
struct TypeProgram {
    /// Cumulative path probabilities.
    cumulative: Vec<f64>,
    paths: Vec<Vec<Step>>,
    path_rng: Stream,
    hold_rng: Stream,
    key_rng: Stream,
}

/// The compiled programs of a workload, drawn per request.
#[derive(Debug, Clone, Default)]
pub struct Programs {
    locks: Vec<Lock>,
    /// Per request type; `None`: the type computes its service time and nothing else.
    types: Vec<Option<TypeProgram>>,
    /// Total mutexes (families flattened).
    mutexes: u32,
    /// Per mutex: a spin lock.
    spin: Vec<bool>,
    /// Per condition variable: its name and its lock's mutex id.
    condvars: Vec<(String, u32)>,
}

impl Programs {
    pub fn new(w: &Workload, base_dir: &Path, seed: u64) -> Result<Self, ScenarioError> {
        Self::for_app(w, base_dir, seed, "")
    }

    /// The programs of `w`, their streams named with `prefix` (applications after the first).
    pub fn for_app(w: &Workload, base_dir: &Path, seed: u64, prefix: &str) -> Result<Self, ScenarioError> {
        let mut locks = Vec::new();
        let mut mutexes = 0u32;
        let mut spin = Vec::new();
        for (i, l) in w.locks.iter().enumerate() {
            let f = format!("workload.locks[{i}]");
            if l.name.is_empty() {
                return Err(ScenarioError::new(format!("{f}.name"), "must not be empty"));
            }
            if w.locks[..i].iter().any(|o| o.name == l.name) {
                return Err(ScenarioError::new(format!("{f}.name"), format!("`{}` is declared twice", l.name)));
            }
            if l.count == 0 || l.count > 1 << 20 {
                return Err(ScenarioError::new(format!("{f}.count"), format!("{} is not allowed: use 1..=1048576", l.count)));
            }
            let keys = l.keys.unwrap_or(l.count as u64);
            if keys == 0 {
                return Err(ScenarioError::new(format!("{f}.keys"), "must be at least 1"));
            }
            let hot = match l.hot {
                None => None,
                Some(h) => {
                    for (name, v) in [("hot_keys", h.hot_keys), ("hot_share", h.hot_share)] {
                        if !(v > 0.0 && v < 1.0) {
                            return Err(ScenarioError::new(format!("{f}.hot.{name}"), format!("{v} is not allowed: use a fraction in (0, 1)")));
                        }
                    }
                    Some((((keys as f64 * h.hot_keys).round() as u64).clamp(1, keys), h.hot_share))
                }
            };
            locks.push(Lock { name: l.name.clone(), first_id: mutexes, count: l.count, keys, hot });
            spin.extend(std::iter::repeat_n(l.spin, l.count as usize));
            mutexes += l.count;
        }
        let mut condvars: Vec<(String, u32)> = Vec::new();
        if w.condvars.len() > MAX_CONDVARS as usize {
            return Err(ScenarioError::new(
                "workload.condvars",
                format!("at most {MAX_CONDVARS} condition variables (the runtime indexes a table by their ids); {} declared", w.condvars.len()),
            ));
        }
        for (i, c) in w.condvars.iter().enumerate() {
            let f = format!("workload.condvars[{i}]");
            if c.name.is_empty() {
                return Err(ScenarioError::new(format!("{f}.name"), "must not be empty"));
            }
            if condvars.iter().any(|(n, _)| n == &c.name) {
                return Err(ScenarioError::new(format!("{f}.name"), format!("`{}` is declared twice", c.name)));
            }
            let l = locks.iter().find(|l| l.name == c.lock).ok_or_else(|| {
                ScenarioError::new(format!("{f}.lock"), format!("no lock `{}` in workload.locks (declared: {})", c.lock, names(locks.iter().map(|l| l.name.as_str()))))
            })?;
            if l.count != 1 || w.locks.iter().any(|x| x.name == c.lock && x.spin) {
                return Err(ScenarioError::new(
                    format!("{f}.lock"),
                    format!("lock `{}` must be one blocking mutex (count = 1, spin = false) to guard a condition variable", c.lock),
                ));
            }
            condvars.push((c.name.clone(), l.first_id));
        }
        // Which condvars some step waits on / signals, with the first such step's field.
        let mut waited: Vec<Option<String>> = vec![None; condvars.len()];
        let mut signalled: Vec<Option<String>> = vec![None; condvars.len()];
        let mut types = Vec::with_capacity(w.types.len());
        for (i, t) in w.types.iter().enumerate() {
            if t.paths.is_empty() {
                types.push(None);
                continue;
            }
            let mut cumulative = Vec::new();
            let mut acc = 0.0;
            let mut paths = Vec::new();
            for (j, p) in t.paths.iter().enumerate() {
                let pf = format!("workload.types[{i}].paths[{j}]");
                non_negative(&format!("{pf}.prob"), p.prob)?;
                acc += p.prob;
                cumulative.push(acc);
                if p.steps.is_empty() {
                    return Err(ScenarioError::new(format!("{pf}.steps"), "needs at least one step"));
                }
                let mut steps = Vec::new();
                for (k, s) in p.steps.iter().enumerate() {
                    let sf = format!("{pf}.steps[{k}]");
                    steps.push(match s {
                        StepCfg::Compute { share, time } => Step::Compute(work(*share, time, base_dir, &sf)?),
                        StepCfg::Lock { lock, share, time } => {
                            let idx = w.locks.iter().position(|l| &l.name == lock).ok_or_else(|| {
                                let known: Vec<&str> = w.locks.iter().map(|l| l.name.as_str()).collect();
                                ScenarioError::new(
                                    format!("{sf}.lock"),
                                    format!("no lock `{lock}` in workload.locks (declared: {})", if known.is_empty() { "none".into() } else { known.join(", ") }),
                                )
                            })?;
                            Step::Lock { lock: idx, work: work(*share, time, base_dir, &sf)? }
                        }
                        StepCfg::Yield => Step::Yield,
                        StepCfg::Wait { condvar, share, time } | StepCfg::Signal { condvar, share, time } => {
                            let cv = condvars.iter().position(|(n, _)| n == condvar).ok_or_else(|| {
                                ScenarioError::new(
                                    format!("{sf}.condvar"),
                                    format!("no condition variable `{condvar}` in workload.condvars (declared: {})", names(condvars.iter().map(|(n, _)| n.as_str()))),
                                )
                            })?;
                            let work = work(*share, time, base_dir, &sf)?;
                            if matches!(s, StepCfg::Wait { .. }) {
                                waited[cv].get_or_insert_with(|| format!("{sf}.condvar"));
                                Step::Wait { cv: cv as u32, work }
                            } else {
                                signalled[cv].get_or_insert_with(|| format!("{sf}.condvar"));
                                Step::Signal { cv: cv as u32, work }
                            }
                        }
                    });
                }
                paths.push(steps);
            }
            if (acc - 1.0).abs() > 1e-9 {
                return Err(ScenarioError::new(
                    format!("workload.types[{i}].paths"),
                    format!("probabilities sum to {acc}, they must sum to 1"),
                ));
            }
            types.push(Some(TypeProgram {
                cumulative,
                paths,
                path_rng: stream(seed, &format!("{prefix}paths.{i}")),
                hold_rng: stream(seed, &format!("{prefix}hold.{i}")),
                key_rng: stream(seed, &format!("{prefix}lockkey.{i}")),
            }));
        }
        for (cv, (name, _)) in condvars.iter().enumerate() {
            match (&waited[cv], &signalled[cv]) {
                (Some(f), None) => {
                    return Err(ScenarioError::new(
                        f.clone(),
                        format!("condition variable `{name}` is waited on but no step signals it (add a step {{ op = \"signal\", condvar = \"{name}\" }}): its waiters would never wake"),
                    ))
                }
                (None, Some(f)) => {
                    return Err(ScenarioError::new(
                        f.clone(),
                        format!("condition variable `{name}` is signalled but no step waits on it (add a step {{ op = \"wait\", condvar = \"{name}\" }})"),
                    ))
                }
                _ => {}
            }
        }
        Ok(Self { locks, types, mutexes, spin, condvars })
    }

    /// The condition variables, in declaration order: name and their lock's mutex id.
    pub fn condvars(&self) -> impl Iterator<Item = (&str, u32)> + '_ {
        self.condvars.iter().map(|(n, m)| (n.as_str(), *m))
    }

    /// Condition variables in all.
    pub fn condvar_count(&self) -> u32 {
        self.condvars.len() as u32
    }

    /// Mutexes in all (families counted lock by lock).
    pub fn mutexes(&self) -> u32 {
        self.mutexes
    }

    /// The lock families, in declaration order: name, first mutex id, members.
    pub fn families(&self) -> impl Iterator<Item = (&str, u32, u32)> + '_ {
        self.locks.iter().map(|l| (l.name.as_str(), l.first_id, l.count))
    }

    /// Whether mutex `id` is a spin lock.
    pub fn is_spin(&self, id: u32) -> bool {
        self.spin[id as usize]
    }

    /// Whether request type `t` has a program (else it computes its service time only).
    pub fn has_program(&self, t: u16) -> bool {
        self.types.get(t as usize).is_some_and(|p| p.is_some())
    }

    /// The concrete program of a request of type `t` whose sampled service time is `service`,
    /// appended to `out`; returns its total CPU work. Types without a program get one compute.
    pub fn draw(&mut self, t: u16, service: Nanos, out: &mut Vec<Op>) -> Nanos {
        let Some(p) = self.types.get_mut(t as usize).and_then(|p| p.as_mut()) else {
            out.push(Op::Compute(service));
            return service;
        };
        let path = if p.cumulative.len() == 1 {
            0
        } else {
            let u: f64 = p.path_rng.gen();
            p.cumulative.iter().position(|&c| u < c).unwrap_or(p.cumulative.len() - 1)
        };
        let mut total = 0;
        for step in &p.paths[path] {
            match step {
                Step::Compute(w) => {
                    let d = w.draw(service, &mut p.hold_rng);
                    total += d;
                    out.push(Op::Compute(d));
                }
                Step::Lock { lock, work } => {
                    let l = &self.locks[*lock];
                    let id = l.first_id + l.pick(&mut p.key_rng);
                    let d = work.draw(service, &mut p.hold_rng);
                    total += d;
                    out.extend([Op::Acquire(id), Op::Compute(d), Op::Release(id)]);
                }
                Step::Yield => out.push(Op::Yield),
                Step::Wait { cv, work } => {
                    let m = self.condvars[*cv as usize].1;
                    let d = work.draw(service, &mut p.hold_rng);
                    total += d;
                    out.extend([Op::Acquire(m), Op::Wait { cv: *cv, mutex: m }, Op::Compute(d), Op::Release(m)]);
                }
                Step::Signal { cv, work } => {
                    let m = self.condvars[*cv as usize].1;
                    let d = work.draw(service, &mut p.hold_rng);
                    total += d;
                    out.extend([Op::Acquire(m), Op::Compute(d), Op::Signal(*cv), Op::Release(m)]);
                }
            }
        }
        total
    }

}

impl Work {
    fn draw(&self, service: Nanos, rng: &mut Stream) -> Nanos {
        match self {
            // A zero share is a step of no work; rounding never makes a share negative.
            Work::Share(s) => (service as f64 * s).round() as Nanos,
            Work::Own(sampler) => sampler.sample(rng),
        }
    }
}

impl Lock {
    /// The family member a request's key hashes to.
    fn pick(&self, rng: &mut Stream) -> u32 {
        if self.count == 1 {
            return 0;
        }
        let key = match self.hot {
            None => rng.gen_range(0..self.keys),
            Some((hot, share)) => {
                if rng.gen::<f64>() < share || hot == self.keys {
                    rng.gen_range(0..hot)
                } else {
                    rng.gen_range(hot..self.keys)
                }
            }
        };
        (hash(key) % self.count as u64) as u32
    }
}

/// Declared names for an error message ("none" without any).
fn names<'a>(it: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = it.collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

fn work(share: Option<f64>, time: &Option<Dist>, base_dir: &Path, field: &str) -> Result<Work, ScenarioError> {
    match (share, time) {
        (Some(_), Some(_)) => Err(ScenarioError::new(field, "give at most one of share and time")),
        (_, Some(d)) => Ok(Work::Own(Sampler::build(d, base_dir, &format!("{field}.time"))?)),
        (Some(s), None) => {
            non_negative(&format!("{field}.share"), s)?;
            if !s.is_finite() {
                return Err(ScenarioError::new(format!("{field}.share"), format!("{s} is not a finite share")));
            }
            Ok(Work::Share(s))
        }
        (None, None) => Ok(Work::Share(1.0)),
    }
}

/// Checks a workload's programs without keeping them (scenario validation).
pub fn validate(w: &Workload, base_dir: &Path) -> Result<(), ScenarioError> {
    Programs::new(w, base_dir, 0).map(|_| ())
}

/// Mean CPU work of a request of a type with these `paths` and a mean sampled service of
/// `service_us` (the service itself without paths): what load fractions are relative to.
pub fn mean_work_us(paths: &[PathCfg], service_us: f64, base_dir: &Path) -> Result<f64, ScenarioError> {
    if paths.is_empty() {
        return Ok(service_us);
    }
    let mut mean = 0.0;
    for p in paths {
        for s in &p.steps {
            let (share, time) = match s {
                StepCfg::Compute { share, time }
                | StepCfg::Lock { share, time, .. }
                | StepCfg::Wait { share, time, .. }
                | StepCfg::Signal { share, time, .. } => (share, time),
                StepCfg::Yield => continue,
            };
            mean += p.prob
                * match time {
                    Some(d) => Sampler::build(d, base_dir, "workload.types.paths.steps.time")?.mean_us(),
                    None => share.unwrap_or(1.0) * service_us,
                };
        }
    }
    Ok(mean)
}
