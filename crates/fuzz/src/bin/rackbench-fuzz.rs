//! The AFL++ driver: `rackbench-fuzz TARGET`, built with `cargo afl build
//! --features afl` (see `bench/fuzz.sh`). Each input arrives from AFL++ in
//! persistent mode and goes to the named target.

fn main() {
    let name = std::env::args().nth(1).unwrap_or_default();
    let Some(target) = rackbench_fuzz::target(&name) else {
        let names: Vec<&str> = rackbench_fuzz::TARGETS.iter().map(|t| t.name).collect();
        eprintln!(
            "usage: rackbench-fuzz TARGET (one of: {})",
            names.join(", ")
        );
        std::process::exit(2);
    };
    afl::fuzz!(|data: &[u8]| {
        (target.run)(data);
    });
}
