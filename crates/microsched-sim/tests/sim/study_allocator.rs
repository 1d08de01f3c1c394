//! The simulation study's allocator rule as an option of `caladan`: `waking_skip = "none"` (a
//! core every congested interval, no skip after a grant) against Caladan's `simple` skip, on the
//! study's Fig. 1 sequence under the study simulator's semantics, scaled to 8 ms (2 ms phases, as
//! the README's side-by-side run of the study's own simulator).

use std::path::Path;

use microsched_sim::{Format, Scenario};

const DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments/load-shift");

/// The quoted override strings of `semantics-study.toml` (one a line, as it is written).
fn study_semantics() -> Vec<String> {
    let text = std::fs::read_to_string(Path::new(DIR).join("semantics-study.toml")).expect("shipped file");
    let start = text.find("overrides = [").expect("an overrides list");
    text[start..]
        .lines()
        .skip(1)
        .take_while(|l| !l.trim_start().starts_with(']'))
        .map(|l| {
            let l = l.trim().trim_end_matches(',');
            l[1..l.len() - 1].to_string() // one quote each side, either kind
        })
        .collect()
}

fn baseline(waking_skip: &str, seed: u64) -> microsched_core::summary::Summary {
    let text = std::fs::read_to_string(Path::new(DIR).join("base.toml")).expect("shipped file");
    let mut o = study_semantics();
    o.extend(
        [
            "duration_ms=8",
            "load.schedule=[{at_ms=2, fraction=1.2}, {at_ms=4, fraction=0.5}, {at_ms=6, fraction=1.2}]",
            &format!("policy.allocator.waking_skip=\"{waking_skip}\""),
        ]
        .map(String::from),
    );
    let loaded = Scenario::load(&text, Format::Toml, Path::new(DIR), &o).expect("valid scenario");
    microsched_sim::run(&loaded, Some(seed)).expect("runs").summary
}

/// The study's rule reacts twice as fast to a congested queue, so the baseline (no core fix)
/// keeps more cores and more pool through the shifts and serves more: the part of the gap
/// between our baseline and the study simulator's that the README attributes to the skip.
#[test]
fn study_rule_grants_without_skipping_and_keeps_more_pool_than_caladan_simple() {
    for seed in [1, 2] {
        let simple = baseline("simple", seed);
        let none = baseline("none", seed);
        let (cs, cn) = (simple.credits.as_ref().unwrap(), none.credits.as_ref().unwrap());
        eprintln!(
            "seed {seed}: simple: {:.2} M req/s, {:.2} cores, pool {:.0}; none (study): {:.2} M req/s, {:.2} cores, pool {:.0}",
            simple.throughput_rps / 1e6,
            simple.cores.allocated_mean,
            cs.pool_mean,
            none.throughput_rps / 1e6,
            none.cores.allocated_mean,
            cn.pool_mean
        );
        assert_eq!(simple.requests.generated, none.requests.generated, "common random numbers");
        assert!(none.throughput_rps > simple.throughput_rps, "seed {seed}");
        assert!(cn.pool_mean > cs.pool_mean, "seed {seed}");
    }
}
