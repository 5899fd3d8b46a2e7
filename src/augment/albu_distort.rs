//! albumentations' distortions with `INTER_LINEAR`, as albumentations 2 draws them and
//! computes them on a uint8 RGB image, each a map of source points then OpenCV 5.0's `remap`
//! ([`albu::remap`]):
//!
//! - `GridDistortion(num_steps, distort_limit, normalized, border_mode, fill, p)`:
//!   `num_steps + 1` relative cell sizes drawn per axis (`1 + U(distort_limit)`, all the
//!   columns' then all the rows'), normalized (the last cell scaled to its real width, then
//!   all of them so that the grid spans the image: `normalize_grid_distortion_steps`, its sum
//!   as numpy sums), each cell's source coordinates spread over its pixels as `np.linspace`
//!   spreads them (in f64, stored as float32): a separable map;
//! - `OpticalDistortion(distort_limit, mode="camera", border_mode, fill, p)`: a coefficient
//!   `k` drawn from `distort_limit`, and the map OpenCV's `initUndistortRectifyMap` makes for
//!   albumentations' camera (focal lengths the image's width and height, its centre the
//!   principal point; distortion `[k, k, 0, 0, 0]` in float32; the default new camera matrix
//!   centred at `(size - 1) / 2`): its arithmetic in f64, the 3x3 inverse by cofactors over
//!   the determinant as `cv::invert` computes a small one, each point rounded to float32;
//! - `Downscale(scale_range, interpolation_pair=nearest both ways, p)`: a scale drawn uniform,
//!   `cv2.resize` by it (`fx = fy = scale`: the size `cvRound(side * scale)`, each sample from
//!   `floor(i / scale)`) and back to the image's size (each from `floor(i / (side / small))`),
//!   both nearest: a map of whole pixels, composed.

use serde::{Deserialize, Serialize};

use super::albu::{self, constant, Cv2Border, WarpMap};
use super::error::PipelineError;
use super::pixel::PixelOp;
use super::spec::{coin, half, probability, OpKind, OpSpec};
use crate::rng::CounterRng;

/// albumentations' `GridDistortion` with `INTER_LINEAR`. An output with fewer pixels a side
/// than `num_steps` is left as it is (albumentations raises there: its cells would be
/// empty; the drop-in runs such a step in Python).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuGridDistortion {
    /// Cells along each axis. Default 5.
    #[serde(default = "five")]
    pub num_steps: u32,
    /// The range of each cell's relative change in size. Default `[-0.3, 0.3]`.
    #[serde(default = "three_tenths")]
    pub distort_limit: [f64; 2],
    /// Whether the cells are scaled so that the grid spans the image. Default true.
    #[serde(default = "yes")]
    pub normalized: bool,
    /// Default `constant`.
    #[serde(default = "constant")]
    pub border: Cv2Border,
    /// The constant border's colour. Default black.
    #[serde(default)]
    pub fill: [u8; 3],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn five() -> u32 {
    5
}

fn three_tenths() -> [f64; 2] {
    [-0.3, 0.3]
}

fn yes() -> bool {
    true
}

/// The checks both distortions share: the probability and the range of `distort_limit`.
fn check_limit(op: &str, p: f64, limit: [f64; 2]) -> Result<(), PipelineError> {
    probability(p, op)?;
    albu::ranges(op, &[("distort_limit", limit)])
}

/// The most cells [`AlbuGridDistortion`] takes along an axis.
const MOST_STEPS: u32 = 1024;

impl OpSpec for AlbuGridDistortion {
    fn kind(&self) -> OpKind {
        OpKind::MovingPixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        check_limit("albu_grid_distortion", self.p, self.distort_limit)?;
        if !(1..=MOST_STEPS).contains(&self.num_steps) {
            return Err(PipelineError::Parameter(format!(
                "albu_grid_distortion num_steps {} must be 1 to {MOST_STEPS}",
                self.num_steps
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, (h, w): (u32, u32), out: &mut Vec<PixelOp>) {
        if !coin(rng, self.p) {
            return;
        }
        let n = self.num_steps as usize;
        let [lo, hi] = self.distort_limit;
        let mut steps = |_| 1.0 + rng.uniform_in(lo, hi);
        let mut xs: Vec<f64> = (0..=n).map(&mut steps).collect();
        let mut ys: Vec<f64> = (0..=n).map(&mut steps).collect();
        // albumentations divides by the cell's size, which an image narrower than the grid
        // does not have (it raises there; the drop-in's translation refuses such a size).
        if (w as usize) < n || (h as usize) < n {
            return;
        }
        if self.normalized {
            normalize(&mut xs, w as usize, n);
            normalize(&mut ys, h as usize, n);
        }
        out.push(PixelOp::GridDistortion(Box::new(GridMap {
            num_steps: self.num_steps,
            steps_x: xs,
            steps_y: ys,
            border: self.border,
            fill: self.fill,
        })));
    }
}

/// A drawn grid: each axis's `num_steps + 1` cell sizes (relative to the cell's `side //
/// num_steps` pixels, normalized where the op normalizes), and the border.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GridMap {
    /// Cells along each axis.
    pub num_steps: u32,
    /// The columns' cell sizes.
    pub steps_x: Vec<f64>,
    /// The rows' cell sizes.
    pub steps_y: Vec<f64>,
    /// What is read outside the image.
    pub border: Cv2Border,
    /// The constant border's colour.
    pub fill: [u8; 3],
}

/// `normalize_grid_distortion_steps` along an axis of `side` pixels: the last cell scaled to
/// the part of a cell the side leaves it, then every cell by `side / (side // n)` over their
/// sum.
fn normalize(steps: &mut [f64], side: usize, n: usize) {
    let cell = side / n;
    let last = side.min((n + 1) * cell) - n * cell;
    if let Some(s) = steps.last_mut() {
        *s *= last as f64 / cell as f64;
    }
    let span = side as f64 / (side as f64 / n as f64).floor();
    let factor = span / numpy_sum(steps);
    for s in steps.iter_mut() {
        *s *= factor;
    }
}

/// `np.sum` of a float64 array: numpy's pairwise summation (sequential under 8 values, eight
/// running sums up to 128, halves above), so the same sum to the bit.
fn numpy_sum(v: &[f64]) -> f64 {
    const BLOCK: usize = 128;
    let n = v.len();
    if n < 8 {
        return v.iter().fold(0.0, |sum, &x| sum + x);
    }
    if n <= BLOCK {
        let mut r: [f64; 8] = v[..8].try_into().expect("eight values");
        let whole = n - n % 8;
        for chunk in v[8..whole].chunks_exact(8) {
            for (r, &x) in r.iter_mut().zip(chunk) {
                *r += x;
            }
        }
        let sum = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        return v[whole..].iter().fold(sum, |sum, &x| sum + x);
    }
    let half = n / 2;
    let half = half - half % 8;
    numpy_sum(&v[..half]) + numpy_sum(&v[half..])
}

/// `np.linspace(start, stop, len(out))` (f64), stored as float32 into `out`.
fn linspace(start: f64, stop: f64, out: &mut [f32]) {
    let num = out.len();
    if num == 0 {
        return;
    }
    if num == 1 {
        out[0] = start as f32;
        return;
    }
    let div = (num - 1) as f64;
    let delta = stop - start;
    let step = delta / div;
    for (i, v) in out.iter_mut().enumerate() {
        let i = i as f64;
        // numpy: `y * step`, or `y / div * delta` when the step is zero; then `+ start`.
        let y = if step == 0.0 {
            i / div * delta
        } else {
            i * step
        };
        *v = (y + start) as f32;
    }
    out[num - 1] = stop as f32;
}

/// One axis of albumentations' `generate_grid` into `out` (its `side` pixels, zeroed): in
/// cells of `side // n`, each cell's pixels read from the end of the previous cell's span to
/// that plus its size times the cell's, evenly (`np.linspace`); pixels past the cells read 0.
fn axis(steps: &[f64], n: usize, out: &mut [f32]) {
    let side = out.len();
    let cell = side / n;
    let mut prev = 0.0;
    for (i, &step) in steps.iter().enumerate() {
        let start = (i * cell).min(side);
        let end = (start + cell).min(side);
        let cur = prev + cell as f64 * step;
        linspace(prev, cur, &mut out[start..end]);
        prev = cur;
    }
}

/// The grid's map over an `h`x`w` image into `map`: each column's source `x` (the first
/// `w`), then each row's source `y` (the next `h`).
fn grid_map(grid: &GridMap, h: usize, w: usize, map: &mut Vec<f32>) {
    let n = grid.num_steps as usize;
    map.clear();
    map.resize(w + h, 0.0);
    let (xs, ys) = map.split_at_mut(w);
    axis(&grid.steps_x, n, xs);
    axis(&grid.steps_y, n, ys);
}

/// The drawn grid distortion of an `h`x`w` RGB8 image, in place (`map` and `scratch` its
/// working memory).
pub(crate) fn grid_distortion(
    rgb: &mut [u8],
    (h, w): (usize, usize),
    grid: &GridMap,
    map: &mut Vec<f32>,
    scratch: &mut Vec<u8>,
) {
    grid_map(grid, h, w, map);
    let (xs, ys) = map.split_at(w);
    let map = WarpMap::Separable { xs, ys };
    albu::remap(rgb, (h, w), map, grid.border, grid.fill, scratch);
}

/// albumentations' `OpticalDistortion` in its `camera` mode with `INTER_LINEAR`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuOpticalDistortion {
    /// The range of the distortion coefficient `k`. Default `[-0.05, 0.05]`.
    #[serde(default = "five_hundredths")]
    pub distort_limit: [f64; 2],
    /// Default `constant`.
    #[serde(default = "constant")]
    pub border: Cv2Border,
    /// The constant border's colour. Default black.
    #[serde(default)]
    pub fill: [u8; 3],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn five_hundredths() -> [f64; 2] {
    [-0.05, 0.05]
}

impl OpSpec for AlbuOpticalDistortion {
    fn kind(&self) -> OpKind {
        OpKind::MovingPixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        check_limit("albu_optical_distortion", self.p, self.distort_limit)
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if !coin(rng, self.p) {
            return;
        }
        let [lo, hi] = self.distort_limit;
        out.push(PixelOp::OpticalDistortion {
            k: rng.uniform_in(lo, hi),
            border: self.border,
            fill: self.fill,
        });
    }
}

/// The map `initUndistortRectifyMap` makes for albumentations' camera of an `h`x`w` image and
/// distortion `k` (see the module's text) into `map`: each pixel's source `x`, row by row (the
/// first `h * w`), then each one's source `y`.
fn camera_map(h: usize, w: usize, k: f64, map: &mut Vec<f32>) {
    // The distortion coefficients are float32; the camera's centre (`size / 2`) is exact.
    let k = f64::from(k as f32);
    let (fx, fy) = (w as f64, h as f64);
    let (u0, v0) = (fx / 2.0, fy / 2.0);
    // The default new camera matrix: the same focal lengths, centred at `(size - 1) / 2`.
    let (cx, cy) = ((w - 1) as f64 * 0.5, (h - 1) as f64 * 0.5);
    // Its inverse by cofactors over the determinant (`fx * fy`), as `cv::invert` computes a
    // 3x3 one: the products with the zeros drop out exactly.
    let d = 1.0 / (fx * fy);
    let (ir0, ir2) = (fy * d, -(cx * fy) * d);
    let (ir4, ir5) = (fx * d, -(fx * cy) * d);
    let ir8 = (fx * fy) * d;
    map.clear();
    map.resize(2 * h * w, 0.0);
    let (xs, ys) = map.split_at_mut(h * w);
    let inv_w = 1.0 / ir8;
    for i in 0..h {
        let y = (i as f64 * ir4 + ir5) * inv_w;
        let row = i * w..(i + 1) * w;
        for ((j, sx), sy) in xs[row.clone()].iter_mut().enumerate().zip(&mut ys[row]) {
            let x = (j as f64 * ir0 + ir2) * inv_w;
            let r2 = x * x + y * y;
            // `(1 + ((k3 r2 + k2) r2 + k1) r2) / (1 + ...)` with k1 = k2 = k and the rest 0.
            let kr = 1.0 + (k * r2 + k) * r2;
            *sx = (fx * (x * kr) + u0) as f32;
            *sy = (fy * (y * kr) + v0) as f32;
        }
    }
}

/// The drawn optical distortion of an `h`x`w` RGB8 image, in place (`map` and `scratch` its
/// working memory).
pub(crate) fn optical_distortion(
    rgb: &mut [u8],
    (h, w): (usize, usize),
    (k, border, fill): (f64, Cv2Border, [u8; 3]),
    map: &mut Vec<f32>,
    scratch: &mut Vec<u8>,
) {
    camera_map(h, w, k, map);
    let (xs, ys) = map.split_at(h * w);
    let map = WarpMap::Whole { xs, ys };
    albu::remap(rgb, (h, w), map, border, fill, scratch);
}

/// albumentations' `Downscale` with `INTER_NEAREST` both ways (its default). An output whose
/// scaled size rounds to nothing is left as it is (`cv2.resize` refuses it; the drop-in runs
/// such a step in Python).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuDownscale {
    /// The scale's range, in `(0, 1)`. Default `[0.25, 0.25]`.
    #[serde(default = "quarters")]
    pub scale_range: [f64; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn quarters() -> [f64; 2] {
    [0.25, 0.25]
}

impl OpSpec for AlbuDownscale {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_downscale")?;
        albu::ranges("albu_downscale", &[("scale_range", self.scale_range)])?;
        let [lo, hi] = self.scale_range;
        if lo <= 0.0 || hi >= 1.0 {
            return Err(PipelineError::Parameter(format!(
                "albu_downscale scale_range {:?} must lie in (0, 1)",
                self.scale_range
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if !coin(rng, self.p) {
            return;
        }
        let [lo, hi] = self.scale_range;
        out.push(PixelOp::Downscale(rng.uniform_in(lo, hi)));
    }
}

/// `cv2.resize`'s `INTER_NEAREST` source index of each of `dst` samples taken from `src` at
/// `inv_scale` (`dst / src`, or the `fx` given): `min(floor(i * (1 / inv_scale)), src - 1)`.
fn nearest(src: usize, dst: usize, inv_scale: f64) -> impl Iterator<Item = usize> {
    let step = 1.0 / inv_scale;
    (0..dst).map(move |i| ((i as f64 * step).floor() as usize).min(src - 1))
}

/// One axis of `Downscale`: for each of `side` output samples, the input sample it shows
/// after the resize to `cvRound(side * scale)` and back (None when that size is zero).
fn down_and_up(side: usize, scale: f64) -> Option<Vec<usize>> {
    let small = (side as f64 * scale).round_ties_even() as usize;
    if small == 0 {
        return None;
    }
    let down: Vec<usize> = nearest(side, small, scale).collect();
    Some(
        nearest(small, side, side as f64 / small as f64)
            .map(|i| down[i])
            .collect(),
    )
}

/// albumentations' `Downscale` of an `h`x`w` RGB8 image by `scale`, nearest both ways, in
/// place.
pub(crate) fn downscale(rgb: &mut [u8], h: usize, w: usize, scale: f64, copy: &mut Vec<u8>) {
    let (Some(xs), Some(ys)) = (down_and_up(w, scale), down_and_up(h, scale)) else {
        return;
    };
    copy.clear();
    copy.extend_from_slice(&rgb[..h * w * 3]);
    for (row, &sy) in rgb.chunks_exact_mut(w * 3).zip(&ys) {
        let src = &copy[sy * w * 3..][..w * 3];
        for (px, &sx) in row.chunks_exact_mut(3).zip(&xs) {
            px.copy_from_slice(&src[sx * 3..sx * 3 + 3]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downscale_shows_the_nearest_kept_sample() {
        // 8 samples at 0.25: 2 kept (0 and 4), each shown over its half.
        assert_eq!(down_and_up(8, 0.25).unwrap(), [0, 0, 0, 0, 4, 4, 4, 4]);
        // 5 at 0.5: cvRound(2.5) = 2 (half to even), samples 0 and 2.
        assert_eq!(down_and_up(5, 0.5).unwrap(), [0, 0, 0, 2, 2]);
        assert_eq!(down_and_up(3, 0.1), None);
        let mut rgb: Vec<u8> = (0..2 * 4 * 3).map(|v| v as u8).collect();
        downscale(&mut rgb, 2, 4, 0.5, &mut Vec::new());
        // Rows: 2 -> 1 -> 2 (both show row 0); columns: 4 -> 2 (0, 2) -> 4.
        assert_eq!(&rgb[..12], &[0, 1, 2, 0, 1, 2, 6, 7, 8, 6, 7, 8]);
        assert_eq!(&rgb[12..], &rgb[..12].to_vec()[..]);
    }

    #[test]
    fn an_undistorted_camera_maps_each_pixel_near_itself() {
        // k = 0: each point is the pixel's own, moved by the half pixel between the camera's
        // centre (`size / 2`) and the new camera's (`(size - 1) / 2`).
        let mut map = Vec::new();
        camera_map(4, 6, 0.0, &mut map);
        let (xs, ys) = map.split_at(24);
        for i in 0..4 {
            for j in 0..6 {
                assert!((f64::from(xs[i * 6 + j]) - (j as f64 + 0.5)).abs() < 1e-5);
                assert!((f64::from(ys[i * 6 + j]) - (i as f64 + 0.5)).abs() < 1e-5);
            }
        }
        // Barrel (k > 0): corners read from farther out, the centre stays.
        camera_map(101, 101, 0.3, &mut map);
        let xs = &map[..101 * 101];
        assert!(xs[0] < 0.0 && xs[100] > 101.0);
        assert!((xs[50 * 101 + 50] - 50.5).abs() < 1e-4);
    }

    #[test]
    fn numpy_sum_adds_pairwise_as_numpy_does() {
        // Sequential below eight values; eight running sums then the rest from eight on.
        let v: Vec<f64> = (0..23).map(|i| 1.0 + (i as f64) * 0.1).collect();
        let seq = |v: &[f64]| v.iter().fold(0.0, |s, &x| s + x);
        assert_eq!(numpy_sum(&v[..6]), seq(&v[..6]));
        let mut r: [f64; 8] = v[..8].try_into().unwrap();
        for k in 0..8 {
            r[k] += v[8 + k];
        }
        let want = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        let want = v[16..].iter().fold(want, |s, &x| s + x);
        assert_eq!(numpy_sum(&v).to_bits(), want.to_bits());
        assert_eq!(numpy_sum(&[]), 0.0);
    }

    #[test]
    fn linspace_ends_at_its_stop_and_steps_evenly_between() {
        let mut out = [0f32; 5];
        linspace(2.0, 4.0, &mut out);
        assert_eq!(out, [2.0, 2.5, 3.0, 3.5, 4.0]);
        let mut one = [9f32; 1];
        linspace(1.5, 7.0, &mut one);
        assert_eq!(one, [1.5]);
        let mut flat = [0f32; 3];
        linspace(3.0, 3.0, &mut flat);
        assert_eq!(flat, [3.0; 3]);
    }

    /// A grid of `n` cells a side, each of its own size (not normalized).
    fn unit_grid(n: u32) -> GridMap {
        GridMap {
            num_steps: n,
            steps_x: vec![1.0; n as usize + 1],
            steps_y: vec![1.0; n as usize + 1],
            border: Cv2Border::Constant,
            fill: [0; 3],
        }
    }

    #[test]
    fn an_undistorted_grid_maps_each_pixel_to_itself_where_the_cells_reach() {
        // Unit steps, not normalized: a cell of `side // n` pixels spans `cell` source pixels
        // over `cell` output pixels, so pixel i reads i * cell / (cell - 1) within each cell.
        let mut map = Vec::new();
        grid_map(&unit_grid(4), 9, 10, &mut map);
        let (xs, ys) = map.split_at(10);
        assert_eq!(xs, [0.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0, 8.0, 8.0, 10.0]);
        // 9 rows in cells of 2: the fifth cell has one row, which reads its start.
        assert_eq!(ys, [0.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0, 8.0, 8.0]);
    }

    #[test]
    fn pixels_past_the_last_cell_read_zero_as_albumentations_leaves_them() {
        // 9 pixels in 5 cells of 1: six cells cover six pixels, the rest keep 0.
        let mut map = Vec::new();
        grid_map(&unit_grid(5), 9, 9, &mut map);
        let xs = &map[..9];
        assert_eq!(xs, [0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 0.0, 0.0, 0.0]);
    }

    #[test]
    fn normalized_cells_are_albumentations_to_the_bit() {
        // `normalize_grid_distortion_steps((side, side), n, steps, ...)["steps_x"]` of
        // albumentations 2.0.8, as the bits of each float64: six cells (sums in sequence) and
        // eight (numpy's eight running sums).
        let cases: [(usize, usize, &[f64], &[u64]); 2] = [
            (
                224,
                5,
                &[1.2, 0.8, 1.1, 0.9, 1.0, 1.3],
                &[
                    0x3ff3190246065dab,
                    0x3fe976adb2b32790,
                    0x3ff181976adb2b33,
                    0x3feca58369098c81,
                    0x3fefd4591f5ff173,
                    0x3fbe17e48d5f5d4d,
                ],
            ),
            (
                100,
                7,
                &[0.75, 1.25, 1.1, 0.95, 1.05, 0.7, 1.3, 0.85],
                &[
                    0x3fe7bd26bde935f0,
                    0x3ff3c84af397acf2,
                    0x3ff16893e099f45b,
                    0x3fee11b99b387784,
                    0x3ff09e0184f00c28,
                    0x3fe628020695658a,
                    0x3ff492dd4f419525,
                    0x3fbebf5ba0a587af,
                ],
            ),
        ];
        for (side, n, steps, want) in cases {
            let mut steps = steps.to_vec();
            normalize(&mut steps, side, n);
            let got: Vec<u64> = steps.iter().map(|s| s.to_bits()).collect();
            assert_eq!(got, want, "{side} in {n}");
        }
    }

    #[test]
    fn normalized_cells_span_the_image() {
        let mut steps = vec![1.2, 0.8, 1.1, 0.9, 1.0, 1.3];
        normalize(&mut steps, 224, 5);
        // 224 = 5 * 44 + 4: the last cell is 4/44 of one; the cells then sum to 224 / 44.
        let total: f64 = steps.iter().sum();
        assert!((total - 224.0 / 44.0).abs() < 1e-12, "{total}");
        let grid = GridMap {
            steps_x: steps.clone(),
            steps_y: steps,
            ..unit_grid(5)
        };
        let mut map = Vec::new();
        grid_map(&grid, 224, 224, &mut map);
        let xs = &map[..224];
        assert_eq!(xs[0], 0.0);
        assert!((f64::from(xs[223]) - 224.0).abs() < 1e-3, "{}", xs[223]);
    }

    #[test]
    fn grid_distortion_draws_cells_in_the_limit_and_refuses_bad_settings() {
        let op = AlbuGridDistortion {
            num_steps: 3,
            distort_limit: [-0.5, 0.25],
            normalized: false,
            border: Cv2Border::Reflect101,
            fill: [0; 3],
            p: 1.0,
        };
        op.check().unwrap();
        let mut out = Vec::new();
        for i in 0..200 {
            op.draw(&mut CounterRng::from_key(i), (30, 40), &mut out);
        }
        assert_eq!(out.len(), 200);
        for o in &out {
            let PixelOp::GridDistortion(g) = o else {
                panic!("{o:?}")
            };
            assert_eq!((g.steps_x.len(), g.steps_y.len()), (4, 4));
            assert!(g
                .steps_x
                .iter()
                .chain(&g.steps_y)
                .all(|&s| (0.5..=1.25).contains(&s)));
        }
        for bad in [
            AlbuGridDistortion {
                num_steps: 0,
                ..op.clone()
            },
            AlbuGridDistortion {
                distort_limit: [0.3, -0.3],
                ..op.clone()
            },
            AlbuGridDistortion { p: 1.5, ..op },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
        }
    }
}
