//! Embeds `jobs/*.toml` so the binary runs its catalogue from anywhere.
// A build script that cannot do its work should stop the build with the
// reason; unwrap does exactly that.
#![allow(clippy::unwrap_used)]

use std::path::Path;

fn main() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../jobs");
    println!("cargo:rerun-if-changed={}", dir.display());
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .expect("jobs/ folder")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    files.sort();
    let mut out = String::from(
        "/// The job files compiled into the binary.\npub const EMBEDDED_JOBS: &[(&str, &str)] = &[\n",
    );
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
        let abs = f.canonicalize().expect("job file path");
        out.push_str(&format!(
            "    ({:?}, include_str!({:?})),\n",
            f.file_name().unwrap().to_string_lossy(),
            abs.display().to_string()
        ));
    }
    out.push_str("];\n");
    let dest = Path::new(&std::env::var("OUT_DIR").unwrap()).join("embedded_jobs.rs");
    std::fs::write(dest, out).expect("write embedded_jobs.rs");
}
