//! Counting recorder for the per-request statistics: the counts of an auto-resizing
//! HdrHistogram of 3 significant digits (lowest discernible value 1, the layout
//! `Histogram::new(3)` uses), kept as a plain array and turned into that very histogram when
//! read. Every completed request records three values; HdrHistogram's general `record` (any
//! precision, range checks, min/max tracking, resizing) cost ~42 instructions each, this one
//! ~12. Summaries only ever see the histogram `to_hdr` builds: its counts, its total, its bucket
//! range, and its min and max (which HdrHistogram reports as bucket bounds) are those of the
//! values recorded one by one, so every percentile and every exported text is unchanged (see
//! the tests).

use hdrhistogram::Histogram;

/// Sub-buckets per half bucket (2^10) and the leading zeros of bucket 0's largest value
/// (64 − 11): HdrHistogram's layout for 3 significant digits and unit resolution.
const HALF_MAGNITUDE: u32 = 10;
const HALF: u64 = 1 << HALF_MAGNITUDE;
const BUCKET0_MASK: u64 = 2 * HALF - 1;
const LEADING_ZERO_BASE: u32 = 53;

#[derive(Debug, Clone)]
pub struct LogLinear {
    counts: Vec<u64>,
}

impl Default for LogLinear {
    fn default() -> Self {
        // Bucket 0 (values below 2048), as a new histogram has.
        Self { counts: vec![0; 2 * HALF as usize] }
    }
}

impl LogLinear {
    /// HdrHistogram's `index_for`: the bucket is how many powers of two `value` is above bucket
    /// 0's range, the sub-bucket its top 11 bits.
    #[inline(always)]
    fn index(value: u64) -> usize {
        let bucket = LEADING_ZERO_BASE - (value | BUCKET0_MASK).leading_zeros();
        ((((bucket as u64) + 1) << HALF_MAGNITUDE) + (value >> bucket) - HALF) as usize
    }

    /// HdrHistogram's `value_for`: the lowest value counted at `index`.
    fn lowest_value(index: usize) -> u64 {
        let bucket = (index as u64 >> HALF_MAGNITUDE) as i64 - 1;
        let sub = (index as u64 & (HALF - 1)) + HALF;
        if bucket < 0 {
            sub - HALF
        } else {
            sub << bucket
        }
    }

    #[inline(always)]
    pub fn record(&mut self, value: u64) {
        let i = Self::index(value);
        if i >= self.counts.len() {
            self.grow(i);
        }
        self.counts[i] += 1;
    }

    #[cold]
    #[inline(never)]
    fn grow(&mut self, index: usize) {
        self.counts.resize(index + 1, 0);
    }

    /// The histogram of the values recorded: each occupied bucket recorded at its lowest value
    /// with its count (values beyond 2^63 are refused as HdrHistogram refuses them).
    pub fn to_hdr(&self) -> Result<Histogram<u64>, hdrhistogram::RecordError> {
        let mut h = Histogram::new(3).expect("valid sigfig");
        for (i, &n) in self.counts.iter().enumerate() {
            if n > 0 {
                h.record_n(Self::lowest_value(i), n)?;
            }
        }
        Ok(h)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::histograms::encode;
    use crate::rng::hash;

    /// Values at every magnitude HdrHistogram resizes through, with the bucket edges, recorded
    /// one by one into a histogram and into the counts: the same histogram (counts, total, min,
    /// max), the same quantiles and mean, the same exported text.
    #[test]
    fn the_counts_make_the_histogram_recorded_value_by_value() {
        let edges = [0u64, 1, 2, 1023, 1024, 2046, 2047, 2048, 2049, 4095, 4096, 1 << 40, (1 << 61) + 12_345];
        for (case, len) in [(0u64, 0usize), (1, 1), (2, 50), (3, 5_000), (4, 200_000)] {
            let mut hdr = Histogram::<u64>::new(3).unwrap();
            let mut counts = LogLinear::default();
            for k in 0..len as u64 {
                let r = hash(case << 40 ^ k);
                // Magnitudes from 2^0 to 2^61, and exact edges now and then.
                let v = if r % 16 == 0 { edges[(r >> 8) as usize % edges.len()] } else { (r >> 3) >> (r % 62) };
                hdr.record(v).unwrap();
                counts.record(v);
            }
            let built = counts.to_hdr().unwrap();
            assert!(built == hdr, "case {case}: same counts, total, min and max");
            assert_eq!(built.len(), hdr.len());
            assert_eq!((built.max(), built.min(), built.min_nz()), (hdr.max(), hdr.min(), hdr.min_nz()), "case {case}");
            assert_eq!(built.mean().to_bits(), hdr.mean().to_bits(), "case {case}");
            for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
                assert_eq!(built.value_at_quantile(q), hdr.value_at_quantile(q), "case {case} q {q}");
            }
            assert_eq!(encode(&built), encode(&hdr), "case {case}: the exported text");
        }
    }

    /// The index and the lowest value agree with HdrHistogram's own bucket bounds.
    #[test]
    fn indexes_follow_hdrhistograms_buckets() {
        let h = Histogram::<u64>::new(3).unwrap();
        for k in 0..100_000u64 {
            let r = hash(k);
            let v = (r >> 2) >> (r % 62);
            let low = LogLinear::lowest_value(LogLinear::index(v));
            assert_eq!(low, h.lowest_equivalent(v), "value {v}");
            assert_eq!(LogLinear::index(low), LogLinear::index(v));
        }
    }
}
