//! torch's CPU arithmetic for small f32 vectors, to the bit: the exponential its vectorised
//! kernels use (`Vectorized<float>::exp`, SLEEF's 1-ulp `expf`), the sum of `Tensor.sum` and
//! the sum of `softmax`'s reduction, each in torch's order, and `torch.exp` itself (MKL's,
//! which only the process's own torch can give: `set_torch_exp`). torchvision builds its
//! Gaussian kernels from these, and a kernel one ulp off moves a blurred byte now and then.
//!
//! The orders are those of torch's x86-64 kernels as dispatched on a CPU with AVX2 or AVX-512
//! and FMA (every training host this project targets); they were checked value for value
//! against torch 2.x (`softmax` of 500 random Gaussian kernels, `sum` of vectors of 1 to 200
//! values, `exp` over [-20, 0]).

use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::OnceLock;

/// How many f32 lanes torch's `Vectorized<float>` has in the kernels the CPU dispatches to:
/// 16 under AVX-512 (torch's `AVX512` capability: F, BW, VL and DQ), otherwise 8 (AVX2, and
/// the generic build's 32-byte vectors). `ATEN_CPU_CAPABILITY=avx2` or `default` holds torch to
/// 8, as it does here.
pub(super) fn vector_lanes() -> usize {
    static LANES: OnceLock<usize> = OnceLock::new();
    *LANES.get_or_init(|| {
        let capped = std::env::var("ATEN_CPU_CAPABILITY")
            .map(|c| matches!(c.to_ascii_lowercase().as_str(), "avx2" | "default"))
            .unwrap_or(false);
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::is_x86_feature_detected as has;
            if !capped
                && has!("avx512f")
                && has!("avx512bw")
                && has!("avx512vl")
                && has!("avx512dq")
            {
                return 16;
            }
        }
        let _ = capped;
        8
    })
}

/// The signature of MKL's `vmsExp` (VML's f32 exponential of `n` values with an accuracy
/// mode): what `torch.exp` calls on a CPU tensor where torch is built with MKL (the x86-64
/// wheels), in mode `VML_HA | VML_FTZDAZ_OFF | VML_ERRMODE_IGNORE`.
pub type VmlExp = unsafe extern "C" fn(n: i32, a: *const f32, r: *mut f32, mode: i64);

/// The mode `torch.exp` passes: high accuracy (`VML_HA`), denormals kept
/// (`VML_FTZDAZ_OFF`), errors ignored (`VML_ERRMODE_IGNORE`).
const TORCH_VML_MODE: i64 = 0x2 | 0x14_0000 | 0x100;

/// The `vmsExp` of the process's torch, once the Python package has found it (null until
/// then, and for every program that is not the drop-in).
static TORCH_EXP: AtomicPtr<()> = AtomicPtr::new(std::ptr::null_mut());

/// Makes `torch_exp` call `f`, the process's own `torch.exp` arithmetic (MKL's `vmsExp` as
/// the loaded torch exports it), or the correctly rounded exponential again (`None`).
///
/// # Safety
/// `f` must behave as MKL's `vmsExp` (read `n` values at `a`, write `n` at `r`, nothing else,
/// callable from any thread) and stay loaded for the rest of the process.
pub unsafe fn set_torch_exp(f: Option<VmlExp>) {
    TORCH_EXP.store(
        f.map_or(std::ptr::null_mut(), |f| f as *mut ()),
        Ordering::Release,
    );
}

/// `torch.exp` of each value, in place: through the process's torch (`set_torch_exp`) where
/// the drop-in registered it, whose MKL rounds about one value in a hundred to the other side
/// of a half ulp from the true value; otherwise correctly rounded (every other exact
/// exponential agrees with it, and torch's does in all other values).
pub(super) fn torch_exp(values: &mut [f32]) {
    let f = TORCH_EXP.load(Ordering::Acquire);
    if !f.is_null() {
        if let Ok(n) = i32::try_from(values.len()) {
            // SAFETY: the pointer was stored by `set_torch_exp` from a `VmlExp`, which its
            // caller vouched for; a data pointer and a function pointer have one size here.
            let f = unsafe { std::mem::transmute::<*mut (), VmlExp>(f) };
            let input = values.to_vec();
            // SAFETY: `vmsExp` reads `n` values of `input` and writes `n` into `values`, both
            // that long and not overlapping; `set_torch_exp`'s contract makes it safe to call
            // from this thread.
            unsafe { f(n, input.as_ptr(), values.as_mut_ptr(), TORCH_VML_MODE) };
            return;
        }
    }
    for v in values.iter_mut() {
        *v = f64::from(*v).exp() as f32;
    }
}

/// `exp(d)` as torch's vectorised CPU kernels give it (SLEEF's `expf` to 1 ulp): `d` split as
/// `q ln 2 + s` (`q` the nearest integer to `d / ln 2`, `ln 2` in two parts), a degree-7
/// polynomial in `s` by fused multiply-adds, then `2^q` applied in two halves. Zero below
/// -104, infinity above 100.
pub(super) fn vector_expf(d: f32) -> f32 {
    // 1 / ln 2, and ln 2 as a high part exact in few bits plus the rest.
    const INV_LN2: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    const POLY: [f32; 6] = [
        0.000_198_527_62,
        0.001_393_043_6,
        0.008_333_361,
        0.041_666_485,
        0.166_666_67,
        0.5,
    ];
    if d < -104.0 {
        return 0.0;
    }
    if d > 100.0 {
        return f32::INFINITY;
    }
    let q = (d * INV_LN2).round_ties_even();
    let s = q.mul_add(-LN2_HI, d);
    let s = q.mul_add(-LN2_LO, s);
    let u = POLY[1..].iter().fold(POLY[0], |u, &c| u.mul_add(s, c));
    let u = 1.0 + (s * s).mul_add(u, s);
    let q = q as i32;
    let half = q >> 1;
    u * pow2(half) * pow2(q - half)
}

/// `2^e` for `e` in the normal exponent range.
fn pow2(e: i32) -> f32 {
    f32::from_bits(((e + 127) as u32) << 23)
}

/// The sum `softmax` divides by (`vec::reduce_all` over `lanes`-wide vectors): in order below
/// one vector's width; otherwise whole vectors lane by lane, the tail into the first lanes,
/// then the lanes folded in halves.
pub(super) fn softmax_sum(v: &[f32], lanes: usize) -> f32 {
    if v.len() < lanes {
        return v.iter().copied().reduce(|a, b| a + b).unwrap_or(0.0);
    }
    let mut acc = [0f32; 16];
    let acc = &mut acc[..lanes];
    acc.copy_from_slice(&v[..lanes]);
    for chunk in v[lanes..].chunks(lanes) {
        for (a, &x) in acc.iter_mut().zip(chunk) {
            *a += x;
        }
    }
    let mut step = lanes / 2;
    while step > 0 {
        let before: [f32; 16] = std::array::from_fn(|i| if i < lanes { acc[i] } else { 0.0 });
        for (i, a) in acc.iter_mut().enumerate() {
            *a = before[i] + before[i ^ step];
        }
        step /= 2;
    }
    acc[0]
}

/// `Tensor.sum()` of a contiguous f32 vector (torch's cascade sum, dispatched with 8-lane
/// vectors even under AVX-512): below 8 values four interleaved partial sums; otherwise four
/// interleaved vector sums, the values past the last whole vector first, then the 8 lanes in
/// order. Exact for the lengths a kernel has (a chunked cascade starts past 512 values).
pub(super) fn tensor_sum(v: &[f32]) -> f32 {
    const LANES: usize = 8;
    if v.len() < LANES {
        return interleaved_sum(v);
    }
    let whole = v.len() / LANES;
    let mut parts = [[0f32; LANES]; 4];
    for (i, chunk) in v[..whole * LANES].chunks_exact(LANES).enumerate() {
        let part = if i < whole / 4 * 4 { i % 4 } else { 0 };
        for (a, &x) in parts[part].iter_mut().zip(chunk) {
            *a += x;
        }
    }
    let mut lanes = parts[0];
    for part in &parts[1..] {
        for (a, &x) in lanes.iter_mut().zip(part) {
            *a += x;
        }
    }
    let mut acc = v[whole * LANES..].iter().fold(0.0, |a, &x| a + x);
    for x in lanes {
        acc += x;
    }
    acc
}

/// Four partial sums of `v` (`v[4k + j]` into sum `j`), the values past the last four into
/// the first, then the four added in order.
fn interleaved_sum(v: &[f32]) -> f32 {
    let fours = v.len() / 4 * 4;
    let mut parts = [0f32; 4];
    for (i, &x) in v[..fours].iter().enumerate() {
        parts[i % 4] += x;
    }
    for &x in &v[fours..] {
        parts[0] += x;
    }
    parts[0] + parts[1] + parts[2] + parts[3]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vector_exponential_is_within_an_ulp_of_the_true_one() {
        for i in 0..20_000 {
            let d = -20.0 + i as f32 * 0.001_05;
            let want = f64::from(d).exp() as f32;
            let got = vector_expf(d);
            let ulps = (got.to_bits() as i64 - want.to_bits() as i64).abs();
            assert!(ulps <= 1, "exp({d}) = {got}, want {want}");
        }
        assert_eq!(vector_expf(0.0), 1.0);
        assert_eq!(vector_expf(-200.0), 0.0);
    }

    #[test]
    fn softmax_sums_fold_the_lanes_in_halves_after_whole_vectors() {
        // Powers of two small enough to add exactly: every order gives the same value, so
        // this pins which values are taken, not their order.
        let v: Vec<f32> = (0..37).map(|i| (i % 5) as f32).collect();
        let want: f32 = v.iter().sum();
        for lanes in [8, 16] {
            assert_eq!(softmax_sum(&v, lanes), want);
            assert_eq!(softmax_sum(&v[..5], lanes), v[..5].iter().sum::<f32>());
        }
    }

    #[test]
    fn tensor_sums_take_every_value_once() {
        for n in 1..80 {
            let v: Vec<f32> = (0..n).map(|i| (i % 7) as f32 * 0.5).collect();
            assert_eq!(tensor_sum(&v), v.iter().sum::<f32>(), "length {n}");
        }
    }

    // The values below were read from torch 2.15 (AVX-512) for these inputs, each an f32
    // written out in full.

    fn f32s(v: &[f64]) -> Vec<f32> {
        v.iter().map(|&x| x as f32).collect()
    }

    #[test]
    fn tensor_sums_round_as_torchs_do() {
        let six = f32s(&[
            0.8647975921630859,
            0.8553025126457214,
            0.8110234141349792,
            0.26144635677337646,
            0.07719945907592773,
            0.946465790271759,
        ]);
        assert_eq!(tensor_sum(&six).to_bits(), 1_081_359_666);
        let running = six.iter().fold(0f32, |a, &x| a + x);
        assert_eq!(
            running.to_bits(),
            1_081_359_667,
            "the pin tells the orders apart"
        );
        let many = f32s(&[
            0.5515673756599426,
            0.9284915328025818,
            0.9457125663757324,
            0.8748696446418762,
            0.37164363265037537,
            0.26777008175849915,
            0.5298119783401489,
            0.6543102264404297,
            0.16059327125549316,
            0.5594645142555237,
            0.43894824385643005,
            0.001664794865064323,
            0.4188297986984253,
            0.399898886680603,
            0.9633892774581909,
            0.0545148104429245,
            0.9285460114479065,
            0.9083194732666016,
            0.5998002290725708,
            0.18722905218601227,
            0.791304349899292,
        ]);
        assert_eq!(tensor_sum(&many).to_bits(), 1_094_227_518);
    }

    #[test]
    fn softmax_sums_under_avx512_round_as_torchs_do() {
        let v = f32s(&[
            0.9515292644500732,
            0.4368996024131775,
            0.5826751589775085,
            0.5846239924430847,
            0.41382911801338196,
            0.977956235408783,
            0.04300414025783539,
            0.7436639070510864,
            0.2643461227416992,
            0.06083574891090393,
            0.17955021560192108,
            0.7509052753448486,
            0.9087045192718506,
            0.7753926515579224,
            0.2847997844219208,
            0.4965432584285736,
            0.11847925186157227,
            0.41964226961135864,
            0.25784018635749817,
            0.031618013978004456,
            0.2912003993988037,
            0.9283868670463562,
            0.5307137370109558,
        ]);
        assert_eq!(softmax_sum(&v, 16).to_bits(), 1_093_699_517);
        assert_eq!(softmax_sum(&v, 8).to_bits(), 1_093_699_518);
    }

    #[test]
    fn the_vector_exponential_is_sleefs_not_the_correctly_rounded_one() {
        // Arguments where the two differ; torch's softmax shows the first.
        for (d, torch, rounded) in [
            (-12.559513092041016, 913_024_088, 913_024_089),
            (-11.447508811950684, 926_096_700, 926_096_699),
            (-5.878009796142578, 993_494_560, 993_494_561),
        ] {
            let d = d as f32;
            assert_eq!(vector_expf(d).to_bits(), torch, "exp({d})");
            assert_eq!((f64::from(d).exp() as f32).to_bits(), rounded);
        }
    }
}
