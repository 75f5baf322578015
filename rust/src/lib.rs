//! pulsarkit core: Apache Pulsar entry formats as pure functions over byte slices and Arrow arrays.
//! The Python bindings live in `py/` and only convert types; all logic is here.
pub mod batch;
pub mod bulk;
pub mod command;
pub mod compression;
pub mod crc;
pub mod digest;
pub mod entry;
pub mod entrylog;
pub mod error;
pub mod fuzz;
pub mod metascan;
pub mod proto;
pub mod wire;

#[cfg(feature = "python")]
mod py;

pub use error::{Error, Result};
