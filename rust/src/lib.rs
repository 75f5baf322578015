//! pulsarkit core: Apache Pulsar and BookKeeper storage formats as pure functions over byte slices
//! and Arrow arrays. The modules mirror the Python layers:
//!
//! * [`codec`]: Pulsar's wire formats: CRC32C, protobuf walking, entries and broker entry
//!   metadata, batches, compression, command frames, the lazy metadata scan;
//! * [`bookkeeper`]: BookKeeper's storage: entry digests and entry logs;
//! * [`bulk`]: the kernels over Arrow columns (one call per column);
//! * `py` (feature `python`): the PyO3 bindings, conversions only.
//!
//! [`Error`] is the one error type; the bindings turn it into Python exceptions in one place.
pub mod bookkeeper;
pub mod bulk;
pub mod codec;
mod columns;
pub mod error;
#[cfg(any(test, feature = "fuzzing"))]
pub mod fuzz;

#[cfg(feature = "python")]
mod py;

/// Kernels hand every output buffer to Python and allocate the next call's afresh; with glibc that
/// is a munmap and a page fault per 4 KiB each time (40% of `explode_messages` on small messages).
#[cfg(feature = "python")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

pub use error::{Error, Result};
