//! Time is integer nanoseconds everywhere in the core and the simulator.

pub type Nanos = u64;

pub const NS_PER_US: Nanos = 1_000;
pub const NS_PER_MS: Nanos = 1_000_000;
pub const NS_PER_S: Nanos = 1_000_000_000;

/// Converts a duration given in (fractional) microseconds, as scenarios write them, to nanoseconds.
pub fn us(v: f64) -> Nanos {
    (v * NS_PER_US as f64).round() as Nanos
}

/// Converts (fractional) milliseconds to nanoseconds.
pub fn ms(v: f64) -> Nanos {
    (v * NS_PER_MS as f64).round() as Nanos
}

/// `v.round() as Nanos`, bit for bit (half away from zero, saturating, NaN → 0), without the
/// libm call that `f64::round` compiles to on baseline x86-64 (no SSE4.1 `roundsd`): the
/// simulator rounds two samples per request.
#[inline]
pub fn round_ns(v: f64) -> Nanos {
    if (0.0..9.0e18).contains(&v) {
        // The common case: in range, so the unchecked conversion (one instruction, where `as`
        // adds saturation fix-ups) is exact.
        // SAFETY: 0 <= v < 9e18 < i64::MAX: v truncated is representable as an i64.
        let whole = unsafe { v.to_int_unchecked::<i64>() };
        return (whole + (v - whole as f64 >= 0.5) as i64) as Nanos;
    }
    let whole = v as Nanos; // toward zero, saturating
    // Exact: an f64 minus its integer part is representable. Branch-free, because the
    // comparison is a coin toss for sampled values.
    whole.saturating_add((v - whole as f64 >= 0.5) as Nanos)
}

#[cfg(test)]
mod tests {
    use super::round_ns;
    use rand::{Rng, SeedableRng};

    #[test]
    fn round_ns_is_round_as_nanos() {
        let edges = [
            0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -0.49, 0.49999999999999994, 4503599627370495.5, 4503599627370496.0,
            9007199254740993.0, 1.8446744073709552e19, 1.9e19, f64::MAX, f64::INFINITY, f64::NEG_INFINITY, f64::NAN,
            f64::MIN_POSITIVE, 1e-300, 123456.5, 123456.49999999999,
        ];
        for v in edges {
            assert_eq!(round_ns(v), v.round() as u64, "{v:e}");
        }
        let mut rng = rand_pcg::Pcg64::seed_from_u64(7);
        for _ in 0..200_000 {
            let scale = 10f64.powi(rng.gen_range(-3..20));
            let v = rng.gen::<f64>() * scale;
            assert_eq!(round_ns(v), v.round() as u64, "{v:e}");
            let half = (v * 2.0).floor() / 2.0; // exact halves too
            assert_eq!(round_ns(half), half.round() as u64, "{half:e}");
        }
    }
}
