//! Compiles `proto/**/*.proto` with protox (a pure-Rust protobuf compiler), so
//! a fresh machine needs no `protoc` on PATH, and hands the descriptor set to
//! tonic-prost-build for message and service code.

use std::path::{Path, PathBuf};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let mut files = Vec::new();
    collect(&root, &mut files)?;
    files.sort();
    // The folders too, so an added .proto file triggers a rebuild.
    println!("cargo:rerun-if-changed={}", root.display());
    println!(
        "cargo:rerun-if-changed={}",
        root.join("rackbench").display()
    );
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let fds = protox::compile(&files, [&root])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        // AdSim's request and response bodies are shared, not copied, as
        // they pass through the client and server (up to megabytes each).
        .bytes(".rackbench.adsim.SimRequest.request")
        .bytes(".rackbench.adsim.SimReply.response")
        .compile_fds(fds)?;
    Ok(())
}

fn collect(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect(&path, out)?;
        } else if path.extension().is_some_and(|e| e == "proto") {
            out.push(path);
        }
    }
    Ok(())
}
