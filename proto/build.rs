fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed=proto");
    // protox compiles our .proto files in-process: no system protoc is needed for these.
    let fds = protox::compile(["proto/raftpb.proto", "proto/debugpb.proto"], ["proto"])?;
    tonic_prost_build::configure().compile_fds(fds)?;
    Ok(())
}
