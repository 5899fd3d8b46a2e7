//! A counter-based random generator: every draw is a pure function of `(seed, epoch, sample,
//! stream, counter)`, so results never depend on which thread draws them or in what order.

const GOLDEN: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's finaliser: a bijective mix with full avalanche.
fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The seed view `view` of a multi-view loader draws its plans from: view 0 draws from the
/// loader's own seed (what a loader of that one view draws), every other view from one of its
/// own.
pub(crate) fn view_seed(seed: u64, view: usize) -> u64 {
    const VIEWS: u64 = 0x5649_4557_535F_4B45; // "VIEWS_KE"
    if view == 0 {
        seed
    } else {
        mix(mix(seed ^ VIEWS).wrapping_add(view as u64))
    }
}

/// The seed image `image` of a sample draws its plans from, where each sample holds several
/// images read by loaders of their own (a ControlNet table's image and its conditioning image):
/// image 0 draws from the loader's own seed, every other image from one of its own, so that two
/// images of one sample put through the same random transform get independent draws, as from
/// one generator drawn in turn. The order and the replacements of skipped samples stay the
/// seed's, so the loaders' batches hold the same samples.
pub(crate) fn image_seed(seed: u64, image: usize) -> u64 {
    const IMAGES: u64 = 0x494D_4147_4553_5F4B; // "IMAGES_K"
    if image == 0 {
        seed
    } else {
        mix(mix(seed ^ IMAGES).wrapping_add(image as u64))
    }
}

/// Independent streams of random numbers for one sample, so that adding a new random choice
/// to one op never changes the numbers another op sees.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub(crate) enum Stream {
    /// The per-epoch permutation of the dataset.
    Shuffle = 1,
    /// RandomResizedCrop's window.
    Crop = 2,
    /// RandomHorizontalFlip's coin.
    Flip = 3,
    /// The replacement chosen for a skipped sample.
    Replace = 4,
    /// A block-shuffled order (Parquet): the row groups' order, and each window's rows.
    Blocks = 5,
    /// A video's clips: where each starts (and torchvision's clip samplers' picks).
    Clips = 6,
    /// The pipeline's other random ops: op `k` of the pipeline draws from stream `Ops + k`.
    Ops = 16,
}

/// A generator keyed by `(seed, epoch, index, stream)`; draw `i` is `mix(key + i * GOLDEN)`.
#[derive(Clone, Debug)]
pub(crate) struct CounterRng {
    key: u64,
    counter: u64,
}

impl CounterRng {
    pub(crate) fn new(seed: u64, epoch: u64, index: u64, stream: Stream) -> Self {
        let key = mix(
            mix(mix(seed ^ GOLDEN).wrapping_add(epoch)).wrapping_add(index)
                ^ (stream as u64).wrapping_mul(GOLDEN),
        );
        Self { key, counter: 0 }
    }

    /// The generator of the pipeline's op at position `op` (see [`Stream::Ops`]).
    pub(crate) fn for_op(seed: u64, epoch: u64, index: u64, op: usize) -> Self {
        let key = mix(
            mix(mix(seed ^ GOLDEN).wrapping_add(epoch)).wrapping_add(index)
                ^ (Stream::Ops as u64 + op as u64).wrapping_mul(GOLDEN),
        );
        Self { key, counter: 0 }
    }

    /// A generator whose key was itself drawn from another (noise drawn lazily, when applied).
    pub(crate) fn from_key(key: u64) -> Self {
        Self { key, counter: 0 }
    }

    pub(crate) fn next_u64(&mut self) -> u64 {
        self.counter = self.counter.wrapping_add(1);
        mix(self.key.wrapping_add(self.counter.wrapping_mul(GOLDEN)))
    }

    /// Uniform in `[0, 1)` with 53 random bits.
    pub(crate) fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Uniform in `[lo, hi)`.
    pub(crate) fn uniform_in(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.uniform()
    }

    /// Uniform integer in `[0, n)`; `n` must be positive. Multiply-shift, bias below 2^-32.
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform integer in `[lo, hi]` (`lo <= hi`): Python's `random.randint(lo, hi)`.
    pub(crate) fn int_in(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo) as u64 + 1) as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_key_gives_same_sequence_and_keys_differ() {
        let a: Vec<u64> = {
            let mut r = CounterRng::new(7, 1, 42, Stream::Crop);
            (0..4).map(|_| r.next_u64()).collect()
        };
        let b: Vec<u64> = {
            let mut r = CounterRng::new(7, 1, 42, Stream::Crop);
            (0..4).map(|_| r.next_u64()).collect()
        };
        assert_eq!(a, b);
        for (s, e, i, st) in [
            (8, 1, 42, Stream::Crop),
            (7, 2, 42, Stream::Crop),
            (7, 1, 43, Stream::Crop),
            (7, 1, 42, Stream::Flip),
        ] {
            assert_ne!(CounterRng::new(s, e, i, st).next_u64(), a[0]);
        }
    }

    #[test]
    fn uniform_stays_in_range_and_is_roughly_flat() {
        let mut r = CounterRng::new(1, 0, 0, Stream::Crop);
        let mut buckets = [0u32; 10];
        for _ in 0..100_000 {
            let u = r.uniform();
            assert!((0.0..1.0).contains(&u));
            buckets[(u * 10.0) as usize] += 1;
        }
        assert!(
            buckets.iter().all(|&b| (9_000..11_000).contains(&b)),
            "{buckets:?}"
        );
        assert!((0..1000).all(|_| r.below(3) < 3));
    }
}
