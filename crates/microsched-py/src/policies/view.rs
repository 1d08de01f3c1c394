//! What a Python policy reads: the driver's views, valid only during the call they are passed
//! to, and its own random streams.
//!
//! A view holds a pointer to the driver's view, which lives on the driver's stack for the call.
//! The pointer is cleared when the call returns ([`Scoped`]), so a policy that keeps a view and
//! reads it later gets an error instead of reading freed memory. The classes are `unsendable`:
//! a view never leaves the thread of the call.

use std::cell::Cell;

use microsched_core::alloc::{AllocView, CoreId, CoreObs, CoreState};
use microsched_core::overload::CreditLink;
use microsched_core::sched::{Place, ServerView};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use rand::{Rng, SeedableRng};

fn stale() -> PyErr {
    PyRuntimeError::new_err("this view is only valid during the call it was passed to: read what you need inside the call")
}

/// A raw pointer that is cleared when the call it was made for returns.
pub(crate) struct Scoped<T: ?Sized> {
    ptr: Cell<Option<*const T>>,
}

impl<T: ?Sized> Scoped<T> {
    /// # Safety
    /// The caller clears it ([`Scoped::clear`]) before `r`'s lifetime ends.
    pub(crate) unsafe fn new(r: &T) -> Self {
        Self { ptr: Cell::new(Some(r as *const T)) }
    }
    pub(crate) fn clear(&self) {
        self.ptr.set(None);
    }
    fn get(&self) -> PyResult<&T> {
        // SAFETY: set from a live reference and cleared before that reference ends.
        self.ptr.get().map(|p| unsafe { &*p }).ok_or_else(stale)
    }
}

/// `env.stream(name)`: the policy's own seeded stream called `name`.
#[pyclass]
pub(crate) struct StreamFactory {
    pub(crate) seed: u64,
    pub(crate) prefix: &'static str,
}

#[pymethods]
impl StreamFactory {
    fn stream(&self, name: &str) -> Stream {
        Stream { rng: microsched_core::rng::stream(self.seed, &format!("{}{name}", self.prefix)) }
    }
}

/// A seeded random stream (the engine's PCG): the same seed and name give the same draws in
/// every run, so a Python policy is as deterministic as a built-in.
#[pyclass]
pub(crate) struct Stream {
    rng: microsched_core::rng::Stream,
}

#[pymethods]
impl Stream {
    /// A whole number in `0..n`, drawn as the engine's policies draw one (`gen_range`).
    fn randrange(&mut self, n: usize) -> PyResult<usize> {
        if n == 0 {
            return Err(PyValueError::new_err("randrange(0): the range is empty"));
        }
        Ok(self.rng.gen_range(0..n))
    }
    /// A float in [0, 1).
    fn random(&mut self) -> f64 {
        self.rng.gen::<f64>()
    }
    /// An exponentially distributed float of mean `1 / rate`.
    fn expovariate(&mut self, rate: f64) -> PyResult<f64> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(PyValueError::new_err(format!("expovariate({rate}): the rate must be a finite number > 0")));
        }
        Ok(-(1.0 - self.rng.gen::<f64>()).ln() / rate)
    }
    /// A new stream seeded from this one (for a component of the policy).
    fn spawn(&mut self) -> Stream {
        Stream { rng: microsched_core::rng::Stream::seed_from_u64(self.rng.gen()) }
    }
}

fn state_name(s: CoreState) -> &'static str {
    match s {
        CoreState::Active => "active",
        CoreState::Parked => "parked",
        CoreState::Waking => "waking",
    }
}

/// One core as an allocator sees it at a tick (counters cumulative since the start).
#[pyclass(frozen, get_all)]
pub(crate) struct Core {
    core: u16,
    /// "active", "parked" or "waking".
    state: &'static str,
    queued: u32,
    oldest_enqueued_at: Option<u64>,
    enqueued_total: u64,
    dequeued_total: u64,
    busy_ns: u64,
    search_ns: u64,
}

#[pymethods]
impl Core {
    fn __repr__(&self) -> String {
        format!("Core({}, {}, queued={}, busy_ns={})", self.core, self.state, self.queued, self.busy_ns)
    }
}

fn core(i: CoreId, c: &CoreObs) -> Core {
    Core {
        core: i,
        state: state_name(c.state),
        queued: c.queued,
        oldest_enqueued_at: c.oldest_enqueued_at,
        enqueued_total: c.enqueued_total,
        dequeued_total: c.dequeued_total,
        busy_ns: c.busy_ns,
        search_ns: c.search_ns,
    }
}

/// The cores at an allocator's tick ([`AllocView`]).
#[pyclass(unsendable)]
pub(crate) struct AllocViewPy {
    pub(crate) view: Scoped<dyn AllocView + 'static>,
    pub(crate) max_cores: u32,
}

impl AllocViewPy {
    fn v(&self) -> PyResult<&dyn AllocView> {
        self.view.get()
    }
}

#[pymethods]
impl AllocViewPy {
    /// The driver's time, nanoseconds.
    #[getter]
    fn now(&self) -> PyResult<u64> {
        Ok(self.v()?.now())
    }
    #[getter]
    fn max_cores(&self) -> u32 {
        self.max_cores
    }
    /// Active cores (running a request or searching for work).
    #[getter]
    fn active(&self) -> PyResult<usize> {
        Ok(self.v()?.active())
    }
    #[getter]
    fn waking(&self) -> PyResult<usize> {
        Ok(self.v()?.waking())
    }
    #[getter]
    fn parked(&self) -> PyResult<usize> {
        Ok(self.v()?.parked())
    }
    /// Σ over cores of the cumulative (busy_ns, search_ns).
    fn busy_search_totals(&self) -> PyResult<(u64, u64)> {
        Ok(self.v()?.busy_search_totals())
    }
    /// The cores with queued work, in the driver's order.
    fn queued_cores(&self) -> PyResult<Vec<Core>> {
        let mut out = Vec::new();
        self.v()?.for_each_queued(&mut |i, c| out.push(core(i, c)));
        Ok(out)
    }
    /// The active cores, in the driver's order.
    fn active_cores(&self) -> PyResult<Vec<Core>> {
        let mut out = Vec::new();
        self.v()?.for_each_active(&mut |i, c| out.push(core(i, c)));
        Ok(out)
    }
    /// Core `core` at the previous tick (only state, enqueued_total, busy_ns and search_ns are
    /// defined).
    fn prev(&self, core: CoreId) -> PyResult<Core> {
        if core as u32 >= self.max_cores {
            return Err(PyValueError::new_err(format!("prev({core}): there are {} cores", self.max_cores)));
        }
        Ok(self::core(core, &self.v()?.prev(core)))
    }
    /// (core, queueing delay of its oldest request ns, queued, busy ns since the last tick) of
    /// every active core.
    fn active_loads(&self) -> PyResult<Vec<(CoreId, u64, u32, u64)>> {
        let mut out = Vec::new();
        self.v()?.for_each_active_load(&mut |i, l| out.push((i, l.delay, l.queued, l.busy)));
        Ok(out)
    }
    /// Max over cores of the oldest waiting request's age, ns (Caladan's and Breakwater's
    /// signal).
    fn max_delay(&self) -> PyResult<u64> {
        Ok(self.v()?.max_delay())
    }
    fn parked_with_work(&self) -> PyResult<bool> {
        Ok(self.v()?.parked_with_work())
    }
    fn any_parked(&self) -> PyResult<bool> {
        Ok(self.v()?.any_parked())
    }
    /// Active cores running no request.
    fn idle_cores(&self) -> PyResult<Vec<CoreId>> {
        let mut out = Vec::new();
        self.v()?.for_each_idle(&mut |i| out.push(i));
        Ok(out)
    }
}

/// The RPC layer's credit state, as a core allocator sees it at a park attempt (CoreSync).
#[pyclass(unsendable)]
pub(crate) struct CreditsPy {
    /// Cleared when the call returns, as [`Scoped`].
    pub(crate) link: Cell<Option<*mut (dyn CreditLink + 'static)>>,
}

impl CreditsPy {
    // The `&mut` comes from the pointer, not from `&self`: the class only carries it (one
    // borrow per method call, never two alive at once, on the thread of the call).
    #[allow(clippy::mut_from_ref)]
    fn l(&self) -> PyResult<&mut dyn CreditLink> {
        // SAFETY: set from the `&mut` the driver passed to the call, which is blocked in this
        // call meanwhile, and cleared before the call returns; the class never leaves the thread.
        self.link.get().map(|p| unsafe { &mut *p }).ok_or_else(stale)
    }
}

#[pymethods]
impl CreditsPy {
    /// C_total, the credit pool (the one value a core allocator may set).
    #[getter]
    fn pool(&self) -> PyResult<i64> {
        Ok(self.l()?.pool())
    }
    #[setter(pool)]
    fn set_pool(&self, credits: i64) -> PyResult<()> {
        self.l()?.set_pool(credits);
        Ok(())
    }
    /// C_issued: credits held by clients, in flight and unused.
    #[getter]
    fn issued(&self) -> PyResult<i64> {
        Ok(self.l()?.issued())
    }
    /// N_sess: connected sessions.
    #[getter]
    fn sessions(&self) -> PyResult<u32> {
        Ok(self.l()?.sessions())
    }
    /// Sessions holding zero credits.
    #[getter]
    fn drained(&self) -> PyResult<u32> {
        Ok(self.l()?.drained())
    }
}

/// The server's queues and cores, as a queueing policy sees them ([`ServerView`]).
#[pyclass(unsendable)]
pub(crate) struct ServerViewPy {
    pub(crate) view: Scoped<dyn ServerView + 'static>,
}

impl ServerViewPy {
    fn v(&self) -> PyResult<&dyn ServerView> {
        self.view.get()
    }
}

/// A place as Python writes it: a core number, -1 (shared), or -2 - k (class k).
pub(crate) fn place_to_py(p: Place) -> i64 {
    match p {
        Place::Core(c) => c as i64,
        Place::Shared => -1,
        Place::Class(k) => -2 - k as i64,
    }
}

#[pymethods]
impl ServerViewPy {
    #[getter]
    fn max_cores(&self) -> PyResult<usize> {
        Ok(self.v()?.max_cores())
    }
    fn is_active(&self, core: u16) -> PyResult<bool> {
        let v = self.v()?;
        if core as usize >= v.max_cores() {
            return Err(PyValueError::new_err(format!("is_active({core}): there are {} cores", v.max_cores())));
        }
        Ok(v.is_active(core))
    }
    /// Allocated cores, in the driver's order.
    fn active(&self) -> PyResult<Vec<u16>> {
        Ok(self.v()?.active().to_vec())
    }
    /// Allocated cores with nothing to do, in the driver's order.
    fn spinners(&self) -> PyResult<Vec<u16>> {
        Ok(self.v()?.spinners().to_vec())
    }
    /// Cores whose own queue holds work another core may take, in the driver's order.
    fn victims(&self) -> PyResult<Vec<u16>> {
        Ok(self.v()?.victims().to_vec())
    }
    /// Requests waiting in queue `place` (a core, -1 for the shared queue, -2 - k for class k).
    fn queue_len(&self, place: i64) -> PyResult<usize> {
        let v = self.v()?;
        let p = super::sched::place_from_py(place, v.max_cores()).map_err(|m| PyValueError::new_err(format!("queue_len({place}): {m}")))?;
        Ok(v.queue_len(p))
    }
    /// Requests waiting in any queue.
    fn queued(&self) -> PyResult<u64> {
        Ok(self.v()?.queued())
    }
}
