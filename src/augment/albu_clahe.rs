//! albumentations' `CLAHE(clip_limit, tile_grid_size, p)` of a uint8 RGB image: a clip limit
//! drawn uniform in its range, then the image through OpenCV's 8-bit RGB-to-Lab conversion,
//! OpenCV's contrast-limited adaptive histogram equalization of the L plane, and OpenCV's
//! 8-bit Lab-to-RGB conversion, the a and b planes kept as they were. Each step to the bit:
//!
//! - **Lab.** OpenCV's 8-bit conversions are integer arithmetic over tables it builds once
//!   with its own software floating point: the sRGB gamma (256 entries, 3 fractional bits),
//!   its inverse (4096 entries), the Lab cube root (3072 entries, 15 fractional bits: the
//!   cube root is Ken Turkowski's rational approximation in f64 whose mantissa is *truncated*
//!   to f32, not rounded), L to Y and f(Y), and f(X), f(Z) back to X and Z. The tables are
//!   built here with the same operations in the same precisions (f32 where OpenCV uses
//!   `softfloat`, f64 where `softdouble`, a fused multiply-add where `mulAdd`, ties rounded to
//!   even), and the per-pixel arithmetic is OpenCV's fixed point. Checked against
//!   `cv2.cvtColor` over all 2^24 colours both ways (BENCHMARKS.md, session 77).
//! - **CLAHE.** The L plane is cut into `tile_grid_size` tiles (an image whose sides are not
//!   both whole multiples of the grid is first extended at its bottom and right by
//!   `tiles - side % tiles`, mirrored without repeating the edge, as `copyMakeBorder`'s
//!   `BORDER_REFLECT_101`); each tile's histogram is clipped at `int(clip * area / 256)`
//!   (at least 1), the excess spread evenly and its remainder one each at a stride, and its
//!   running sum scaled by `255 / area` (f32, rounded) is the tile's table; each pixel is
//!   its value through the four nearest tiles' tables, weighed bilinearly in f32 in
//!   OpenCV's order, rounded half to even.

use std::sync::OnceLock;

use serde::{Deserialize, Serialize};

use super::albu::ranges;
use super::error::PipelineError;
use super::pixel::PixelOp;
use super::spec::{coin, half, probability, OpKind, OpSpec};
use crate::rng::CounterRng;
#[cfg(test)]
use crate::rng::Stream;

/// albumentations' `CLAHE(clip_limit, tile_grid_size, p)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlbuClahe {
    /// The clip limit's range, each at least 1 (albumentations' `clip_limit=4.0` is
    /// `[1.0, 4.0]`). Default `[1.0, 4.0]`.
    #[serde(default = "one_to_four")]
    pub clip_limit: [f64; 2],
    /// The grid: tiles across, tiles down (OpenCV's `tileGridSize` as a width and a height).
    /// Default `[8, 8]`.
    #[serde(default = "eight_by_eight")]
    pub tile_grid_size: [u16; 2],
    /// Probability. Default 0.5.
    #[serde(default = "half")]
    pub p: f64,
}

fn one_to_four() -> [f64; 2] {
    [1.0, 4.0]
}

fn eight_by_eight() -> [u16; 2] {
    [8, 8]
}

impl OpSpec for AlbuClahe {
    fn kind(&self) -> OpKind {
        OpKind::Pixel
    }
    fn check(&self) -> Result<(), PipelineError> {
        probability(self.p, "albu_clahe")?;
        ranges("albu_clahe", &[("clip_limit", self.clip_limit)])?;
        if self.clip_limit[0] < 1.0 {
            return Err(PipelineError::Parameter(format!(
                "albu_clahe clip_limit {:?} must be at least 1",
                self.clip_limit
            )));
        }
        if self.tile_grid_size.contains(&0) {
            return Err(PipelineError::Parameter(format!(
                "albu_clahe tile_grid_size {:?} must be at least one tile each way",
                self.tile_grid_size
            )));
        }
        Ok(())
    }
    fn draw(&self, rng: &mut CounterRng, _: (u32, u32), out: &mut Vec<PixelOp>) {
        if !coin(rng, self.p) {
            return;
        }
        let [lo, hi] = self.clip_limit;
        out.push(PixelOp::Clahe {
            clip_limit: rng.uniform_in(lo, hi),
            tiles: self.tile_grid_size,
        });
    }
}

/// What the op keeps between images.
#[derive(Default)]
pub struct ClaheScratch {
    /// The L plane, equalized in place.
    plane: Vec<u8>,
    equalize: EqualizeScratch,
}

/// What `equalize` keeps between planes.
#[derive(Default)]
struct EqualizeScratch {
    /// Each tile's table, 256 entries a tile, row by row.
    tables: Vec<u8>,
    /// For each row and column of the extended plane, the plane's row or column it mirrors.
    rows: Vec<usize>,
    cols: Vec<usize>,
    /// For each column of the plane, its two tiles and their weights.
    columns: Vec<(usize, usize, f32, f32)>,
}

/// albumentations' `clahe` of the `h`x`w` RGB8 image, in place: L of OpenCV's Lab equalized
/// with `clip_limit` over `tiles` (across, down).
pub fn clahe(
    rgb: &mut [u8],
    h: usize,
    w: usize,
    clip_limit: f64,
    tiles: [u16; 2],
    s: &mut ClaheScratch,
) {
    if h == 0 || w == 0 {
        return;
    }
    let t = tables();
    s.plane.clear();
    s.plane.reserve(h * w);
    for px in rgb.chunks_exact_mut(3) {
        let lab = t.rgb_to_lab([px[0], px[1], px[2]]);
        px.copy_from_slice(&lab);
        s.plane.push(lab[0]);
    }
    equalize(&mut s.plane, h, w, clip_limit, tiles, &mut s.equalize);
    for (px, &l) in rgb.chunks_exact_mut(3).zip(&s.plane) {
        px.copy_from_slice(&t.lab_to_rgb([l, px[1], px[2]]));
    }
}

/// OpenCV's `CLAHE::apply` of the `h`x`w` plane, in place.
fn equalize(
    plane: &mut [u8],
    h: usize,
    w: usize,
    clip_limit: f64,
    tiles: [u16; 2],
    scratch: &mut EqualizeScratch,
) {
    let EqualizeScratch {
        tables,
        rows,
        cols,
        columns,
    } = scratch;
    let (nx, ny) = (usize::from(tiles[0]), usize::from(tiles[1]));
    // OpenCV extends both sides unless both divide.
    let (ext_h, ext_w) = if h.is_multiple_of(ny) && w.is_multiple_of(nx) {
        (h, w)
    } else {
        (h + ny - h % ny, w + nx - w % nx)
    };
    rows.clear();
    rows.extend((0..ext_h).map(|i| reflect101(i, h)));
    cols.clear();
    cols.extend((0..ext_w).map(|i| reflect101(i, w)));
    let (th, tw) = (ext_h / ny, ext_w / nx);
    let area = th * tw;
    let scale = 255.0f32 / area as f32;
    // OpenCV: `int(clipLimit * tileSizeTotal / histSize)`, at least 1.
    let limit = ((clip_limit * area as f64 / 256.0) as u32).max(1);
    tables.clear();
    tables.resize(nx * ny * 256, 0);
    for ty in 0..ny {
        for tx in 0..nx {
            let mut hist = [0u32; 256];
            for &r in &rows[ty * th..(ty + 1) * th] {
                let row = &plane[r * w..(r + 1) * w];
                for &c in &cols[tx * tw..(tx + 1) * tw] {
                    hist[usize::from(row[c])] += 1;
                }
            }
            let mut clipped = 0;
            for v in &mut hist {
                if *v > limit {
                    clipped += *v - limit;
                    *v = limit;
                }
            }
            let batch = clipped / 256;
            let mut residual = clipped - batch * 256;
            for v in &mut hist {
                *v += batch;
            }
            if residual > 0 {
                let step = (256 / residual as usize).max(1);
                let mut i = 0;
                while i < 256 && residual > 0 {
                    hist[i] += 1;
                    i += step;
                    residual -= 1;
                }
            }
            let table = &mut tables[(ty * nx + tx) * 256..][..256];
            let mut sum = 0u32;
            for (out, &v) in table.iter_mut().zip(&hist) {
                sum += v;
                *out = round_u8(sum as f32 * scale);
            }
        }
    }
    // Each column's two tiles and weights, as OpenCV computes them once per image.
    let inv_tw = 1.0f32 / tw as f32;
    let inv_th = 1.0f32 / th as f32;
    columns.clear();
    columns.extend((0..w).map(|x| {
        let txf = x as f32 * inv_tw - 0.5;
        let tx1 = txf.floor();
        let xa = txf - tx1;
        let tx1 = tx1 as isize;
        let tx2 = (tx1 + 1).min(nx as isize - 1) as usize;
        (tx1.max(0) as usize, tx2, xa, 1.0 - xa)
    }));
    for y in 0..h {
        let tyf = y as f32 * inv_th - 0.5;
        let ty1 = tyf.floor();
        let ya = tyf - ty1;
        let ya1 = 1.0 - ya;
        let ty1 = ty1 as isize;
        let ty2 = (ty1 + 1).min(ny as isize - 1) as usize;
        let ty1 = ty1.max(0) as usize;
        let top = &tables[ty1 * nx * 256..(ty1 + 1) * nx * 256];
        let bottom = &tables[ty2 * nx * 256..(ty2 + 1) * nx * 256];
        for (v, &(tx1, tx2, xa, xa1)) in plane[y * w..(y + 1) * w].iter_mut().zip(columns.iter()) {
            let (i1, i2) = (tx1 * 256 + usize::from(*v), tx2 * 256 + usize::from(*v));
            let up = f32::from(top[i1]) * xa1 + f32::from(top[i2]) * xa;
            let down = f32::from(bottom[i1]) * xa1 + f32::from(bottom[i2]) * xa;
            *v = round_u8(up * ya1 + down * ya);
        }
    }
}

/// OpenCV's `saturate_cast<uchar>(float)`: rounded half to even, clamped.
fn round_u8(v: f32) -> u8 {
    v.round_ties_even().clamp(0.0, 255.0) as u8
}

/// OpenCV's `borderInterpolate` for `BORDER_REFLECT_101` (`gfedcb|abcdefgh|gfedcba`).
fn reflect101(i: usize, len: usize) -> usize {
    if len == 1 {
        return 0;
    }
    let mut p = i as isize;
    let n = len as isize;
    while p < 0 || p >= n {
        p = if p < 0 { -p } else { 2 * (n - 1) - p };
    }
    p as usize
}

/// OpenCV's 8-bit Lab tables.
struct LabTables {
    /// sRGB byte to linear, 3 fractional bits (`sRGBGammaTab_b`).
    gamma: [u16; 256],
    /// Linear (12 bits) to an sRGB byte (`sRGBInvGammaTab_b`).
    inv_gamma: Vec<u16>,
    /// f(t) of Lab, 15 fractional bits, for t in 1/2040 steps (`LabCbrtTab_b`).
    cbrt: Vec<u16>,
    /// L byte to Y and f(Y), 14 fractional bits (`LabToYF_b`).
    l_to_yf: [[i32; 2]; 256],
    /// f(X) or f(Z) (14 fractional bits, from [`AB_MIN`]) back to X or Z (`abToXZ_b`).
    ab_to_xz: Vec<i32>,
}

/// The smallest f(X) or f(Z) the inverse conversion can meet.
const AB_MIN: i32 = -8145;

/// sRGB to XYZ divided by D65's white, times 2^12 and rounded (from OpenCV's `softdouble`
/// matrix and white point), rows X, Y, Z over R, G, B.
const RGB_TO_XYZ: [i32; 9] = [1777, 1541, 778, 871, 2929, 296, 73, 448, 3575];
/// XYZ to sRGB times D65's white, times 2^12 and rounded, rows R, G, B over X, Y, Z.
const XYZ_TO_RGB: [i32; 9] = [12615, -6296, -2223, -3773, 7684, 185, 217, -836, 4715];

fn tables() -> &'static LabTables {
    static TABLES: OnceLock<LabTables> = OnceLock::new();
    TABLES.get_or_init(LabTables::build)
}

/// OpenCV's `CV_DESCALE`: `x / 2^n` rounded half up.
fn descale(x: i32, n: u32) -> i32 {
    (x + (1 << (n - 1))) >> n
}

impl LabTables {
    fn build() -> Self {
        const BASE: i32 = 1 << 14;
        let round = |v: f32| v.round_ties_even() as i32;
        let gamma = std::array::from_fn(|i| {
            let x = f64::from(i as f32 / 255.0);
            let linear = if x <= 809.0 / 20000.0 {
                x / (323.0 / 25.0)
            } else {
                ((x + 11.0 / 200.0) / (1.0 + 11.0 / 200.0)).powf(12.0 / 5.0)
            };
            round(2040.0 * linear as f32) as u16
        });
        let inv_gamma = (0..4096)
            .map(|i| {
                let x = f64::from((1.0f32 / 4096.0) * i as f32);
                let srgb = if x <= 7827.0 / 2_500_000.0 {
                    x * (323.0 / 25.0)
                } else {
                    x.powf(1.0 / (12.0 / 5.0)) * (1.0 + 11.0 / 200.0) - 11.0 / 200.0
                };
                round(255.0 * srgb as f32) as u16
            })
            .collect();
        let (threshold, slope, bias) = (216.0f32 / 24389.0, 841.0f32 / 108.0, 16.0f32 / 116.0);
        let step = 1.0f32 / (255.0 * 8.0);
        let cbrt = (0..3072)
            .map(|i| {
                let t = step * i as f32;
                let f = if t < threshold {
                    t.mul_add(slope, bias)
                } else {
                    turkowski_cbrt(t)
                };
                round(32768.0 * f) as u16
            })
            .collect();
        let l_to_yf = std::array::from_fn(|i| {
            let i = i as i32;
            if i <= 20 {
                let y = round((i * BASE * 20 * 9) as f32 / (17 * 29 * 29 * 29) as f32);
                let fy = BASE as f32 * (16.0f32 / 116.0 + (i * 5) as f32 / (3 * 17 * 29) as f32);
                [y, round(fy)]
            } else {
                let fy = (i * 100 * BASE) as f32 / (255 * 116) as f32 + (16 * BASE) as f32 / 116.0;
                [round(fy * fy * fy / (BASE * BASE) as f32), round(fy)]
            }
        });
        let ab_to_xz = (AB_MIN..BASE * 9 / 4 + AB_MIN)
            .map(|i| {
                if i <= 3390 {
                    // Rust's division truncates toward zero, as C's.
                    i * 108 / 841 - BASE * 16 / 116 * 108 / 841
                } else {
                    i * i / BASE * i / BASE
                }
            })
            .collect();
        Self {
            gamma,
            inv_gamma,
            cbrt,
            l_to_yf,
            ab_to_xz,
        }
    }

    /// `cv2.cvtColor(COLOR_RGB2LAB)` of one 8-bit pixel.
    fn rgb_to_lab(&self, [r, g, b]: [u8; 3]) -> [u8; 3] {
        let c = &RGB_TO_XYZ;
        let [r, g, b] = [r, g, b].map(|v| i32::from(self.gamma[usize::from(v)]));
        let f = |k: usize| {
            i32::from(self.cbrt[descale(r * c[k] + g * c[k + 1] + b * c[k + 2], 12) as usize])
        };
        let (fx, fy, fz) = (f(0), f(3), f(6));
        // L: (116 * 255 + 50) / 100 and -((16 * 255 * 2^15 + 50) / 100) in integers.
        let l = descale(296 * fy - 1_336_934, 15);
        let a = descale(500 * (fx - fy) + (128 << 15), 15);
        let b = descale(200 * (fy - fz) + (128 << 15), 15);
        [l, a, b].map(|v| v.clamp(0, 255) as u8)
    }

    /// `cv2.cvtColor(COLOR_LAB2RGB)` of one 8-bit pixel.
    fn lab_to_rgb(&self, [l, a, b]: [u8; 3]) -> [u8; 3] {
        let [y, fy] = self.l_to_yf[usize::from(l)];
        let (a, b) = (i32::from(a), i32::from(b));
        // a / 500 and b / 200 in 14 fractional bits, by OpenCV's multiply-shifts.
        let a_div = ((5 * a * 53687 + (1 << 7)) >> 13) - 128 * (1 << 14) / 500;
        let b_div = ((b * 41943 + (1 << 4)) >> 9) - 128 * (1 << 14) / 200 + 1;
        let x = self.ab_to_xz[(fy + a_div - AB_MIN) as usize];
        let z = self.ab_to_xz[(fy - b_div - AB_MIN) as usize];
        let c = &XYZ_TO_RGB;
        std::array::from_fn(|k| {
            let v = descale(c[3 * k] * x + c[3 * k + 1] * y + c[3 * k + 2] * z, 14);
            self.inv_gamma[v.clamp(0, 4095) as usize].min(255) as u8
        })
    }
}

/// OpenCV's `softfloat` cube root of a positive normal `t`: the mantissa scaled into
/// `[1/8, 1)`, Turkowski's quartic rational approximation in f64, and that result's mantissa
/// truncated to 23 bits under the root's exponent.
fn turkowski_cbrt(t: f32) -> f32 {
    let bits = t.to_bits();
    let exp = ((bits >> 23) & 0xff) as i32 - 127;
    let mut shift = exp % 3;
    if shift >= 0 {
        shift -= 3;
    }
    let root_exp = (exp - shift) / 3 - 1;
    let fr = f64::from_bits((((shift + 1023) as u64) << 52) | (u64::from(bits & 0x7f_ffff) << 29));
    // OpenCV's coefficients, bit for bit.
    let num = [
        0x4046_a09e_6653_ba70,
        0x4068_08f4_6c61_16e0,
        0x405d_ca97_439c_ae14,
        0x402a_dd70_d282_7500,
        0x3fc4_f15f_83f5_5d2d,
    ]
    .map(f64::from_bits);
    let den = [
        0x402d_9e20_660e_db21,
        0x4062_ff15_c028_5815,
        0x4065_10d0_6a81_12ce,
        0x4040_fecb_c9e2_c375,
        0x3ff0_0000_0000_0000,
    ]
    .map(f64::from_bits);
    let horner = |k: &[f64; 5]| k[1..].iter().fold(k[0], |acc, &c| acc * fr + c);
    let root = horner(&num) / horner(&den);
    let mantissa = ((root.to_bits() & ((1u64 << 52) - 1)) >> 29) as u32;
    f32::from_bits((((root_exp + 127) as u32) << 23) | mantissa)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sums of OpenCV's tables as a model of them computes them, one checked against
    /// `cv2.cvtColor` over every 24-bit colour both ways.
    #[test]
    fn the_lab_tables_are_opencvs() {
        let t = tables();
        let sum = |v: &mut dyn Iterator<Item = i64>| v.sum::<i64>();
        assert_eq!(sum(&mut t.gamma.iter().map(|&v| i64::from(v))), 162_416);
        assert_eq!(sum(&mut t.inv_gamma.iter().map(|&v| i64::from(v))), 720_284);
        assert_eq!(sum(&mut t.cbrt.iter().map(|&v| i64::from(v))), 86_529_539);
        assert_eq!(
            sum(&mut t.l_to_yf.iter().flatten().map(|&v| i64::from(v))),
            3_605_472
        );
        assert_eq!(
            sum(&mut t.ab_to_xz.iter().map(|&v| i64::from(v))),
            626_487_776
        );
        // The entry where a correctly rounded cube root would round the other way.
        assert_eq!(t.cbrt[324], 17745);
    }

    /// Writes both conversions of every 24-bit value (RGB to Lab, then Lab to RGB, 48 MiB
    /// each) to `$HPULOAD_LAB_DUMP`, to compare with `cv2.cvtColor` (BENCHMARKS.md, session 77).
    #[test]
    #[ignore = "writes 96 MiB for a comparison with OpenCV"]
    fn every_colour_converted_for_a_comparison_with_opencv() {
        let path = std::env::var("HPULOAD_LAB_DUMP").expect("HPULOAD_LAB_DUMP names the output");
        let t = tables();
        let mut out = Vec::with_capacity(6 << 24);
        for v in 0..1u32 << 24 {
            out.extend_from_slice(&t.rgb_to_lab([(v >> 16) as u8, (v >> 8) as u8, v as u8]));
        }
        for v in 0..1u32 << 24 {
            out.extend_from_slice(&t.lab_to_rgb([(v >> 16) as u8, (v >> 8) as u8, v as u8]));
        }
        std::fs::write(path, out).unwrap();
    }

    #[test]
    fn the_cube_root_truncates_its_mantissa() {
        for t in [0.001f32, 0.1, 0.5, 0.9, 1.0, 1.4] {
            let root = turkowski_cbrt(t);
            assert!((f64::from(root) - f64::from(t).cbrt()).abs() < 2e-7, "{t}");
        }
        // The table's entry 324, where the truncation decides its rounding.
        let t = (1.0f32 / 2040.0) * 324.0;
        assert!(turkowski_cbrt(t) < f64::from(t).cbrt() as f32);
    }

    /// Colours OpenCV 5.0's `cvtColor` gives (`COLOR_RGB2LAB` and back).
    #[test]
    fn pixels_convert_as_opencv_converts_them() {
        let t = tables();
        for (rgb, lab) in [
            ([0, 0, 0], [0, 128, 128]),
            ([255, 255, 255], [255, 128, 128]),
            ([255, 0, 0], [136, 208, 195]),
            ([0, 98, 254], [119, 165, 45]),
            ([12, 200, 77], [181, 61, 177]),
        ] {
            assert_eq!(t.rgb_to_lab(rgb), lab, "{rgb:?}");
        }
        for (lab, rgb) in [
            ([0, 128, 128], [0, 0, 0]),
            ([255, 128, 128], [255, 255, 255]),
            ([119, 165, 45], [0, 98, 253]),
            // Outside sRGB: clamped.
            ([70, 20, 230], [0, 87, 0]),
        ] {
            assert_eq!(t.lab_to_rgb(lab), rgb, "{lab:?}");
        }
    }

    #[test]
    fn the_border_mirrors_without_repeating_the_edge() {
        let got: Vec<usize> = (0..9).map(|i| reflect101(i, 5)).collect();
        assert_eq!(got, [0, 1, 2, 3, 4, 3, 2, 1, 0]);
        assert_eq!(reflect101(7, 1), 0);
        // Further than the plane is long: mirrored again, as OpenCV's loop does.
        assert_eq!(reflect101(5, 3), 1);
    }

    #[test]
    fn a_flat_plane_stays_flat_and_a_clip_of_one_keeps_it() {
        let (h, w) = (20, 36);
        let mut s = ClaheScratch::default();
        let mut plane = vec![90u8; h * w];
        equalize(&mut plane, h, w, 1.0, [8, 8], &mut s.equalize);
        assert!(plane.iter().all(|&v| v == plane[0]));
    }

    #[test]
    fn a_drawn_clip_limit_stays_in_its_range_and_p_decides() {
        let op = AlbuClahe {
            clip_limit: [2.0, 3.0],
            tile_grid_size: [4, 6],
            p: 0.5,
        };
        op.check().unwrap();
        let mut drawn = 0;
        for i in 0..400 {
            let mut rng = CounterRng::new(7, 0, i, Stream::Ops);
            let mut out = vec![];
            op.draw(&mut rng, (10, 10), &mut out);
            if let [PixelOp::Clahe { clip_limit, tiles }] = out[..] {
                assert!((2.0..3.0).contains(&clip_limit));
                assert_eq!(tiles, [4, 6]);
                drawn += 1;
            }
        }
        assert!((150..250).contains(&drawn), "{drawn}");
        let below_one = AlbuClahe {
            clip_limit: [0.5, 2.0],
            ..op
        };
        assert!(below_one.check().is_err());
    }
}
