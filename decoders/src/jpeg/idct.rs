//! Inverse DCTs that produce an `n`x`n` block (n = 8, 4, 2, 1) from the top-left `n`x`n`
//! coefficients of an 8x8 block: DCT-domain downscaling by 1, 1/2, 1/4 or 1/8.
//!
//! With JPEG's orthonormal 1-D scaling, the `n`-point inverse that keeps the block's mean is
//! `f(x) = sum_{u<n} C(u)/2 * F(u) * cos((2x+1) u pi / 2n)`, the 8-point formula with the
//! cosine's period shrunk; the 2-D transform is separable.

/// `T[n][x][u] = C(u)/2 * cos((2x+1) u pi / 2n)` for the four sizes.
pub(crate) struct Idct {
    t: [[[f32; 8]; 8]; 4],
}

fn size_index(n: usize) -> usize {
    match n {
        8 => 0,
        4 => 1,
        2 => 2,
        _ => 3,
    }
}

impl Idct {
    pub fn new() -> Self {
        let mut t = [[[0f32; 8]; 8]; 4];
        for n in [8usize, 4, 2, 1] {
            for x in 0..n {
                for u in 0..n {
                    let c = if u == 0 {
                        std::f64::consts::FRAC_1_SQRT_2
                    } else {
                        1.0
                    };
                    let v = 0.5
                        * c
                        * (((2 * x + 1) * u) as f64 * std::f64::consts::PI / (2 * n) as f64).cos();
                    t[size_index(n)][x][u] = v as f32;
                }
            }
        }
        Self { t }
    }

    /// Writes the `n`x`n` block for dequantized coefficients `coef` (natural order) into `out`
    /// at rows of `stride` bytes. `last` is the zigzag index of the last non-zero coefficient.
    #[inline]
    pub fn block(&self, coef: &[i32; 64], last: usize, n: usize, out: &mut [u8], stride: usize) {
        if last == 0 || n == 1 {
            let v = clamp(coef[0] as f32 / 8.0 + 128.0);
            for y in 0..n {
                out[y * stride..y * stride + n].fill(v);
            }
            return;
        }
        let t = &self.t[size_index(n)];
        // Pass 1 (columns): tmp[y][u] = sum_v T[y][v] * F[v][u], skipping all-zero rows of F.
        let mut tmp = [[0f32; 8]; 8];
        for v in 0..n {
            let row = &coef[v * 8..v * 8 + 8];
            if row[..n].iter().all(|&c| c == 0) {
                continue;
            }
            let f: [f32; 8] = std::array::from_fn(|u| row[u] as f32);
            for y in 0..n {
                let w = t[y][v];
                for u in 0..8 {
                    tmp[y][u] += w * f[u];
                }
            }
        }
        // Pass 2 (rows): out[y][x] = sum_u T[x][u] * tmp[y][u].
        for y in 0..n {
            let mut acc = [128f32; 8];
            for u in 0..n {
                let s = tmp[y][u];
                for x in 0..8 {
                    acc[x] += t[x][u] * s;
                }
            }
            let dst = &mut out[y * stride..y * stride + n];
            for x in 0..n {
                dst[x] = clamp(acc[x]);
            }
        }
    }
}

#[inline]
fn clamp(v: f32) -> u8 {
    (v + 0.5).clamp(0.0, 255.0) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dc_only_block_is_flat_at_every_scale() {
        let idct = Idct::new();
        let mut coef = [0i32; 64];
        coef[0] = 80; // mean 10 above mid-grey
        for n in [8, 4, 2, 1] {
            let mut out = [0u8; 64];
            idct.block(&coef, 0, n, &mut out, 8);
            assert!(
                (0..n).all(|y| out[y * 8..y * 8 + n].iter().all(|&v| v == 138)),
                "n={n}"
            );
        }
    }

    #[test]
    fn reduced_idct_keeps_the_block_mean() {
        let idct = Idct::new();
        let mut coef = [0i32; 64];
        coef[0] = -160;
        coef[1] = 50;
        coef[8] = -30;
        coef[9] = 12;
        let mut full = [0u8; 64];
        idct.block(&coef, 5, 8, &mut full, 8);
        let mean8 = full.iter().map(|&v| v as f64).sum::<f64>() / 64.0;
        for n in [4, 2] {
            let mut out = [0u8; 64];
            idct.block(&coef, 5, n, &mut out, 8);
            let mean = (0..n)
                .flat_map(|y| out[y * 8..y * 8 + n].to_vec())
                .map(f64::from)
                .sum::<f64>()
                / (n * n) as f64;
            assert!((mean - mean8).abs() < 1.0, "n={n}: {mean} vs {mean8}");
        }
    }
}
