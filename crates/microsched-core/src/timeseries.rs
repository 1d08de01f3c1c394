//! The time-series columns of a run, shared by both drivers: the simulator fills every column;
//! the real runtime fills the server's columns on the server and the client's in the load
//! generator, and merges them into one of these. The column names are a contract (Parquet files,
//! DataFrames, plots): [`TimeSeries::columns`] lists them all, in order.

use serde::{Deserialize, Serialize};

/// One row per sample interval; each value covers the interval that ends at `t_ms` (means and
/// counts) or is taken at `t_ms` (queue_len, oldest_delay_us, in_system).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct TimeSeries {
    #[serde(deserialize_with = "nan_as_null")]
    pub t_ms: Vec<f64>,
    #[serde(deserialize_with = "nan_as_null")]
    pub cores_allocated: Vec<f64>,
    #[serde(deserialize_with = "nan_as_null")]
    pub cores_busy: Vec<f64>,
    #[serde(deserialize_with = "nan_as_null")]
    pub cores_parked: Vec<f64>,
    #[serde(deserialize_with = "nan_as_null")]
    pub queue_len: Vec<f64>,
    #[serde(deserialize_with = "nan_as_null")]
    pub oldest_delay_us: Vec<f64>,
    #[serde(deserialize_with = "nan_as_null")]
    pub arrivals: Vec<f64>,
    #[serde(deserialize_with = "nan_as_null")]
    pub completions: Vec<f64>,
    #[serde(deserialize_with = "nan_as_null")]
    pub drops: Vec<f64>,
    #[serde(deserialize_with = "nan_as_null")]
    pub throughput_rps: Vec<f64>,
    #[serde(deserialize_with = "nan_as_null")]
    pub offered_rps: Vec<f64>,
    /// Requests generated and not yet answered: at clients, in the network or at the server.
    #[serde(deserialize_with = "nan_as_null")]
    pub in_system: Vec<f64>,
    /// The core allocator's own signal at its last tick (delay in ns, utilization fraction, …;
    /// NaN for policies without one).
    #[serde(deserialize_with = "nan_as_null")]
    pub alloc_signal: Vec<f64>,
    /// Credit pool C_total at `t_ms` (NaN without a credit-based overload controller).
    #[serde(deserialize_with = "nan_as_null")]
    pub credit_pool: Vec<f64>,
    /// Credits issued C_issued at `t_ms` (NaN without a credit controller).
    #[serde(deserialize_with = "nan_as_null")]
    pub credits_issued: Vec<f64>,
    /// Sessions on the drained list at `t_ms` (NaN without a credit controller).
    #[serde(deserialize_with = "nan_as_null")]
    pub drained_sessions: Vec<f64>,
    /// Requests waiting for credits at clients at `t_ms`.
    #[serde(deserialize_with = "nan_as_null")]
    pub client_queued: Vec<f64>,
    /// Park attempts in the interval: an idle core asking the allocator whether it may park
    /// (NaN for allocators that never park, and in the real runtime).
    #[serde(deserialize_with = "nan_as_null")]
    pub park_attempts: Vec<f64>,
    /// Park attempts in the interval that kept the core polling (CoreSync's gate: overload veto,
    /// another parker, revocation pending, or a cut; NaN for allocators without a park gate).
    #[serde(deserialize_with = "nan_as_null")]
    pub park_vetoes: Vec<f64>,
    /// Cores parked in the interval.
    #[serde(deserialize_with = "nan_as_null")]
    pub parks: Vec<f64>,
    /// Parked cores woken in the interval.
    #[serde(deserialize_with = "nan_as_null")]
    pub wakeups: Vec<f64>,
}

impl TimeSeries {
    pub fn columns(&self) -> Vec<(&'static str, &Vec<f64>)> {
        vec![
            ("t_ms", &self.t_ms),
            ("cores_allocated", &self.cores_allocated),
            ("cores_busy", &self.cores_busy),
            ("cores_parked", &self.cores_parked),
            ("queue_len", &self.queue_len),
            ("oldest_delay_us", &self.oldest_delay_us),
            ("arrivals", &self.arrivals),
            ("completions", &self.completions),
            ("drops", &self.drops),
            ("throughput_rps", &self.throughput_rps),
            ("offered_rps", &self.offered_rps),
            ("in_system", &self.in_system),
            ("alloc_signal", &self.alloc_signal),
            ("credit_pool", &self.credit_pool),
            ("credits_issued", &self.credits_issued),
            ("drained_sessions", &self.drained_sessions),
            ("client_queued", &self.client_queued),
            ("park_attempts", &self.park_attempts),
            ("park_vetoes", &self.park_vetoes),
            ("parks", &self.parks),
            ("wakeups", &self.wakeups),
        ]
    }
}

impl TimeSeries {
    /// The columns by value, in the order of [`TimeSeries::columns`] (a series is a few
    /// thousand rows, so copying it once per run costs nothing worth a second column list).
    pub fn into_columns(self) -> Vec<(&'static str, Vec<f64>)> {
        self.columns().into_iter().map(|(name, col)| (name, col.clone())).collect()
    }
}

/// JSON has no NaN: serde_json writes it as `null`; read `null` back as NaN.
fn nan_as_null<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<f64>, D::Error> {
    let v: Vec<Option<f64>> = Deserialize::deserialize(d)?;
    Ok(v.into_iter().map(|x| x.unwrap_or(f64::NAN)).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_are_named_in_order_and_round_trip_json_with_nan() {
        let ts = TimeSeries { t_ms: vec![1.0], credit_pool: vec![f64::NAN], ..TimeSeries::default() };
        let names: Vec<&str> = ts.columns().iter().map(|(n, _)| *n).collect();
        assert_eq!(names.len(), 21);
        assert_eq!(names[0], "t_ms");
        assert_eq!(names[16], "client_queued");
        assert_eq!(names[17..], ["park_attempts", "park_vetoes", "parks", "wakeups"]);
        let by_value: Vec<&str> = ts.clone().into_columns().iter().map(|(n, _)| *n).collect();
        assert_eq!(names, by_value);
        let back: TimeSeries = serde_json::from_str(&serde_json::to_string(&ts).unwrap()).unwrap();
        assert_eq!(back.t_ms, vec![1.0]);
        assert!(back.credit_pool[0].is_nan());
    }
}
