//! `cargo run --release --example runfile -- SCENARIO.toml [key=value ...]`: prints the summary JSON.
fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let loaded = microsched_sim::load_file(std::path::Path::new(&args[0]), &args[1..]).unwrap_or_else(|e| {
        eprintln!("error: {e}");
        std::process::exit(2)
    });
    let r = microsched_sim::run(&loaded, None).expect("run");
    println!("{}", serde_json::to_string_pretty(&r.summary).unwrap());
}
