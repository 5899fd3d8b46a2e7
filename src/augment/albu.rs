//! albumentations' own ops, as albumentations 2 draws them and computes them on a uint8 RGB
//! image (what a Kaggle-style Dataset's `A.Compose` gives its steps):
//!
//! - `Transpose(p)` and `RandomRotate90(p)` (`np.rot90` by a factor drawn from 0-3) of a square
//!   image;
//! - `RandomBrightnessContrast(brightness_limit, contrast_limit, p)`: `x * alpha + beta * 255`
//!   through albucore's float32 lookup table, clipped and truncated to bytes;
//! - `HueSaturationValue(hue_shift_limit, sat_shift_limit, val_shift_limit, p)`: OpenCV's byte
//!   HSV (`COLOR_RGB2HSV`, hue in `[0, 180)`), the hue shifted modulo 180, saturation and value
//!   shifted by whole levels with saturation (grey pixels kept grey), and back with
//!   `COLOR_HSV2RGB` as the x86-64 opencv-python wheels run it (their AVX2 kernel on each
//!   row's blocks of 32 pixels, with fused multiply-adds and truncation, and the scalar code
//!   on the rest of the row, which rounds);
//! - `CoarseDropout(num_holes_range, hole_height_range, hole_width_range, fill, p)`: holes
//!   drawn as albumentations draws them, erased in the written output as `random_erasing`'s
//!   boxes are.
//!
//! Every draw is the same distribution as albumentations', from hpuload's counter-based
//! generator (so runs repeat and resume); the pixels are albumentations' for the same
//! parameters, byte for byte (tested against a fixture it wrote, `tests/fixtures/albu`).

use serde::{Deserialize, Serialize};

use super::erase::EraseBox;
use super::error::PipelineError;
use super::pixel::PixelOp;
use super::spec::{coin, half, probability, OpKind, OpSpec};
use crate::rng::CounterRng;

/// albumentations' `Transpose(p)`: rows become columns, of a square output. Default p 0.5.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuTranspose {
    /// Probability.
    #[serde(default = "half")]
    pub p: f64,
}

impl OpSpec for AlbuTranspose {
    fn kind(&self) -> OpKind {
        OpKind::MovingPixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_transpose")
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            out.push(PixelOp::Transpose);
        }
    }
    fn needs_square(&self) -> bool {
        true
    }
}

/// albumentations' `RandomRotate90(p)`: `np.rot90(image, k)` (counter-clockwise quarter
/// turns), `k` uniform in 0-3, of a square output. Default p 0.5.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuRandomRotate90 {
    /// Probability.
    #[serde(default = "half")]
    pub p: f64,
}

impl OpSpec for AlbuRandomRotate90 {
    fn kind(&self) -> OpKind {
        OpKind::MovingPixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_random_rotate90")
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            let k = rng.below(4) as u8;
            if k != 0 {
                out.push(PixelOp::Rot90(k));
            }
        }
    }
    fn needs_square(&self) -> bool {
        true
    }
}

/// albumentations' `RandomBrightnessContrast(brightness_limit, contrast_limit,
/// brightness_by_max=True, ensure_safe_range=False, p)`: `alpha = 1 + U(contrast_limit)`,
/// `beta = 255 * U(brightness_limit)`, each byte `x` becoming `x * alpha + beta` in float32,
/// clipped to `[0, 255]` and truncated.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuBrightnessContrast {
    /// The brightness shift's range, as a fraction of 255. Default `[-0.2, 0.2]`.
    #[serde(default = "fifth")]
    pub brightness_limit: [f64; 2],
    /// The contrast factor's range, less 1. Default `[-0.2, 0.2]`.
    #[serde(default = "fifth")]
    pub contrast_limit: [f64; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn fifth() -> [f64; 2] {
    [-0.2, 0.2]
}

impl OpSpec for AlbuBrightnessContrast {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_brightness_contrast")?;
        ranges(
            "albu_brightness_contrast",
            &[
                ("brightness_limit", self.brightness_limit),
                ("contrast_limit", self.contrast_limit),
            ],
        )
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            let [c0, c1] = self.contrast_limit;
            let [b0, b1] = self.brightness_limit;
            let alpha = 1.0 + rng.uniform_in(c0, c1);
            let beta = rng.uniform_in(b0, b1) * 255.0;
            out.push(PixelOp::MultiplyAdd { alpha, beta });
        }
    }
}

/// albumentations' `HueSaturationValue(hue_shift_limit, sat_shift_limit, val_shift_limit,
/// p)`: each shift drawn uniform in its range, applied in OpenCV's byte HSV (see the module).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuHueSaturationValue {
    /// Hue shift range, in OpenCV's hue units (180 a turn). Default `[-20, 20]`.
    #[serde(default = "twenty")]
    pub hue_shift_limit: [f64; 2],
    /// Saturation shift range, in levels. Default `[-30, 30]`.
    #[serde(default = "thirty")]
    pub sat_shift_limit: [f64; 2],
    /// Value shift range, in levels. Default `[-20, 20]`.
    #[serde(default = "twenty")]
    pub val_shift_limit: [f64; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn twenty() -> [f64; 2] {
    [-20.0, 20.0]
}

fn thirty() -> [f64; 2] {
    [-30.0, 30.0]
}

impl OpSpec for AlbuHueSaturationValue {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_hue_saturation_value")?;
        ranges(
            "albu_hue_saturation_value",
            &[
                ("hue_shift_limit", self.hue_shift_limit),
                ("sat_shift_limit", self.sat_shift_limit),
                ("val_shift_limit", self.val_shift_limit),
            ],
        )
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if coin(rng, self.p) {
            let mut shift = |[lo, hi]: [f64; 2]| rng.uniform_in(lo, hi);
            let hue = shift(self.hue_shift_limit);
            let sat = shift(self.sat_shift_limit);
            let val = shift(self.val_shift_limit);
            // albumentations returns the image untouched when no shift is drawn.
            if hue != 0.0 || sat != 0.0 || val != 0.0 {
                out.push(PixelOp::HsvShift { hue, sat, val });
            }
        }
    }
}

/// Every range `[lo, hi]` finite and ordered.
fn ranges(op: &str, named: &[(&str, [f64; 2])]) -> Result<(), PipelineError> {
    for (name, [lo, hi]) in named {
        if !(lo.is_finite() && hi.is_finite() && lo <= hi) {
            return Err(PipelineError::Parameter(format!(
                "{op} {name} [{lo}, {hi}] must be finite with min <= max"
            )));
        }
    }
    Ok(())
}

/// albumentations' `CoarseDropout(num_holes_range, hole_height_range, hole_width_range, fill,
/// p)` with a constant fill: `randint(num_holes_range)` holes, each of a height drawn as
/// `int(H * U(hole_height_range))` (fractions) or `randint(lo, min(hi, H))` (pixels, when the
/// range's top is 1 or more), a width likewise, and a top-left corner uniform over the places
/// it fits. Erased in the written output, as `random_erasing`'s boxes.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CoarseDropout {
    /// Fewest and most holes. Default `[1, 2]`.
    #[serde(default = "one_two")]
    pub num_holes_range: [u32; 2],
    /// Hole height range: fractions of the height, or pixels when its top is 1 or more.
    /// Default `[0.1, 0.2]`.
    #[serde(default = "tenth_fifth")]
    pub hole_height_range: [f64; 2],
    /// Hole width range, read as `hole_height_range` says. Default `[0.1, 0.2]`.
    #[serde(default = "tenth_fifth")]
    pub hole_width_range: [f64; 2],
    /// The holes' value per channel, in the output's units (after normalize). Default 0.
    #[serde(default)]
    pub fill: [f32; 3],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn one_two() -> [u32; 2] {
    [1, 2]
}

fn tenth_fifth() -> [f64; 2] {
    [0.1, 0.2]
}

impl OpSpec for CoarseDropout {
    fn kind(&self) -> OpKind {
        OpKind::Erase
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "coarse_dropout")?;
        let [n0, n1] = self.num_holes_range;
        if !(1 <= n0 && n0 <= n1) {
            return Err(PipelineError::Parameter(format!(
                "coarse_dropout num_holes_range [{n0}, {n1}] must satisfy 1 <= min <= max"
            )));
        }
        ranges(
            "coarse_dropout",
            &[
                ("hole_height_range", self.hole_height_range),
                ("hole_width_range", self.hole_width_range),
            ],
        )?;
        if self.hole_height_range[0] < 0.0 || self.hole_width_range[0] < 0.0 {
            return Err(PipelineError::Parameter(
                "coarse_dropout hole sizes must not be negative".into(),
            ));
        }
        Ok(())
    }
    /// Erasing: the plan draws the holes at the output ([`CoarseDropout::draw_boxes`]).
    fn draw(&self, _: &mut CounterRng, _: (u32, u32), _: &mut Vec<PixelOp>) {}
}

impl CoarseDropout {
    /// Draws this step's holes for an `h`x`w` output into `out`.
    pub(crate) fn draw_boxes(&self, rng: &mut CounterRng, h: u32, w: u32, out: &mut Vec<EraseBox>) {
        if !coin(rng, self.p) {
            return;
        }
        let [n0, n1] = self.num_holes_range;
        let count = n0 + rng.below(u64::from(n1 - n0) + 1) as u32;
        // albumentations reads both ranges as pixels when the height range's top is 1 or more.
        let pixels = self.hole_height_range[1] >= 1.0;
        let mut side = |range: [f64; 2], full: u32| -> u32 {
            if pixels {
                // `integers(int(lo), int(min(hi, full)) + 1)`.
                let lo = range[0] as u32;
                let hi = range[1].min(f64::from(full)) as u32;
                if hi < lo {
                    return lo.min(full);
                }
                lo + rng.below(u64::from(hi - lo) + 1) as u32
            } else {
                // `int(full * U(lo, hi))`.
                (f64::from(full) * rng.uniform_in(range[0], range[1])) as u32
            }
        };
        let sizes: Vec<(u32, u32)> = (0..count)
            .map(|_| {
                (
                    side(self.hole_height_range, h).min(h),
                    side(self.hole_width_range, w).min(w),
                )
            })
            .collect();
        for (bh, bw) in sizes {
            let top = rng.below(u64::from(h - bh) + 1) as u32;
            let left = rng.below(u64::from(w - bw) + 1) as u32;
            out.push(EraseBox {
                top,
                left,
                height: bh,
                width: bw,
                value: self.fill,
                noise: None,
            });
        }
    }
}

/// `image.transpose(1, 0, 2)` of an `n`x`n` RGB8 image, in place.
pub(crate) fn transpose(rgb: &mut [u8], n: usize) {
    for y in 0..n {
        for x in y + 1..n {
            for c in 0..3 {
                rgb.swap((y * n + x) * 3 + c, (x * n + y) * 3 + c);
            }
        }
    }
}

/// albucore's `multiply_add` of a uint8 image: the lookup table `clip(arange(256, float32) *
/// float32(alpha) + float32(beta), 0, 255)` truncated to bytes.
pub(crate) fn multiply_add(rgb: &mut [u8], alpha: f64, beta: f64) {
    let (a, b) = (alpha as f32, beta as f32);
    let lut: [u8; 256] = std::array::from_fn(|v| (v as f32 * a + b).clamp(0.0, 255.0) as u8);
    for x in rgb.iter_mut() {
        *x = lut[*x as usize];
    }
}

/// OpenCV's `(255 << 12) / v` and `(180 << 12) / (6 * d)` tables of its byte RGB to HSV,
/// rounded as `saturate_cast<int>` rounds (half to even).
struct HsvTables {
    sdiv: [i32; 256],
    hdiv: [i32; 256],
}

fn hsv_tables() -> &'static HsvTables {
    static TABLES: std::sync::OnceLock<HsvTables> = std::sync::OnceLock::new();
    TABLES.get_or_init(|| {
        let mut t = HsvTables {
            sdiv: [0; 256],
            hdiv: [0; 256],
        };
        for i in 1..256 {
            t.sdiv[i] = (f64::from(255 << HSV_SHIFT) / i as f64).round_ties_even() as i32;
            t.hdiv[i] = (f64::from(180 << HSV_SHIFT) / (6.0 * i as f64)).round_ties_even() as i32;
        }
        t
    })
}

const HSV_SHIFT: u32 = 12;

/// OpenCV's `COLOR_RGB2HSV` of one 8-bit pixel: `(h in [0, 180), s, v)`.
fn rgb_to_hsv(t: &HsvTables, [r, g, b]: [u8; 3]) -> [u8; 3] {
    let (r, g, b) = (i32::from(r), i32::from(g), i32::from(b));
    let v = r.max(g).max(b);
    let diff = v - r.min(g).min(b);
    let round = 1 << (HSV_SHIFT - 1);
    let s = (diff * t.sdiv[v as usize] + round) >> HSV_SHIFT;
    let h = if v == r {
        g - b
    } else if v == g {
        b - r + 2 * diff
    } else {
        r - g + 4 * diff
    };
    let mut h = (h * t.hdiv[diff as usize] + round) >> HSV_SHIFT;
    if h < 0 {
        h += 180;
    }
    [h as u8, s as u8, v as u8]
}

/// The pixels of each row that OpenCV's vector `COLOR_HSV2RGB` takes (blocks of 32); the
/// rest of the row goes through its scalar code.
const HSV_BLOCK: usize = 32;

/// The float32 RGB (in `[0, 1]`) of an HSV byte pixel as OpenCV's AVX2 kernel computes it.
#[inline(always)]
fn hsv_to_rgb_vector(hsv: [u8; 3]) -> [f32; 3] {
    let hscale = 6.0f32 / 180.0;
    let inv = 1.0f32 / 255.0;
    let (s, v) = (f32::from(hsv[1]) * inv, f32::from(hsv[2]) * inv);
    let scaled = f32::from(hsv[0]) * hscale;
    let pre = scaled.trunc();
    let h = scaled - pre;
    let sector = (pre - (pre * (1.0 / 6.0)).trunc() * 6.0) as usize;
    sectors(sector, h, s, v)
}

/// The same from OpenCV's scalar code (`HSV2RGB_native`), for the pixels after a row's last
/// block.
#[inline(always)]
fn hsv_to_rgb_scalar(hsv: [u8; 3]) -> [f32; 3] {
    let inv = 1.0f32 / 255.0;
    let (s, v) = (f32::from(hsv[1]) * inv, f32::from(hsv[2]) * inv);
    if s == 0.0 {
        return [v; 3];
    }
    let scaled = (f32::from(hsv[0]) * (6.0f32 / 180.0)) % 6.0;
    let floor = scaled.floor();
    let (sector, h) = if (0.0..6.0).contains(&floor) {
        (floor as usize, scaled - floor)
    } else {
        (0, 0.0)
    };
    sectors(sector, h, s, v)
}

/// `(r, g, b)` from the four values OpenCV's HSV to RGB picks among by sector (its
/// `sector_data`), the two products with `h` fused as its AVX2 build fuses them.
#[inline(always)]
fn sectors(sector: usize, h: f32, s: f32, v: f32) -> [f32; 3] {
    let tab = [
        v,
        v * (1.0 - s),
        v * (-s).mul_add(h, 1.0),
        v * (-s).mul_add(1.0 - h, 1.0),
    ];
    // (b, g, r) indices per sector.
    const SECTOR: [[usize; 3]; 6] = [
        [1, 3, 0],
        [1, 0, 2],
        [3, 0, 1],
        [0, 2, 1],
        [0, 1, 3],
        [2, 1, 0],
    ];
    let [b, g, r] = SECTOR[sector % 6];
    [tab[r], tab[g], tab[b]]
}

/// albumentations' `shift_hsv` of an `h`x`w` RGB8 image (see the module): `hue` added modulo
/// 180 (then truncated), `sat` and `val` truncated to whole levels and added with
/// saturation, pixels without saturation kept so.
pub(crate) fn hsv_shift(rgb: &mut [u8], w: usize, hue: f64, sat: f64, val: f64) {
    let tables = hsv_tables();
    // numpy's `mod(arange(256) + hue, 180)` (fmod, then + 180 when negative), as uint8.
    let hue_lut: [u8; 256] = std::array::from_fn(|x| {
        if hue == 0.0 {
            return x as u8;
        }
        let mut m = (x as f64 + hue) % 180.0;
        if m < 0.0 {
            m += 180.0;
        }
        m as u8
    });
    // albucore's `add_constant` of a uint8 channel: `int(shift)` added, clipped.
    let add = |shift: f64| -> [u8; 256] {
        let k = shift.trunc() as i32;
        std::array::from_fn(|x| (x as i32 + k).clamp(0, 255) as u8)
    };
    let (sat_lut, val_lut) = (add(sat), add(val));
    let vector = w - w % HSV_BLOCK;
    for row in rgb.chunks_exact_mut(w * 3) {
        for (x, px) in row.chunks_exact_mut(3).enumerate() {
            let [h0, s0, v0] = rgb_to_hsv(tables, [px[0], px[1], px[2]]);
            let s1 = if s0 == 0 { 0 } else { sat_lut[s0 as usize] };
            let hsv = [hue_lut[h0 as usize], s1, val_lut[v0 as usize]];
            if x < vector {
                let f = hsv_to_rgb_vector(hsv);
                for c in 0..3 {
                    // `v_trunc` of x * 255, then packed with unsigned saturation.
                    px[c] = (f[c] * 255.0).trunc().clamp(0.0, 255.0) as u8;
                }
            } else {
                let f = hsv_to_rgb_scalar(hsv);
                for c in 0..3 {
                    // `saturate_cast<uchar>`: rounded half to even.
                    px[c] = (f[c] * 255.0).round_ties_even().clamp(0.0, 255.0) as u8;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// albumentations' own bytes for the fixture's cases (`tests/fixtures/albu`).
    #[test]
    fn albu_ops_give_albumentations_bytes() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/albu");
        let read = |name: &str| std::fs::read(dir.join(name)).unwrap();
        let cases: serde_json::Value = serde_json::from_slice(&read("cases.json")).unwrap();
        let (src, expected) = (read("src.rgb"), read("expected.rgb"));
        let dim = |k: &str| cases[k].as_u64().unwrap() as usize;
        let (w, h) = (dim("width"), dim("height"));
        let all = cases["cases"].as_array().unwrap();
        assert_eq!(all.len(), 15);
        let mut scratch = Vec::new();
        for case in all {
            let p: Vec<f64> = case["params"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| v.as_f64().unwrap())
                .collect();
            let start = case["offset"].as_u64().unwrap() as usize;
            let want = &expected[start..start + case["len"].as_u64().unwrap() as usize];
            // The square cases take the image's first `h` columns.
            let square: Vec<u8> = src
                .chunks(w * 3)
                .flat_map(|row| &row[..h * 3])
                .copied()
                .collect();
            let mut got = src.clone();
            match case["op"].as_str().unwrap() {
                "hsv" => hsv_shift(&mut got, w, p[0], p[1], p[2]),
                "hsv_fused" => {
                    got = read("fused.rgb");
                    hsv_shift(&mut got, 64, p[0], p[1], p[2]);
                }
                "multiply_add" => multiply_add(&mut got, p[0], p[1]),
                "transpose" => {
                    got = square;
                    transpose(&mut got, h);
                }
                "rot90" => {
                    got = square;
                    super::super::geometry::rot90_in_place(&mut got, h, p[0] as u32, &mut scratch);
                }
                other => panic!("unknown case {other}"),
            }
            let wrong = got.iter().zip(want).filter(|(a, b)| a != b).count();
            assert_eq!(wrong, 0, "{case}: {wrong} bytes differ");
        }
    }

    /// Every RGB colour through `shift_hsv` under three shifts, against albumentations' bytes
    /// written by `tests/fixtures/albu/make_fixture.py --exhaustive DIR` (150 MB, not kept):
    /// `HPULOAD_HSV_TABLES=DIR cargo test --release -- --ignored`.
    #[test]
    #[ignore = "needs the exhaustive tables written by make_fixture.py --exhaustive"]
    fn hsv_shift_gives_albumentations_bytes_for_every_colour() {
        let dir = std::path::PathBuf::from(std::env::var("HPULOAD_HSV_TABLES").unwrap());
        let every: Vec<u8> = (0u32..1 << 24)
            .flat_map(|c| [(c >> 16) as u8, (c >> 8) as u8, c as u8])
            .collect();
        let shifts = [(7.3, 12.6, -3.4), (-150.2, -40.0, 60.0), (0.2, 0.0, 0.0)];
        for (k, (hue, sat, val)) in shifts.into_iter().enumerate() {
            let want = std::fs::read(dir.join(format!("shift{k}.rgb"))).unwrap();
            let mut got = every.clone();
            hsv_shift(&mut got, 256, hue, sat, val);
            let wrong = got
                .chunks(3)
                .zip(want.chunks(3))
                .filter(|(a, b)| a != b)
                .count();
            assert_eq!(wrong, 0, "shift {k}: {wrong} colours differ");
        }
        let want = std::fs::read(dir.join("narrow.rgb")).unwrap();
        let mut got = every[..want.len()].to_vec();
        hsv_shift(&mut got, 250, 7.3, 12.6, -3.4);
        let wrong = got
            .chunks(3)
            .zip(want.chunks(3))
            .filter(|(a, b)| a != b)
            .count();
        assert_eq!(wrong, 0, "250 wide: {wrong} colours differ");
    }

    #[test]
    fn transpose_swaps_rows_and_columns() {
        // 2x2: (0,0)=1 (0,1)=2 / (1,0)=3 (1,1)=4, each pixel's channels equal.
        let mut rgb: Vec<u8> = [1u8, 2, 3, 4].iter().flat_map(|&v| [v; 3]).collect();
        transpose(&mut rgb, 2);
        let got: Vec<u8> = rgb.chunks(3).map(|p| p[0]).collect();
        assert_eq!(got, [1, 3, 2, 4]);
    }

    #[test]
    fn multiply_add_truncates_and_clips_as_albucores_table() {
        let mut rgb = [0u8, 10, 100, 200, 255, 128];
        multiply_add(&mut rgb, 1.1, -12.75);
        // 10 * 1.1 - 12.75 < 0 -> 0; 100 * 1.1 - 12.75 = 97.25 -> 97; 200 -> 207.25 -> 207.
        assert_eq!(rgb, [0, 0, 97, 207, 255, 128]);
    }

    #[test]
    fn rgb_to_hsv_gives_opencvs_bytes_for_primaries_and_greys() {
        let t = hsv_tables();
        assert_eq!(rgb_to_hsv(t, [255, 0, 0]), [0, 255, 255]);
        assert_eq!(rgb_to_hsv(t, [0, 255, 0]), [60, 255, 255]);
        assert_eq!(rgb_to_hsv(t, [0, 0, 255]), [120, 255, 255]);
        assert_eq!(rgb_to_hsv(t, [77, 77, 77]), [0, 0, 77]);
    }

    #[test]
    fn coarse_dropout_draws_holes_inside_the_image_in_the_ranges() {
        let spec = CoarseDropout {
            num_holes_range: [2, 4],
            hole_height_range: [0.1, 0.3],
            hole_width_range: [0.2, 0.25],
            fill: [0.5; 3],
            p: 1.0,
        };
        let mut counts = [0usize; 5];
        for i in 0..400 {
            let mut rng = CounterRng::for_op(3, 0, i, 0);
            let mut boxes = Vec::new();
            spec.draw_boxes(&mut rng, 100, 50, &mut boxes);
            counts[boxes.len()] += 1;
            for b in &boxes {
                assert!((10..30).contains(&b.height), "{b:?}");
                assert!((10..=12).contains(&b.width), "{b:?}");
                assert!(b.top + b.height <= 100 && b.left + b.width <= 50, "{b:?}");
            }
        }
        assert_eq!(counts[0] + counts[1], 0);
        assert!(counts[2..].iter().all(|&c| c > 100), "{counts:?}");
    }

    #[test]
    fn coarse_dropout_reads_sizes_as_pixels_when_the_range_reaches_one() {
        let spec = CoarseDropout {
            num_holes_range: [1, 1],
            hole_height_range: [3.0, 5.0],
            hole_width_range: [2.0, 90.0],
            fill: [0.0; 3],
            p: 1.0,
        };
        for i in 0..200 {
            let mut rng = CounterRng::for_op(1, 0, i, 0);
            let mut boxes = Vec::new();
            spec.draw_boxes(&mut rng, 40, 30, &mut boxes);
            let b = boxes[0];
            assert!(
                (3..=5).contains(&b.height) && (2..=30).contains(&b.width),
                "{b:?}"
            );
        }
    }
}
