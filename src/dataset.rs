//! A synthetic ImageNet-like dataset: the built-in default for `hpuload bench` and the tests'
//! input. JPEGs in an ImageFolder layout with ImageNet's size distribution (shorter side mostly
//! 333-500, aspect ratios 3:4 to 3:2), smooth colour fields with edges and blobs, and camera-like
//! grain so the compressed sizes and decode cost are realistic (about 3 bits per pixel).

use std::path::{Path, PathBuf};

use crate::Error;

/// Number of class folders.
pub const CLASSES: usize = 10;
/// Images in the built-in default dataset.
pub const DEFAULT_IMAGES: usize = 2560;

/// Writes `images` JPEGs into `out/class_NN/img_NNNNNN.jpg` (labels cycle over [`CLASSES`]).
/// The same `(images, seed)` always gives the same files. Uses all CPUs.
///
/// # Errors
/// A file cannot be written.
pub fn make_dataset(out: &Path, images: usize, seed: u64) -> Result<(), Error> {
    // Every class folder, even with fewer images than classes.
    write_class_folders(out, CLASSES, images, "img", "jpg", |i, _| {
        Ok(synth_jpeg(seed, i as u64))
    })
}

/// Writes `count` files of a built-in set into `out/class_NN/{stem}_NNNNNN.{ext}` (labels
/// cycling over [`CLASSES`]), file `i` holding `make(i, its path)`, on all cores, after
/// making the first `folders` class folders.
///
/// # Errors
/// What `make` returns, or a folder or file cannot be written.
pub(crate) fn write_class_folders(
    out: &Path,
    folders: usize,
    count: usize,
    stem: &str,
    ext: &str,
    make: impl Fn(usize, &Path) -> Result<Vec<u8>, Error> + Sync,
) -> Result<(), Error> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    for c in 0..folders {
        let dir = out.join(format!("class_{c:02}"));
        std::fs::create_dir_all(&dir).map_err(io(&dir))?;
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let make = &make;
    std::thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                s.spawn(move || -> Result<(), Error> {
                    for i in (t..count).step_by(threads) {
                        let path = out
                            .join(format!("class_{:02}", i % CLASSES))
                            .join(format!("{stem}_{i:06}.{ext}"));
                        let bytes = make(i, &path)?;
                        std::fs::write(&path, bytes).map_err(io(&path))?;
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .try_for_each(|h| h.join().expect("dataset writer panicked"))
    })
}

/// hpuload's cache folder: `$HPULOAD_CACHE_DIR`, else `$XDG_CACHE_HOME/hpuload`, else
/// `~/.cache/hpuload`.
pub fn cache_root() -> PathBuf {
    std::env::var_os("HPULOAD_CACHE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("XDG_CACHE_HOME").map(|d| PathBuf::from(d).join("hpuload")))
        .or_else(|| std::env::var_os("HOME").map(|d| PathBuf::from(d).join(".cache/hpuload")))
        .unwrap_or_else(|| std::env::temp_dir().join("hpuload"))
}

/// The built-in default dataset, generated on first use into the cache folder
/// (`$HPULOAD_CACHE_DIR`, else `$XDG_CACHE_HOME/hpuload`, else `~/.cache/hpuload`).
///
/// # Errors
/// The cache folder cannot be written.
pub fn default_dataset() -> Result<PathBuf, Error> {
    made_once(&format!("synthetic-v1-{DEFAULT_IMAGES}"), |dir| {
        make_dataset(dir, DEFAULT_IMAGES, 0)
    })
}

/// The built-in set `name` in the cache folder, made by `make` on first use: into a temporary
/// folder beside it, then renamed, so an interrupted run never leaves half a set (and of two
/// processes making it at once, one rename wins and the other's copy is dropped).
///
/// # Errors
/// What `make` returns, or the cache folder cannot be written.
pub(crate) fn made_once(
    name: &str,
    make: impl FnOnce(&Path) -> Result<(), Error>,
) -> Result<PathBuf, Error> {
    let cache = cache_root();
    let dir = cache.join(name);
    if dir.join("class_00").is_dir() {
        return Ok(dir);
    }
    let tmp = cache.join(format!(".{name}-tmp-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    make(&tmp)?;
    match std::fs::rename(&tmp, &dir) {
        Ok(()) => Ok(dir),
        Err(_) if dir.join("class_00").is_dir() => {
            let _ = std::fs::remove_dir_all(&tmp);
            Ok(dir)
        }
        Err(source) => Err(Error::Io { path: dir, source }),
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn f(&mut self) -> f32 {
        (self.next() >> 40) as f32 / (1u64 << 24) as f32
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[(self.next() % xs.len() as u64) as usize]
    }
}

/// One synthetic photo-like JPEG; a pure function of `(seed, index)`.
pub fn synth_jpeg(seed: u64, index: u64) -> Vec<u8> {
    let mut rng =
        Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let short = rng.pick(&[375, 375, 375, 333, 400, 500, 300, 256, 480, 224]);
    let ratio = 1.0 + rng.f() * 0.5;
    let long = ((short as f32 * ratio) as u32).min(500);
    let (w, h) = if rng.f() < 0.7 {
        (long, short)
    } else {
        (short, long)
    };
    let (wf, hf) = (w as f32, h as f32);
    // Colour field: separable sinusoids per channel, plus a few soft blobs with hard edges.
    let mut cols = vec![[0f32; 3]; w as usize];
    let mut rows = vec![[0f32; 3]; h as usize];
    for c in 0..3 {
        let (fx, px, ax) = (1.0 + rng.f() * 6.0, rng.f() * 6.3, 30.0 + rng.f() * 60.0);
        let (fy, py, ay) = (1.0 + rng.f() * 6.0, rng.f() * 6.3, 30.0 + rng.f() * 60.0);
        for (x, col) in cols.iter_mut().enumerate() {
            col[c] = ax * (x as f32 / wf * fx + px).sin();
        }
        for (y, row) in rows.iter_mut().enumerate() {
            row[c] = ay * (y as f32 / hf * fy + py).sin();
        }
    }
    let base: [f32; 3] = [
        60.0 + rng.f() * 130.0,
        60.0 + rng.f() * 130.0,
        60.0 + rng.f() * 130.0,
    ];
    let blobs: Vec<(f32, f32, f32, [f32; 3])> = (0..6)
        .map(|_| {
            (
                rng.f() * wf,
                rng.f() * hf,
                20.0 + rng.f() * wf / 3.0,
                [
                    rng.f() * 120.0 - 60.0,
                    rng.f() * 120.0 - 60.0,
                    rng.f() * 120.0 - 60.0,
                ],
            )
        })
        .collect();
    let grain = 4.0 + rng.f() * 6.0;
    let mut noise = Rng(rng.next());
    let mut rgb = Vec::with_capacity(w as usize * h as usize * 3);
    for (y, row) in rows.iter().enumerate() {
        for (x, col) in cols.iter().enumerate() {
            let mut px: [f32; 3] = std::array::from_fn(|c| base[c] + col[c] + row[c]);
            for &(bx, by, r, d) in &blobs {
                let (dx, dy) = (x as f32 - bx, y as f32 - by);
                if dx * dx + dy * dy < r * r {
                    px = [px[0] + d[0], px[1] + d[1], px[2] + d[2]];
                }
            }
            // Luma grain: the sum of two uniforms is a cheap bell shape.
            let g = (noise.f() + noise.f() - 1.0) * grain * 2.0;
            rgb.extend(px.map(|v| (v + g).clamp(0.0, 255.0) as u8));
        }
    }
    let quality = rng.pick(&[85, 90, 92, 95, 95]);
    let mut out = Vec::with_capacity(rgb.len() / 3);
    image::codecs::jpeg::JpegEncoder::new_with_quality(&mut out, quality)
        .encode(&rgb, w, h, image::ExtendedColorType::Rgb8)
        .expect("encoding an in-memory image cannot fail");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn synthetic_images_are_deterministic_decodable_and_realistically_sized() {
        assert_eq!(synth_jpeg(0, 5), synth_jpeg(0, 5));
        assert_ne!(synth_jpeg(0, 5), synth_jpeg(1, 5));
        let mut bpp = Vec::new();
        for i in 0..20 {
            let jpeg = synth_jpeg(0, i);
            let img = image::load_from_memory(&jpeg).unwrap();
            assert!(img.width().min(img.height()) >= 224 && img.width().max(img.height()) <= 500);
            bpp.push(jpeg.len() as f64 * 8.0 / (img.width() * img.height()) as f64);
        }
        let mean = bpp.iter().sum::<f64>() / bpp.len() as f64;
        assert!((1.5..6.0).contains(&mean), "bits per pixel {mean}");
    }
}
