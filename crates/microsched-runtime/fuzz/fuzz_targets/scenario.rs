//! Fuzzes the scenario loader: `cargo +nightly fuzz run scenario` from crates/microsched-runtime.
//! Any text, as TOML or JSON, must load or fail with an error naming a field, never panic; a
//! scenario that loads must be estimable, and either over the limits or within them.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use microsched_core::scenario::{Format, Scenario};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for format in [Format::Toml, Format::Json] {
        match Scenario::load(text, format, Path::new("."), &[]) {
            Ok(loaded) => {
                if let Ok(e) = loaded.estimate() {
                    assert!(e.samples <= microsched_core::scenario::MAX_SAMPLES + 1);
                    let _ = e.check();
                }
            }
            Err(e) => assert!(!e.field.is_empty()),
        }
    }
});
