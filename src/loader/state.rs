//! Exact resume: where a loader stands, as a small serde value to checkpoint with the model.
//!
//! Everything a batch holds is a pure function of the configuration and `(epoch, step)`: the
//! epoch's order, every crop and flip, and the replacement of every bad file come from
//! counter-based random streams (see `rng.rs`), never from state that accumulates. So resuming
//! needs only the next batch's position, the epoch's skip count (for the error budget), and
//! enough of the configuration to refuse a loader that would produce different batches.

use serde::{Deserialize, Serialize};

use super::Backend;
use crate::hpu::{Dtype, Layout};
use crate::sampler::LastBatch;
use crate::Error;

/// Where a loader stands: the next batch it will yield, and the settings that decide what the
/// batches hold. Serialize it with the model's checkpoint; a loader built with
/// [`LoaderBuilder::resume`](super::LoaderBuilder::resume) from it yields exactly the batches
/// (the same bytes) the uninterrupted run would have yielded from there on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoaderState {
    /// Format version (currently 1).
    pub version: u32,
    /// The epoch of the next batch.
    pub epoch: u64,
    /// The next batch's step within `epoch` (0 at the start of an epoch).
    pub step: usize,
    /// Samples skipped so far in `epoch`; they still count against the error budget.
    pub skipped: usize,
    /// The settings the batches depend on. A resumed loader must have the same.
    pub config: StateConfig,
}

/// The settings that decide batch contents, recorded in a [`LoaderState`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateConfig {
    /// Samples in the dataset.
    pub samples: usize,
    /// Batch size.
    pub batch_size: usize,
    /// Whether each epoch is shuffled.
    pub shuffle: bool,
    /// Seed of the shuffle and of every random augmentation.
    pub seed: u64,
    /// This process's rank.
    pub rank: usize,
    /// The number of ranks.
    pub world_size: usize,
    /// The last-batch policy.
    pub last_batch: LastBatch,
    /// Where samples are decoded (the engine's output differs slightly from the CPU path's).
    pub backend: Backend,
    /// Output element type.
    pub dtype: Dtype,
    /// Output layout.
    pub layout: Layout,
    /// FNV-1a hash of the dataset's entries (paths and labels) and the pipeline's ops, as
    /// 16 hex digits.
    pub fingerprint: String,
}

/// A position in the run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Position {
    pub epoch: u64,
    pub step: usize,
    pub skipped: usize,
}

impl LoaderState {
    pub(crate) const VERSION: u32 = 1;

    pub(crate) fn position(&self) -> Position {
        Position {
            epoch: self.epoch,
            step: self.step,
            skipped: self.skipped,
        }
    }

    /// Checks that `self` was taken from a loader configured like `current`, and that its
    /// position exists in that configuration.
    pub(crate) fn check(&self, current: &StateConfig, batches: usize) -> Result<(), Error> {
        if self.version != Self::VERSION {
            return Err(Error::config(
                "resume",
                format!(
                    "loader state version {} is not supported (this build reads version {})",
                    self.version,
                    Self::VERSION
                ),
            ));
        }
        let (was, now) = (&self.config, current);
        let differs = |field: &str, a: String, b: String| {
            Err(Error::config(
                "resume",
                format!(
                    "cannot resume: the state was taken with {field} = {a}, this loader has {b}"
                ),
            ))
        };
        macro_rules! same {
            ($($field:ident),*) => {$(
                if was.$field != now.$field {
                    return differs(
                        stringify!($field),
                        format!("{:?}", was.$field),
                        format!("{:?}", now.$field),
                    );
                }
            )*};
        }
        same!(
            samples, batch_size, shuffle, seed, rank, world_size, last_batch, backend, dtype,
            layout
        );
        if was.fingerprint != now.fingerprint {
            return differs(
                "dataset and pipeline fingerprint",
                was.fingerprint.clone(),
                now.fingerprint.clone(),
            );
        }
        if self.step >= batches {
            return Err(Error::config(
                "resume",
                format!(
                    "cannot resume at step {} of an epoch of {batches} batches",
                    self.step
                ),
            ));
        }
        Ok(())
    }
}

/// 64-bit FNV-1a, fed piece by piece.
pub(crate) struct Fnv(u64);

impl Fnv {
    pub fn new() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }

    pub fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        // A separator, so that ("ab", "c") and ("a", "bc") hash differently.
        self.0 = (self.0 ^ 0xff).wrapping_mul(0x0100_0000_01b3);
    }

    pub fn hex(&self) -> String {
        format!("{:016x}", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> StateConfig {
        StateConfig {
            samples: 10,
            batch_size: 4,
            shuffle: true,
            seed: 1,
            rank: 0,
            world_size: 1,
            last_batch: LastBatch::Pad,
            backend: Backend::Auto,
            dtype: Dtype::Bf16,
            layout: Layout::Nchw,
            fingerprint: "00".into(),
        }
    }

    #[test]
    fn state_round_trips_through_json_and_is_small() {
        let s = LoaderState {
            version: 1,
            epoch: 3,
            step: 2,
            skipped: 1,
            config: config(),
        };
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.len() < 400, "{json}");
        assert_eq!(serde_json::from_str::<LoaderState>(&json).unwrap(), s);
    }

    #[test]
    fn resuming_with_different_settings_names_the_setting() {
        let s = LoaderState {
            version: 1,
            epoch: 0,
            step: 1,
            skipped: 0,
            config: config(),
        };
        assert!(s.check(&config(), 3).is_ok());
        let other = StateConfig {
            batch_size: 8,
            ..config()
        };
        let e = s.check(&other, 3).unwrap_err().to_string();
        assert!(e.contains("batch_size = 4") && e.contains("has 8"), "{e}");
        let e = s.check(&config(), 1).unwrap_err().to_string();
        assert!(e.contains("step 1"), "{e}");
    }

    #[test]
    fn fnv_separates_pieces() {
        let (mut a, mut b) = (Fnv::new(), Fnv::new());
        a.write(b"ab");
        a.write(b"c");
        b.write(b"a");
        b.write(b"bc");
        assert_ne!(a.hex(), b.hex());
    }
}
