//! Compiles `proto/*.proto` (rackbench's copy of the Distbench schema) with
//! protox, a pure-Rust protobuf compiler, so no `protoc` is needed. Writes the
//! prost message types and the encoded `FileDescriptorSet`, from which the
//! crate builds the descriptor pool that the text format needs, and the
//! tonic services of the control and data planes (`control.proto`).

use prost::Message;
use std::path::{Path, PathBuf};

const FILES: [&str; 4] = [
    "distbench.proto",
    "control.proto",
    "traffic_config.proto",
    "joint_distribution.proto",
];

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Read when the script runs, not built in: a target directory moved
    // to another checkout keeps its build scripts.
    let root =
        Path::new(&std::env::var_os("CARGO_MANIFEST_DIR").ok_or("CARGO_MANIFEST_DIR unset")?)
            .join("proto");
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    println!("cargo:rerun-if-changed={}", root.display());
    let files: Vec<PathBuf> = FILES.iter().map(|f| root.join(f)).collect();
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let fds = protox::compile(&files, [&root])?;
    std::fs::write(out.join("distbench_descriptor.bin"), fds.encode_to_vec())?;
    // Maps as BTreeMap: deterministic iteration, encoding and printing.
    // Type names: `prost::Name` links each type to its descriptor. tonic
    // generates the sequencer, node manager and traffic services.
    let mut config = prost_build::Config::new();
    config.btree_map(["."]).enable_type_names();
    // Payloads are shared zero-filled buffers, not fresh vectors per RPC.
    config.bytes([".distbench.GenericRequestResponse.payload"]);
    tonic_prost_build::configure()
        .build_server(true)
        .build_client(true)
        .compile_fds_with_config(fds, config)?;
    Ok(())
}
