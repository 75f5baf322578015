//! Rust types generated at build time from `proto/PulsarApi.proto`.
#![allow(clippy::all, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/pulsar.proto.rs"));

/// The compiled `FileDescriptorSet` of `proto/`, for building Python protobuf classes.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptor_set.bin"));
