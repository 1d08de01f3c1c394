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
