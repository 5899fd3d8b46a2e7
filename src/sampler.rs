//! Which samples each batch holds: per-epoch order, sharding across ranks, last-batch policy.
//!
//! The epoch's order is a permutation `P` of the `N` samples (identity when not shuffled). Rank
//! `r` of `W` owns the global positions `r, r + W, r + 2W, ...`; every rank owns the same number
//! of positions `S`, so every rank yields the same number of batches (a rank with fewer batches
//! would hang the collective operations of distributed training):
//!
//! | policy | positions per rank `S` | batches | last batch |
//! |---|---|---|---|
//! | `Drop` | `floor(N / W)` | `floor(S / B)` | full; the remainder is not seen this epoch |
//! | `Pad` | `ceil(N / W)` | `ceil(S / B)` | full (`B` slots); padding slots are marked not valid |
//! | `Partial` | `ceil(N / W)` | `ceil(S / B)` | `S - (batches - 1) * B` slots |
//!
//! A position past `N` and a slot past `S` are *padding*: they repeat a real sample (wrapping
//! around the order, as PyTorch's `DistributedSampler` does) so the tensor is filled with real
//! images, and they come after every real sample of the batch, so `valid` says how many leading
//! slots count. Across ranks, every sample appears exactly once per epoch as a valid slot
//! (`Pad`, `Partial`) or at most once (`Drop`).
//!
//! After `k` batches on every rank, the ranks have seen exactly the first `k * B * W` positions
//! of the order (always fewer than `N`). So a run resumed mid-epoch with another world size (or
//! other ranks) plans the rest of the epoch the same way over the positions from `start =
//! k * B * W` on: rank `r` of `W'` owns `start + r, start + r + W', ...`, with `S` computed over
//! the `N - start` positions left. With `start` 0 this is the table above; with the same `W`
//! and rank it is exactly the batches the uninterrupted run would have yielded.

use crate::rng::{CounterRng, Stream};

/// What to do with the samples that do not fill a whole last batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LastBatch {
    /// Skip them: every batch is full and real; up to `B - 1` samples per rank are not seen.
    Drop,
    /// Fill the last batch up to the batch size with repeated samples and report how many are
    /// real in [`Batch::valid`](crate::Batch::valid). The default: shapes stay static, which
    /// graph-compiled training (HPU lazy mode, `torch.compile`) needs, and no sample is lost.
    #[default]
    Pad,
    /// Yield a smaller last batch. Changes the batch shape once per epoch (a recompilation).
    Partial,
}

/// This process's place in a distributed run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    /// This process's rank, `0..world_size`.
    pub rank: usize,
    /// The number of processes.
    pub world_size: usize,
    /// This process's rank on its node (which accelerator card it drives). It does not change
    /// which samples the rank gets.
    pub local_rank: usize,
}

impl Default for Shard {
    fn default() -> Self {
        Self {
            rank: 0,
            world_size: 1,
            local_rank: 0,
        }
    }
}

/// Environment variables that describe a distributed run, by launcher:
/// `(rank, world size, local rank, local world size)`.
const LAUNCHERS: [[&str; 4]; 2] = [
    // torchrun, torch.distributed.launch, deepspeed, accelerate.
    ["RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"],
    // Open MPI's mpirun (the Habana multi-node examples use it).
    [
        "OMPI_COMM_WORLD_RANK",
        "OMPI_COMM_WORLD_SIZE",
        "OMPI_COMM_WORLD_LOCAL_RANK",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
    ],
];

impl Shard {
    /// Reads the shard from the environment as the launchers set it: `RANK`, `WORLD_SIZE` and
    /// `LOCAL_RANK` (torchrun), or `OMPI_COMM_WORLD_RANK`, `OMPI_COMM_WORLD_SIZE` and
    /// `OMPI_COMM_WORLD_LOCAL_RANK` (mpirun). With only `LOCAL_RANK` and `LOCAL_WORLD_SIZE`
    /// (a single-node launch), the local values are the global ones. `None` when none is set.
    ///
    /// # Errors
    /// A variable is set but is not a number, a rank is not below its world size, or only one
    /// of a rank/world-size pair is set.
    pub fn from_env() -> Result<Option<Self>, crate::Error> {
        Self::from_vars(|name| std::env::var(name).ok())
    }

    /// [`from_env`](Self::from_env) over any variable lookup (tests pass a map).
    ///
    /// # Errors
    /// As [`from_env`](Self::from_env).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Option<Self>, crate::Error> {
        let num = |name: &str| -> Result<Option<usize>, crate::Error> {
            var(name)
                .map(|v| {
                    v.trim().parse::<usize>().map_err(|_| {
                        crate::Error::config(name, format!("{name}={v:?} is not a number"))
                    })
                })
                .transpose()
        };
        for [r, w, lr, lw] in LAUNCHERS {
            let (rank, world, local, local_world) = (num(r)?, num(w)?, num(lr)?, num(lw)?);
            let (rank, world_size) = match (rank, world, local, local_world) {
                (Some(rank), Some(world), ..) => (rank, world),
                (None, None, Some(local), Some(local_world)) => (local, local_world),
                (None, None, ..) => continue,
                _ => {
                    return Err(crate::Error::config(
                        format!("{r}/{w}"),
                        format!("{r} and {w} must be set together"),
                    ))
                }
            };
            if let (Some(local), Some(local_world)) = (local, local_world) {
                if local >= local_world {
                    return Err(crate::Error::config(
                        lr,
                        format!("{lr}={local} is not below {lw}={local_world}"),
                    ));
                }
            }
            let shard = Self {
                rank,
                world_size,
                local_rank: local.unwrap_or(0),
            };
            shard.validate()?;
            return Ok(Some(shard));
        }
        Ok(None)
    }

    pub(crate) fn validate(&self) -> Result<(), crate::Error> {
        if self.world_size == 0 || self.rank >= self.world_size {
            return Err(crate::Error::config(
                "shard",
                format!(
                    "rank {} is not below world size {}",
                    self.rank, self.world_size
                ),
            ));
        }
        Ok(())
    }
}

/// The samples of one batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BatchPlan {
    /// Dataset index for each slot.
    pub indices: Vec<usize>,
    /// How many leading slots are real (the rest are padding).
    pub valid: usize,
    /// The global position of the batch's first slot in its epoch's order: the batch's key
    /// where its samples share their draws ([`crate::loader::LoaderBuilder::draws_per_batch`]).
    pub first: usize,
}

/// Plans batches for one rank.
#[derive(Clone, Debug)]
pub(crate) struct Sampler {
    pub len: usize,
    pub batch_size: usize,
    pub shuffle: Option<u64>,
    pub shard: Shard,
    pub last_batch: LastBatch,
}

impl Sampler {
    /// The same planning over an epoch order of `len` given positions (a user's sampler's),
    /// taken as it is: no shuffle of ours.
    pub fn with_len(&self, len: usize) -> Self {
        Self {
            len,
            shuffle: None,
            ..self.clone()
        }
    }

    /// Positions this rank owns per epoch (`S` in the module docs).
    pub fn positions_per_rank(&self) -> usize {
        self.positions_from(0)
    }

    /// Positions this rank owns among those from global position `start` on.
    pub fn positions_from(&self, start: usize) -> usize {
        let (m, w) = (self.len.saturating_sub(start), self.shard.world_size);
        match self.last_batch {
            LastBatch::Drop => m / w,
            LastBatch::Pad | LastBatch::Partial => m.div_ceil(w),
        }
    }

    /// Batches per epoch, the same on every rank.
    pub fn batches_per_epoch(&self) -> usize {
        self.batches_from(0)
    }

    /// Batches over the positions from global position `start` on, the same on every rank.
    pub fn batches_from(&self, start: usize) -> usize {
        let s = self.positions_from(start);
        match self.last_batch {
            LastBatch::Drop => s / self.batch_size,
            LastBatch::Pad | LastBatch::Partial => s.div_ceil(self.batch_size),
        }
    }

    /// The epoch's permutation of all sample indices, the same on every rank.
    pub fn epoch_order(&self, epoch: u64) -> Vec<u32> {
        let mut order: Vec<u32> = (0..self.len as u32).collect();
        if let Some(seed) = self.shuffle {
            let mut rng = CounterRng::new(seed, epoch, u64::MAX, Stream::Shuffle);
            for i in (1..order.len()).rev() {
                let j = rng.below(i as u64 + 1) as usize;
                order.swap(i, j);
            }
        }
        order
    }

    /// The samples of batch `b` of an epoch whose order is `order`, counting batches over the
    /// positions from global position `start` on (0: the whole epoch).
    pub fn batch(&self, order: &[u32], start: usize, b: usize) -> BatchPlan {
        let (n, w, bs) = (self.len, self.shard.world_size, self.batch_size);
        let s = self.positions_from(start);
        let first = b * bs;
        let slots = match self.last_batch {
            LastBatch::Drop | LastBatch::Pad => bs,
            LastBatch::Partial => bs.min(s - first),
        };
        let mut indices = Vec::with_capacity(slots);
        let mut valid = 0;
        let key = start + first * w + self.shard.rank;
        for slot in first..first + slots {
            let global = start + slot * w + self.shard.rank;
            if slot < s && global < n {
                valid += 1;
            }
            indices.push(order[global % n] as usize);
        }
        BatchPlan {
            indices,
            valid,
            first: key,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sampler(
        len: usize,
        batch_size: usize,
        rank: usize,
        world_size: usize,
        last_batch: LastBatch,
    ) -> Sampler {
        Sampler {
            len,
            batch_size,
            shuffle: Some(3),
            shard: Shard {
                rank,
                world_size,
                local_rank: 0,
            },
            last_batch,
        }
    }

    #[test]
    fn every_rank_yields_the_same_batch_count_and_valid_slots_cover_each_sample_once() {
        for n in [1, 7, 10, 64, 101] {
            for w in 1..=16 {
                for bs in [1, 3, 8] {
                    for policy in [LastBatch::Drop, LastBatch::Pad, LastBatch::Partial] {
                        let mut seen = vec![0u32; n];
                        let counts: Vec<usize> = (0..w)
                            .map(|r| {
                                let s = sampler(n, bs, r, w, policy);
                                let order = s.epoch_order(5);
                                for b in 0..s.batches_per_epoch() {
                                    let plan = s.batch(&order, 0, b);
                                    if policy != LastBatch::Partial {
                                        assert_eq!(plan.indices.len(), bs);
                                    }
                                    plan.indices[..plan.valid]
                                        .iter()
                                        .for_each(|&i| seen[i] += 1);
                                }
                                s.batches_per_epoch()
                            })
                            .collect();
                        assert!(
                            counts.iter().all(|&c| c == counts[0]),
                            "n={n} w={w} bs={bs} {policy:?}: {counts:?}"
                        );
                        assert!(
                            seen.iter().all(|&c| c <= 1),
                            "n={n} w={w} bs={bs} {policy:?}: a sample seen twice"
                        );
                        if policy != LastBatch::Drop {
                            assert!(
                                seen.iter().all(|&c| c == 1),
                                "n={n} w={w} bs={bs} {policy:?}: a sample not seen"
                            );
                        } else {
                            let per_rank = (n / w) / bs * bs;
                            assert_eq!(seen.iter().filter(|&&c| c == 1).count(), per_rank * w);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn the_rest_of_an_epoch_replanned_on_other_ranks_covers_each_unseen_sample_once() {
        for n in [7, 10, 64, 101] {
            for (w, bs) in [(1, 3), (2, 8), (3, 1), (4, 3), (5, 8)] {
                for policy in [LastBatch::Drop, LastBatch::Pad, LastBatch::Partial] {
                    let old = |r| sampler(n, bs, r, w, policy);
                    let order = old(0).epoch_order(2);
                    for k in 0..old(0).batches_per_epoch() {
                        // Every rank yielded k batches: these are the samples seen so far.
                        let mut seen = vec![0u32; n];
                        for r in 0..w {
                            for b in 0..k {
                                let plan = old(r).batch(&order, 0, b);
                                plan.indices[..plan.valid]
                                    .iter()
                                    .for_each(|&i| seen[i] += 1);
                            }
                        }
                        let start = k * bs * w;
                        assert!(start < n, "n={n} w={w} bs={bs} k={k}");
                        for w2 in 1..=6 {
                            let mut seen = seen.clone();
                            let counts: Vec<usize> = (0..w2)
                                .map(|r| {
                                    let s = sampler(n, bs, r, w2, policy);
                                    for b in 0..s.batches_from(start) {
                                        let plan = s.batch(&order, start, b);
                                        plan.indices[..plan.valid]
                                            .iter()
                                            .for_each(|&i| seen[i] += 1);
                                        if w2 == w {
                                            assert_eq!(plan, old(r).batch(&order, 0, k + b));
                                        }
                                    }
                                    s.batches_from(start)
                                })
                                .collect();
                            let what = format!("n={n} w={w}->{w2} bs={bs} k={k} {policy:?}");
                            assert!(counts.iter().all(|&c| c == counts[0]), "{what}");
                            if policy == LastBatch::Drop {
                                assert!(seen.iter().all(|&c| c <= 1), "{what}");
                            } else {
                                assert!(seen.iter().all(|&c| c == 1), "{what}: {seen:?}");
                            }
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn a_batchs_key_is_its_first_slots_position_the_same_after_a_resume_at_it() {
        for (w, rank) in [(1, 0), (3, 2)] {
            let s = sampler(40, 4, rank, w, LastBatch::Pad);
            let order = s.epoch_order(1);
            let keys: Vec<usize> = (0..s.batches_per_epoch())
                .map(|b| s.batch(&order, 0, b).first)
                .collect();
            let mut unique = keys.clone();
            unique.dedup();
            assert_eq!(unique.len(), keys.len(), "each batch its own key");
            // Resumed at batch 2's first position, its batches keep their keys.
            let start = 2 * 4 * w;
            assert_eq!(s.batch(&order, start, 0).first, keys[2]);
            assert_eq!(s.batch(&order, start, 1).first, keys[3]);
        }
    }

    #[test]
    fn padding_comes_after_the_real_samples() {
        let s = sampler(10, 4, 0, 1, LastBatch::Pad);
        let order = s.epoch_order(0);
        let last = s.batch(&order, 0, 2);
        assert_eq!((last.indices.len(), last.valid), (4, 2));
        assert_eq!(
            &last.indices[2..],
            &[order[0] as usize, order[1] as usize],
            "padding wraps to the epoch's start"
        );
        let s = sampler(10, 4, 0, 1, LastBatch::Partial);
        assert_eq!(s.batch(&order, 0, 2).indices.len(), 2);
    }

    #[test]
    fn shuffle_depends_on_seed_and_epoch_and_is_a_permutation() {
        let s = sampler(1000, 8, 0, 1, LastBatch::Pad);
        let (a, b) = (s.epoch_order(0), s.epoch_order(1));
        assert_ne!(a, b);
        assert_eq!(a, s.epoch_order(0));
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..1000).collect::<Vec<_>>());
        let seq = Sampler { shuffle: None, ..s };
        assert_eq!(seq.epoch_order(4), (0..1000).collect::<Vec<_>>());
    }

    #[test]
    fn each_epoch_reshuffles_samples_across_ranks() {
        let (n, w) = (1000, 8);
        let owned = |epoch| {
            let s = sampler(n, 10, 0, w, LastBatch::Pad);
            let order = s.epoch_order(epoch);
            let mut mine: Vec<usize> = (0..s.batches_per_epoch())
                .flat_map(|b| s.batch(&order, 0, b).indices)
                .collect();
            mine.sort_unstable();
            mine
        };
        let (a, b) = (owned(0), owned(1));
        let shared = a.iter().filter(|i| b.binary_search(i).is_ok()).count();
        // With a fresh permutation, rank 0 keeps about 1/8 of its samples (125 of 1000/8).
        assert!(shared < 40, "rank 0 kept {shared} of {} samples", a.len());
    }

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: std::collections::HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| map.get(k).cloned()
    }

    #[test]
    fn shard_comes_from_torchrun_and_mpirun_variables() {
        let torchrun = [
            ("RANK", "5"),
            ("WORLD_SIZE", "16"),
            ("LOCAL_RANK", "1"),
            ("LOCAL_WORLD_SIZE", "4"),
        ];
        assert_eq!(
            Shard::from_vars(vars(&torchrun)).unwrap(),
            Some(Shard {
                rank: 5,
                world_size: 16,
                local_rank: 1
            })
        );
        let mpirun = [
            ("OMPI_COMM_WORLD_RANK", "3"),
            ("OMPI_COMM_WORLD_SIZE", "8"),
            ("OMPI_COMM_WORLD_LOCAL_RANK", "3"),
        ];
        assert_eq!(
            Shard::from_vars(vars(&mpirun)).unwrap(),
            Some(Shard {
                rank: 3,
                world_size: 8,
                local_rank: 3
            })
        );
        let single_node = [("LOCAL_RANK", "2"), ("LOCAL_WORLD_SIZE", "4")];
        assert_eq!(
            Shard::from_vars(vars(&single_node)).unwrap(),
            Some(Shard {
                rank: 2,
                world_size: 4,
                local_rank: 2
            })
        );
        assert_eq!(Shard::from_vars(vars(&[])).unwrap(), None);
    }

    #[test]
    fn bad_shard_variables_are_config_errors_that_name_the_variable() {
        for bad in [
            &[("RANK", "x"), ("WORLD_SIZE", "2")][..],
            &[("RANK", "2"), ("WORLD_SIZE", "2")],
            &[("RANK", "0")],
            &[
                ("RANK", "0"),
                ("WORLD_SIZE", "2"),
                ("LOCAL_RANK", "4"),
                ("LOCAL_WORLD_SIZE", "4"),
            ],
        ] {
            let err = Shard::from_vars(vars(bad)).unwrap_err().to_string();
            assert!(
                err.contains("RANK") || err.contains("rank"),
                "{bad:?}: {err}"
            );
        }
    }
}
