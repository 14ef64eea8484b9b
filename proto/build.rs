fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    // protox compiles our .proto files in-process: no system protoc is needed for these. It also
    // knows Google's well-known types (csi.proto's google/protobuf/wrappers.proto), which prost
    // turns into plain options (`BoolValue` → `Option<bool>`).
    let fds = protox::compile(
        [
            "proto/raftpb.proto",
            "proto/debugpb.proto",
            "proto/csi.proto",
            "proto/pluginregistration.proto",
        ],
        ["proto"],
    )?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
