//! BookKeeper's storage formats: entry digests (`DigestManager`) and entry logs (`DefaultEntryLogger`).
pub mod digest;
pub mod entrylog;
