//! Named, independent random streams. Every source of randomness in a run has its own stream,
//! derived from (seed, name), so that two policies run on one seed draw the very same arrivals,
//! sessions, types and service times (common random numbers): a policy change can only change
//! what the server does with them.

use rand::SeedableRng;
use rand_pcg::Pcg64Mcg;

pub type Stream = Pcg64Mcg;

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

fn fnv1a(name: &str) -> u64 {
    name.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01B3))
}

/// The stream called `name` of run `seed`.
pub fn stream(seed: u64, name: &str) -> Stream {
    Stream::seed_from_u64(splitmix64(seed ^ splitmix64(fnv1a(name))))
}

/// A well-mixed hash, used for RSS-style session-to-core steering.
pub fn hash(v: u64) -> u64 {
    splitmix64(v)
}
