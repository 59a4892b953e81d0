//! Compiles `proto/calibrate.proto` with protox (pure Rust, so a fresh machine
//! needs no `protoc`) and generates its messages and gRPC service with
//! tonic-prost-build.

use std::path::Path;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not built in: a target directory moved
    // to another checkout keeps its build scripts.
    let root =
        Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").ok_or("CARGO_MANIFEST_DIR unset")?)
            .join("proto");
    let file = root.join("calibrate.proto");
    println!("cargo:rerun-if-changed={}", file.display());
    let fds = protox::compile([&file], [&root])?;
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds(fds)?;
    Ok(())
}
