//! Rust types generated at build time from the `proto/` files.
#![allow(clippy::all, missing_docs)]

include!(concat!(env!("OUT_DIR"), "/pulsar.proto.rs"));

/// The pending-ack store's records (`proto/TransactionPendingAck.proto`).
pub mod transaction {
    include!(concat!(env!("OUT_DIR"), "/pulsar.proto.transaction.rs"));
}

/// The compiled `FileDescriptorSet` of `proto/`, for building Python protobuf classes.
pub const FILE_DESCRIPTOR_SET: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/descriptor_set.bin"));
