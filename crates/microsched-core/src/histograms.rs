//! Histograms exported with each run, so that percentiles can be pooled across seeds.
//!
//! A mean of per-seed p99s is not the p99 of the seeds' requests taken together: it weighs a seed
//! with few slow requests like one with many, and it cannot be computed for a p99.9 of a run too
//! short to have one. HDR histograms merge exactly (bucket counts add), so every run exports its
//! measured window's histograms and the sweep aggregation and the reproduction statistics merge
//! them and read the quantile of the union.
//!
//! The text form is HdrHistogram's own interchange format (V2 encoding, DEFLATE-compressed,
//! base64 standard alphabet: the `HISTFAAA...` strings that the Java, C, Python and Rust
//! implementations all read), so an exported histogram can be decoded by any of them.

use base64::Engine;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;

/// A histogram as HdrHistogram's compressed V2 text (`HISTFAAA...`).
pub fn encode(h: &Histogram<u64>) -> String {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new().serialize(h, &mut bytes).expect("serializing to memory cannot fail");
    base64::engine::general_purpose::STANDARD.encode(bytes)
}

/// The histogram of an [`encode`]d text (any HdrHistogram V2 text, compressed or not).
pub fn decode(text: &str) -> Result<Histogram<u64>, String> {
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .map_err(|e| format!("not base64: {e}"))?;
    Deserializer::new().deserialize(&mut bytes.as_slice()).map_err(|e| format!("not an HdrHistogram V2 histogram: {e:?}"))
}

/// The union of several histograms: every value recorded in any of them, once per recording.
/// The result auto-resizes, so histograms of different ranges merge.
pub fn merge<'a>(texts: impl IntoIterator<Item = &'a str>) -> Result<Histogram<u64>, String> {
    let mut all = Histogram::<u64>::new(3).expect("valid sigfig");
    all.auto(true);
    for (i, t) in texts.into_iter().enumerate() {
        let h = decode(t).map_err(|e| format!("histogram {i}: {e}"))?;
        all.add(&h).map_err(|e| format!("histogram {i}: cannot be merged: {e:?}"))?;
    }
    Ok(all)
}

/// The value at each quantile (0 for an empty histogram), as [`crate::metrics`] reads it for a
/// run's own percentiles, so that the pooled percentile of a single run is that run's.
pub fn quantiles(h: &Histogram<u64>, qs: &[f64]) -> Vec<u64> {
    qs.iter().map(|&q| if h.is_empty() { 0 } else { h.value_at_quantile(q) }).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hist(values: impl IntoIterator<Item = u64>) -> Histogram<u64> {
        let mut h = Histogram::<u64>::new(3).unwrap();
        for v in values {
            h.record(v).unwrap();
        }
        h
    }

    #[test]
    fn round_trip_is_exact() {
        let h = hist((1..10_000u64).map(|i| i * i));
        let back = decode(&encode(&h)).unwrap();
        assert_eq!(back, h);
        assert!(encode(&h).starts_with("HISTFAAA"), "HdrHistogram's compressed V2 text");
    }

    #[test]
    fn merging_equals_recording_the_union() {
        let a: Vec<u64> = (1..5_000).map(|i| i * 7 % 1_000_003).collect();
        let b: Vec<u64> = (1..3_000).map(|i| 500_000 + i * 13).collect();
        let merged = merge([encode(&hist(a.clone())).as_str(), encode(&hist(b.clone())).as_str()]).unwrap();
        let union = hist(a.into_iter().chain(b));
        assert_eq!(quantiles(&merged, &[0.5, 0.99, 0.999]), quantiles(&union, &[0.5, 0.99, 0.999]));
        assert_eq!(merged.len(), union.len());
    }

    #[test]
    fn bad_text_is_an_error_not_a_panic() {
        assert!(decode("not base64 !").is_err());
        assert!(decode("AAAA").is_err());
        assert!(merge(["HISTFAAAxyz"]).unwrap_err().starts_with("histogram 0"));
        assert_eq!(quantiles(&merge([]).unwrap(), &[0.99]), vec![0]);
    }
}
