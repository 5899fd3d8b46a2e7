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
use crate::sampler::{LastBatch, Sampler};
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
    /// The global position in `epoch`'s order (across all ranks) from which `step` counts
    /// batches: 0, unless this loader was resumed mid-epoch on another world size or rank,
    /// when it replans the rest of the epoch from the first position no rank had seen.
    #[serde(default)]
    pub start: usize,
    /// The next batch's step within `epoch` (0 at the start of an epoch), counted from `start`.
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
    pub start: usize,
    pub step: usize,
    pub skipped: usize,
}

impl Position {
    /// The start of `epoch`.
    pub fn epoch_start(epoch: u64) -> Self {
        Self {
            epoch,
            ..Self::default()
        }
    }
}

impl LoaderState {
    /// Version 2 added `start`; a version 1 state reads as one with `start` 0.
    pub(crate) const VERSION: u32 = 2;

    /// Where a loader configured as `current` (with `sampler`) resumes from this state.
    ///
    /// With the same rank and world size, exactly at the saved position. With others (an
    /// elastic restart: more or fewer ranks, or ranks renumbered), every old rank had yielded
    /// `step` batches, so the first `start + step * batch_size * world_size` positions of the
    /// epoch's order are seen; the rest of the epoch is planned over the ranks now present
    /// from there on (see `sampler.rs`). The skip count restarts at 0 then, as it was counted
    /// per rank.
    ///
    /// # Errors
    /// A state of another version or from a loader whose batches would differ (the setting is
    /// named), or a position that does not exist in this configuration.
    pub(crate) fn resume_position(
        &self,
        current: &StateConfig,
        sampler: &Sampler,
    ) -> Result<Position, Error> {
        self.check(current)?;
        let was = &self.config;
        let at_step = |what: String| {
            Err(Error::config(
                "resume",
                format!("cannot resume at step {} of {what}", self.step),
            ))
        };
        if (was.rank, was.world_size) == (current.rank, current.world_size) {
            let batches = sampler.batches_from(self.start);
            if self.start >= current.samples.max(1) || self.step >= batches {
                return at_step(format!(
                    "an epoch of {batches} batches from position {}",
                    self.start
                ));
            }
            return Ok(Position {
                epoch: self.epoch,
                start: self.start,
                step: self.step,
                skipped: self.skipped,
            });
        }
        let seen = self
            .step
            .checked_mul(was.batch_size)
            .and_then(|n| n.checked_mul(was.world_size))
            .and_then(|n| n.checked_add(self.start))
            .filter(|&seen| seen < was.samples);
        let Some(seen) = seen else {
            return at_step(format!(
                "a {}-sample epoch on {} ranks from position {}",
                was.samples, was.world_size, self.start
            ));
        };
        Ok(if sampler.batches_from(seen) == 0 {
            // Nothing of this epoch is left for a whole batch (`LastBatch::Drop`).
            Position::epoch_start(self.epoch + 1)
        } else {
            Position {
                epoch: self.epoch,
                start: seen,
                step: 0,
                skipped: 0,
            }
        })
    }

    /// Checks that `self` was taken from a loader whose batches are those of a loader
    /// configured like `current` (the rank and world size may differ).
    fn check(&self, current: &StateConfig) -> Result<(), Error> {
        if !(1..=Self::VERSION).contains(&self.version) {
            return Err(Error::config(
                "resume",
                format!(
                    "loader state version {} is not supported (this build reads versions 1 to {})",
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
        same!(samples, batch_size, shuffle, seed, last_batch, backend, dtype, layout);
        if was.world_size == 0 {
            return differs("world_size", "0".into(), now.world_size.to_string());
        }
        if was.fingerprint != now.fingerprint {
            return differs(
                "dataset and pipeline fingerprint",
                was.fingerprint.clone(),
                now.fingerprint.clone(),
            );
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

    fn sampler(c: &StateConfig) -> Sampler {
        Sampler {
            len: c.samples,
            batch_size: c.batch_size,
            shuffle: c.shuffle.then_some(c.seed),
            shard: crate::Shard {
                rank: c.rank,
                world_size: c.world_size,
                local_rank: 0,
            },
            last_batch: c.last_batch,
        }
    }

    fn state(step: usize, config: StateConfig) -> LoaderState {
        LoaderState {
            version: LoaderState::VERSION,
            epoch: 3,
            start: 0,
            step,
            skipped: 1,
            config,
        }
    }

    #[test]
    fn state_round_trips_through_json_and_is_small() {
        let s = state(2, config());
        let json = serde_json::to_string(&s).unwrap();
        assert!(json.len() < 400, "{json}");
        assert_eq!(serde_json::from_str::<LoaderState>(&json).unwrap(), s);
    }

    #[test]
    fn a_version_1_state_reads_as_one_that_starts_at_position_0() {
        let mut json = serde_json::to_value(state(2, config())).unwrap();
        json["version"] = 1.into();
        json.as_object_mut().unwrap().remove("start");
        let s: LoaderState = serde_json::from_value(json).unwrap();
        let p = s.resume_position(&config(), &sampler(&config())).unwrap();
        assert_eq!((p.epoch, p.start, p.step, p.skipped), (3, 0, 2, 1));
    }

    #[test]
    fn resuming_with_different_settings_names_the_setting() {
        let s = state(1, config());
        let c = config();
        assert!(s.resume_position(&c, &sampler(&c)).is_ok());
        let other = StateConfig {
            batch_size: 8,
            ..config()
        };
        let e = s.resume_position(&other, &sampler(&other)).unwrap_err();
        let e = e.to_string();
        assert!(e.contains("batch_size = 4") && e.contains("has 8"), "{e}");
        // 10 samples in batches of 4: steps 0 to 2 exist.
        let e = state(3, config()).resume_position(&c, &sampler(&c));
        assert!(e.unwrap_err().to_string().contains("step 3"));
    }

    #[test]
    fn another_world_size_resumes_after_the_positions_every_rank_had_seen() {
        // 2 ranks x 2 batches of 2 of 10 samples seen: the first 8 positions.
        let was = StateConfig {
            batch_size: 2,
            world_size: 2,
            rank: 1,
            ..config()
        };
        let now = StateConfig {
            world_size: 3,
            rank: 2,
            ..was.clone()
        };
        let p = state(2, was.clone())
            .resume_position(&now, &sampler(&now))
            .unwrap();
        assert_eq!((p.epoch, p.start, p.step, p.skipped), (3, 8, 0, 0));
        // Dropping what does not fill a batch: nothing is left of this epoch on 3 ranks.
        let (was, now) = (
            StateConfig {
                last_batch: LastBatch::Drop,
                ..was
            },
            StateConfig {
                last_batch: LastBatch::Drop,
                ..now
            },
        );
        let p = state(2, was).resume_position(&now, &sampler(&now)).unwrap();
        assert_eq!((p.epoch, p.start, p.step), (4, 0, 0));
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
