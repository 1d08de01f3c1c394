//! Latency bookkeeping shared by both drivers: HDR histograms per request type, exact sums for
//! means, and the window counters that become a [`Summary`](crate::summary::Summary).

use hdrhistogram::Histogram;

use crate::histograms::encode;
use crate::log_linear::LogLinear;
use crate::summary::{Histograms, Percentiles, Slowdown, Summary, TypeHistograms, TypeSummary};
use crate::time::{round_ns, Nanos};

/// Slowdown is stored in thousandths so that an integer histogram keeps three decimals.
const SLOWDOWN_SCALE: f64 = 1000.0;

/// Auto-resizing histograms only refuse values above 2^63 ns (292 years).
const AUTO: &str = "auto-resizing histogram records any value below 2^63";

/// One type's window as the summaries read it (histograms built from the counts).
#[derive(Debug, Clone)]
struct TypeRecord {
    name: String,
    latency: Histogram<u64>,
    qdelay: Histogram<u64>,
    slowdown: Histogram<u64>,
    latency_sum: u128,
    qdelay_sum: u128,
    completed: u64,
    good: u64,
    dropped: u64,
    generated: u64,
}

fn histogram() -> Histogram<u64> {
    // 3 significant digits, auto-resizing: any latency is representable.
    Histogram::new(3).expect("valid sigfig")
}

/// One type's window as recorded: the histograms' counts (a request's three records are on
/// every run's hot path), turned into histograms only when read.
#[derive(Debug, Clone)]
struct TypeCounts {
    name: String,
    latency: LogLinear,
    qdelay: LogLinear,
    slowdown: LogLinear,
    latency_sum: u128,
    qdelay_sum: u128,
    completed: u64,
    good: u64,
    dropped: u64,
    generated: u64,
}

impl TypeCounts {
    fn record(&self) -> TypeRecord {
        let hdr = |c: &LogLinear| c.to_hdr().expect(AUTO);
        TypeRecord {
            name: self.name.clone(),
            latency: hdr(&self.latency),
            qdelay: hdr(&self.qdelay),
            slowdown: hdr(&self.slowdown),
            latency_sum: self.latency_sum,
            qdelay_sum: self.qdelay_sum,
            completed: self.completed,
            good: self.good,
            dropped: self.dropped,
            generated: self.generated,
        }
    }
}

/// Per-type latency recorder over one measured window.
#[derive(Debug, Clone)]
pub struct LatencyRecorder {
    types: Vec<TypeCounts>,
    slo_ns: Nanos,
}

impl LatencyRecorder {
    pub fn new(type_names: &[String], slo_ns: Nanos) -> Self {
        let types = type_names
            .iter()
            .map(|name| TypeCounts {
                name: name.clone(),
                latency: LogLinear::default(),
                qdelay: LogLinear::default(),
                slowdown: LogLinear::default(),
                latency_sum: 0,
                qdelay_sum: 0,
                completed: 0,
                good: 0,
                dropped: 0,
                generated: 0,
            })
            .collect();
        Self { types, slo_ns }
    }

    #[inline]
    pub fn generated(&mut self, rtype: usize) {
        self.types[rtype].generated += 1;
    }

    #[inline]
    pub fn dropped(&mut self, rtype: usize) {
        self.types[rtype].dropped += 1;
    }

    /// A response arrived: `latency` end to end at the client, `qdelay` waiting at the server,
    /// `service` the request's CPU time.
    #[inline]
    pub fn completed(&mut self, rtype: usize, latency: Nanos, qdelay: Nanos, service: Nanos) {
        let t = &mut self.types[rtype];
        t.latency.record(latency.max(1));
        t.qdelay.record(qdelay);
        let slowdown = round_ns(latency as f64 / service.max(1) as f64 * SLOWDOWN_SCALE);
        t.slowdown.record(slowdown);
        t.latency_sum += latency as u128;
        t.qdelay_sum += qdelay as u128;
        t.completed += 1;
        if latency <= self.slo_ns {
            t.good += 1;
        }
    }

    pub fn completed_count(&self) -> u64 {
        self.types.iter().map(|t| t.completed).sum()
    }

    /// Per-type summaries and the overall one, for a window of `window_s` seconds.
    pub fn finish(&self, window_s: f64) -> (TypeSummary, Vec<TypeSummary>) {
        let types = self.records();
        summaries(&types, &all(&types), window_s)
    }

    /// Each type's window with its histograms.
    fn records(&self) -> Vec<TypeRecord> {
        self.types.iter().map(TypeCounts::record).collect()
    }
}

/// Every type's records together.
fn all(types: &[TypeRecord]) -> TypeRecord {
    let mut all = TypeRecord {
        name: "all".into(),
        latency: histogram(),
        qdelay: histogram(),
        slowdown: histogram(),
        latency_sum: 0,
        qdelay_sum: 0,
        completed: 0,
        good: 0,
        dropped: 0,
        generated: 0,
    };
    for t in types {
        all.latency.add(&t.latency).expect("auto-resizing histogram");
        all.qdelay.add(&t.qdelay).expect("auto-resizing histogram");
        all.slowdown.add(&t.slowdown).expect("auto-resizing histogram");
        all.latency_sum += t.latency_sum;
        all.qdelay_sum += t.qdelay_sum;
        all.completed += t.completed;
        all.good += t.good;
        all.dropped += t.dropped;
        all.generated += t.generated;
    }
    all
}

impl LatencyRecorder {
    /// The window's histograms as text, overall and (with several types) per type.
    pub fn histograms(&self) -> Histograms {
        let types = self.records();
        histograms_of(&types, &all(&types))
    }
}

/// The window's histograms as text from its records (each type's, and all together).
fn histograms_of(types: &[TypeRecord], all: &TypeRecord) -> Histograms {
    let by_type = if types.len() > 1 {
        types
            .iter()
            .map(|t| TypeHistograms {
                name: t.name.clone(),
                latency_ns: encode(&t.latency),
                queueing_delay_ns: encode(&t.qdelay),
                slowdown_milli: encode(&t.slowdown),
            })
            .collect()
    } else {
        Vec::new()
    };
    Histograms {
        latency_ns: encode(&all.latency),
        queueing_delay_ns: encode(&all.qdelay),
        slowdown_milli: encode(&all.slowdown),
        by_type,
    }
}

impl LatencyRecorder {
    /// The measured window's part of a run summary, the same for every driver: duration, offered
    /// load (the requests recorded as generated), throughput, goodput, drop rate, latency,
    /// queueing delay and slowdown, overall and per type. The driver fills in the rest (names,
    /// cores, requests over the whole run, credits, its own statistics).
    pub fn summary(&self, window_s: f64) -> Summary {
        // The counts become histograms once for both the statistics and the exported texts.
        let types = self.records();
        let merged = all(&types);
        let (all, by_type) = summaries(&types, &merged, window_s);
        let generated: u64 = self.types.iter().map(|t| t.generated).sum();
        Summary {
            duration_s: window_s,
            offered_rps: generated as f64 / window_s,
            throughput_rps: all.throughput_rps,
            goodput_rps: all.goodput_rps,
            drop_rate: all.drop_rate,
            latency_us: all.latency_us,
            queueing_delay_us: all.queueing_delay_us,
            slowdown: all.slowdown,
            by_type,
            histograms: Some(histograms_of(&types, &merged)),
            ..Summary::default()
        }
    }
}

/// Mean and quantiles in µs of a histogram of nanoseconds with exact sum `sum` over `n` values.
pub fn us_percentiles(h: &Histogram<u64>, sum: u128, n: u64) -> Percentiles {
    if n == 0 {
        return Percentiles::default();
    }
    let q = |p: f64| h.value_at_quantile(p) as f64 / 1e3;
    Percentiles { mean: sum as f64 / n as f64 / 1e3, p50: q(0.5), p99: q(0.99), p999: q(0.999) }
}

/// The overall summary and each type's, from the window's records.
fn summaries(types: &[TypeRecord], all: &TypeRecord, window_s: f64) -> (TypeSummary, Vec<TypeSummary>) {
    (summarize(all, window_s), types.iter().map(|t| summarize(t, window_s)).collect())
}

fn summarize(t: &TypeRecord, window_s: f64) -> TypeSummary {
    let sd = |p: f64| {
        if t.completed == 0 {
            0.0
        } else {
            t.slowdown.value_at_quantile(p) as f64 / SLOWDOWN_SCALE
        }
    };
    let ended = t.completed + t.dropped;
    TypeSummary {
        name: t.name.clone(),
        throughput_rps: t.completed as f64 / window_s,
        goodput_rps: t.good as f64 / window_s,
        drop_rate: if ended == 0 { 0.0 } else { t.dropped as f64 / ended as f64 },
        latency_us: us_percentiles(&t.latency, t.latency_sum, t.completed),
        queueing_delay_us: us_percentiles(&t.qdelay, t.qdelay_sum, t.completed),
        slowdown: Slowdown { p50: sd(0.5), p99: sd(0.99), p999: sd(0.999) },
        completed: t.completed,
    }
}

impl LatencyRecorder {
    /// The end-to-end latency CDF over all types: (latency in µs, fraction of requests at or
    /// below it), one point per occupied histogram bucket.
    pub fn latency_cdf(&self) -> (Vec<f64>, Vec<f64>) {
        let mut all = histogram();
        for t in &self.types {
            all.add(&t.latency.to_hdr().expect(AUTO)).expect("auto-resizing histogram");
        }
        let total = all.len();
        let (mut xs, mut ys) = (Vec::new(), Vec::new());
        if total == 0 {
            return (xs, ys);
        }
        for v in all.iter_recorded() {
            xs.push(all.highest_equivalent(v.value_iterated_to()) as f64 / 1e3);
            ys.push(v.count_since_last_iteration() as f64);
        }
        let mut acc = 0.0;
        for y in ys.iter_mut() {
            acc += *y;
            *y = acc / total as f64;
        }
        (xs, ys)
    }
}
