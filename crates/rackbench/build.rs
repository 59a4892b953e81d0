//! Embeds `jobs/*.toml` so the binary runs its catalogue from anywhere.
// A build script that cannot do its work should stop the build with the
// reason; unwrap does exactly that.
#![allow(clippy::unwrap_used)]

use std::path::Path;

/// The crate's folder, read when the script runs (not when it was built:
/// a target directory moved to another checkout keeps its build scripts).
fn manifest_dir() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR").unwrap().into()
}

/// The commit the binary is built from (`unknown` outside a git checkout,
/// e.g. from a source tarball), for `rackbench --version`.
fn git_commit() {
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .current_dir(manifest_dir())
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|| "unknown".into());
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let dir = Path::new(&dir);
        for p in [
            dir.join("HEAD"),
            dir.join("refs/heads"),
            dir.join("packed-refs"),
        ] {
            if p.exists() {
                println!("cargo:rerun-if-changed={}", p.display());
            }
        }
    }
    println!("cargo:rustc-env=RACKBENCH_GIT_COMMIT={commit}");
    println!(
        "cargo:rustc-env=RACKBENCH_BUILD_PROFILE={}",
        std::env::var("PROFILE").unwrap_or_else(|_| "unknown".into())
    );
}

fn main() {
    git_commit();
    let dir = manifest_dir().join("../../jobs");
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
