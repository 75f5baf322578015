//! Pulsar's wire formats, pure: what a producer sends and a bookie stores for one entry.
pub mod batch;
pub mod command;
pub mod compaction;
pub mod compression;
pub mod crc;
pub mod entry;
pub mod metascan;
pub mod proto;
pub mod txn;
pub mod wire;
