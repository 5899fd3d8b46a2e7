//! The integration tests, linked into one binary: each links the whole crate (Arrow, Parquet,
//! the object-store stack, OpenH264), so one binary rather than one per file saves minutes of
//! every clean test build. The tests that count the process's threads or change a process-wide
//! limit keep binaries of their own (`threads`, `panics`, `pinned_fallback`).

#[path = "../common/mod.rs"]
mod common;

mod backends;
mod cli;
mod damaged;
mod detection;
mod engine_fallback;
mod grey_read;
mod hf_tables;
mod host_placement;
mod loader;
mod orientation;
mod remote;
mod resume;
mod shards;
mod slot_read;
mod video;
mod views;
