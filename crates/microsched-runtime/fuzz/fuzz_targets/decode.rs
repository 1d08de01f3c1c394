//! Fuzzes the wire decoder: `cargo +nightly fuzz run decode` from crates/microsched-runtime.
//! Any input must decode to a message or an error, never panic; a decoded message must encode
//! back to the same bytes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use microsched_runtime::wire::{decode, encode};

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = decode(data) {
        assert_eq!(&encode(&m)[..], data);
    }
});
