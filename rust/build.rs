// Compiles ../proto with protox (pure Rust, so no system protoc) into prost types, and keeps the
// encoded FileDescriptorSet so the Python side builds its protobuf classes from the very same files.
use std::path::PathBuf;

fn main() {
    let proto_dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("proto");
    let proto_dir =
        if proto_dir.is_dir() { proto_dir } else { PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..").join("proto") };
    let files: Vec<PathBuf> = [
        "PulsarApi.proto",
        "MLDataFormats.proto",
        "BookKeeperFormats.proto",
        "PulsarTransactionMetadata.proto",
        "TransactionPendingAck.proto",
        "SchemaStorageFormat.proto",
    ]
    .iter()
    .map(|f| proto_dir.join(f))
    .collect();
    for f in &files {
        println!("cargo:rerun-if-changed={}", f.display());
    }
    let fds = protox::compile(&files, [&proto_dir]).expect("proto/ must compile");
    let out = PathBuf::from(std::env::var("OUT_DIR").unwrap());
    {
        use prost::Message;
        std::fs::write(out.join("descriptor_set.bin"), fds.encode_to_vec()).unwrap();
    }
    let mut cfg = prost_build::Config::new();
    cfg.bytes(["."]);
    cfg.compile_fds(fds).expect("prost codegen");
}
