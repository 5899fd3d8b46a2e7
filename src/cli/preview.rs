//! `hpuload preview`: a contact sheet of one augmented batch, read back from the device,
//! de-normalized, each image labelled with its class; for a detection pipeline, each box
//! drawn where its target says, with its class name, so a user can see that boxes still sit
//! on their objects after the augmentation.

use std::path::PathBuf;

use hpuload::{Dtype, Error, Layout, Op, OutputSize};

use super::DataArgs;

/// `hpuload preview` options.
#[derive(clap::Args, Debug)]
pub struct PreviewArgs {
    #[command(flatten)]
    pub data: DataArgs,
    /// Images on the sheet (one batch; default 16, or 4 videos with --video).
    #[arg(long)]
    pub batch: Option<usize>,
    /// Which epoch's first batch to show (the shuffle and augmentation depend on it).
    #[arg(long, default_value_t = 0)]
    pub epoch: u64,
    /// Output PNG file.
    #[arg(long, value_name = "FILE")]
    pub out: PathBuf,
    /// With --video, each clip is a row of its frames.
    #[command(flatten)]
    pub video: super::VideoArgs,
}

/// Height of the label strip under each image.
const LABEL_H: usize = 12;
/// Gap between cells.
const GAP: usize = 4;
/// The longest side an image of its own size is drawn at.
const MAX_SIDE: usize = 400;

/// Renders the sheet.
pub fn run(args: &PreviewArgs) -> Result<(), Error> {
    let batch_size = args.batch.unwrap_or(if args.video.video { 4 } else { 16 });
    if batch_size == 0 {
        return Err(Error::config("--batch", "--batch must be at least 1"));
    }
    if args.video.video {
        return run_video(args, batch_size);
    }
    let (pipeline, builder, _) = args.data.open()?;
    let normalize = normalization(&pipeline);
    // f32 NHWC reads back exactly what the model gets, in an easy layout.
    let mut loader = builder
        .batch_size(batch_size)
        .prefetch(0)
        .output(Dtype::F32, Layout::Nhwc)
        .build()?;
    let (_, _, size) = loader.output();
    let channels = loader.channels();
    // One channel is normalized by the first channel's mean and std.
    let normalize = match channels {
        1 => normalize.map(|(mean, std)| ([mean[0]; 3], [std[0]; 3])),
        _ => normalize,
    };
    let classes = loader.classes().to_vec();
    let (batch, pixels) = first_batch(&mut loader, args.epoch)?;
    let label_bytes = batch.labels.to_host()?;
    let targets: Option<Vec<hpuload::Targets>> = loader.target_layout().map(|layout| {
        label_bytes
            .chunks_exact(layout.bytes())
            .map(|record| layout.read(record))
            .collect()
    });
    let labels: Vec<i64> = match &targets {
        Some(t) => t.iter().map(|t| t.image_id).collect(),
        None => label_bytes
            .chunks_exact(8)
            .map(|b| i64::from_ne_bytes(b.try_into().expect("8 bytes")))
            .collect(),
    };
    let n = labels.len();
    // Each image: where its pixels start, its size, and the scale it is drawn at (images at
    // their own sizes are shrunk to at most MAX_SIDE, by nearest pixels).
    let placed: Vec<(usize, usize, usize, f32)> = match size {
        OutputSize::Fixed([h, w]) => (0..n)
            .map(|i| {
                (
                    i * h as usize * w as usize * channels,
                    h as usize,
                    w as usize,
                    1.0,
                )
            })
            .collect(),
        OutputSize::PerSample { .. } => {
            let row = pixels.len() / n.max(1);
            let t = targets
                .as_ref()
                .expect("per-sample sizes come with targets");
            (0..n)
                .map(|i| {
                    let (h, w) = (t[i].size.0 as usize, t[i].size.1 as usize);
                    let s = (MAX_SIDE as f32 / h.max(w).max(1) as f32).min(1.0);
                    (i * row, h, w, s)
                })
                .collect()
        }
    };
    let drawn = |&(_, h, w, s): &(usize, usize, usize, f32)| {
        (
            ((h as f32 * s) as usize).max(1),
            ((w as f32 * s) as usize).max(1),
        )
    };
    let (h, w) = placed
        .iter()
        .map(drawn)
        .fold((1, 1), |(a, b), (h, w)| (a.max(h), b.max(w)));
    let cols = (n as f64).sqrt().ceil() as usize;
    let rows = n.div_ceil(cols);
    let (cell_w, cell_h) = (w + GAP, h + LABEL_H + GAP);
    let mut sheet = image::RgbImage::from_pixel(
        (cols * cell_w + GAP) as u32,
        (rows * cell_h + GAP) as u32,
        image::Rgb([32, 32, 32]),
    );
    for (i, &label) in labels.iter().enumerate() {
        let (x0, y0) = (GAP + (i % cols) * cell_w, GAP + (i / cols) * cell_h);
        let (at, ih, iw, scale) = placed[i];
        let (h, w) = drawn(&placed[i]);
        let image = &pixels[at..at + ih * iw * channels];
        for y in 0..h {
            for x in 0..w {
                let (sy, sx) = (
                    ((y as f32 / scale) as usize).min(ih - 1),
                    ((x as f32 / scale) as usize).min(iw - 1),
                );
                let px = &image[(sy * iw + sx) * channels..][..channels];
                // A grey image's one channel, shown as three equal ones.
                let px = [px[0], px[channels / 2], px[channels - 1]];
                let rgb = to_rgb8(&px, normalize);
                sheet.put_pixel((x0 + x) as u32, (y0 + y) as u32, rgb);
            }
        }
        let name = match &targets {
            Some(t) => {
                for (b, &class) in t[i].boxes.iter().zip(&t[i].labels) {
                    let colour = box_colour(class);
                    let b = b.map(|v| v * scale);
                    draw_box(&mut sheet, x0, y0, w, h, &b, colour);
                    let name = classes
                        .get(class as usize)
                        .filter(|n| !n.is_empty())
                        .cloned()
                        .unwrap_or_else(|| class.to_string());
                    let (bx, by) = (b[0].max(0.0) as usize, b[1].max(0.0) as usize);
                    draw_text(
                        &mut sheet,
                        x0 + bx.min(w) + 2,
                        y0 + by.min(h) + 2,
                        w.saturating_sub(bx + 2),
                        &name,
                    );
                }
                format!("id {label}: {} boxes", t[i].boxes.len())
            }
            None => classes
                .get(label as usize)
                .cloned()
                .unwrap_or_else(|| label.to_string()),
        };
        let text = if i < batch.valid {
            name
        } else {
            format!("{name} (pad)")
        };
        draw_text(&mut sheet, x0, y0 + h + 2, w, &text);
    }
    save(&sheet, &args.out)?;
    let size = match size {
        OutputSize::Fixed([h, w]) => format!("{h}x{w}"),
        OutputSize::PerSample { .. } => "their own sizes".into(),
    };
    println!(
        "wrote {} ({} images of {size}, pipeline {}, epoch {}, first batch)",
        args.out.display(),
        n,
        pipeline.name,
        args.epoch
    );
    Ok(())
}

/// `hpuload preview --video`: the first batch's clips, each a row of its frames (left to right
/// in time), de-normalized, its class and clip number under its first frame.
fn run_video(args: &PreviewArgs, batch_size: usize) -> Result<(), Error> {
    let (pipeline, builder, _) = args.video.open(&args.data)?;
    let normalize = normalization(&pipeline);
    let mut loader = builder
        .batch_size(batch_size)
        .prefetch(0)
        .output(Dtype::F32, Layout::Nhwc)
        .build()?;
    let [h, w] = match loader.output().2 {
        OutputSize::Fixed(hw) => hw.map(|d| d as usize),
        OutputSize::PerSample { .. } => unreachable!("a video loader's frames have one size"),
    };
    let classes = loader.classes().to_vec();
    let (batch, pixels) = first_batch(&mut loader, args.epoch)?;
    let labels: Vec<i64> = batch
        .labels
        .to_host()?
        .chunks_exact(8)
        .map(|b| i64::from_ne_bytes(b.try_into().expect("8 bytes")))
        .collect();
    let (t, clips) = (args.video.frames_per_clip, args.video.clips);
    let rows = labels.len() * clips;
    let (cell_w, cell_h) = (w + GAP, h + LABEL_H + GAP);
    let mut sheet = image::RgbImage::from_pixel(
        (t * cell_w + GAP) as u32,
        (rows * cell_h + GAP) as u32,
        image::Rgb([32, 32, 32]),
    );
    let frame = h * w * 3;
    for row in 0..rows {
        let (sample, clip) = (row / clips, row % clips);
        let y0 = GAP + row * cell_h;
        for k in 0..t {
            let at = (row * t + k) * frame;
            let x0 = GAP + k * cell_w;
            for (i, px) in pixels[at..at + frame].chunks_exact(3).enumerate() {
                let rgb = to_rgb8(px, normalize);
                sheet.put_pixel((x0 + i % w) as u32, (y0 + i / w) as u32, rgb);
            }
        }
        let label = labels[sample];
        let name = classes
            .get(label as usize)
            .cloned()
            .unwrap_or_else(|| label.to_string());
        let pad = if sample < batch.valid { "" } else { " (pad)" };
        let text = format!("{name}, clip {}{pad}", clip + 1);
        draw_text(&mut sheet, GAP, y0 + h + 2, t * cell_w, &text);
    }
    save(&sheet, &args.out)?;
    println!(
        "wrote {} ({} clips of {t} frames at {h}x{w}, pipeline {}, epoch {}, first batch)",
        args.out.display(),
        rows,
        pipeline.name,
        args.epoch
    );
    Ok(())
}

/// `epoch`'s first batch, and its pixels (f32) read back from the device.
fn first_batch(
    loader: &mut hpuload::Loader,
    epoch: u64,
) -> Result<(hpuload::Batch, Vec<f32>), Error> {
    let batch = loader
        .epoch(epoch)
        .next()
        .ok_or_else(|| Error::config("--data", "the epoch has no batch"))??;
    let pixels = batch
        .images
        .to_host()?
        .chunks_exact(4)
        .map(|b| f32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    Ok((batch, pixels))
}

/// The pipeline's normalization (mean, std), which the sheet undoes.
fn normalization(pipeline: &hpuload::Pipeline) -> Option<([f32; 3], [f32; 3])> {
    pipeline.ops.iter().find_map(|op| match op {
        Op::Normalize(n) => Some((n.mean, n.std)),
        _ => None,
    })
}

/// A pixel of the batch as the picture it was: de-normalized, scaled to 0-255.
fn to_rgb8(px: &[f32], normalize: Option<([f32; 3], [f32; 3])>) -> image::Rgb<u8> {
    image::Rgb(std::array::from_fn(|c| {
        let v = match normalize {
            Some((mean, std)) => px[c] * std[c] + mean[c],
            None => px[c],
        };
        (v * 255.0).round().clamp(0.0, 255.0) as u8
    }))
}

fn save(sheet: &image::RgbImage, out: &std::path::Path) -> Result<(), Error> {
    sheet
        .save_with_format(out, image::ImageFormat::Png)
        .map_err(|e| Error::Io {
            path: out.to_path_buf(),
            source: std::io::Error::other(e),
        })
}

/// A colour per class, bright enough to see on photographs.
fn box_colour(class: i64) -> image::Rgb<u8> {
    const COLOURS: [[u8; 3]; 6] = [
        [255, 64, 64],
        [64, 255, 64],
        [80, 160, 255],
        [255, 220, 0],
        [255, 0, 255],
        [0, 255, 255],
    ];
    image::Rgb(COLOURS[class.rem_euclid(COLOURS.len() as i64) as usize])
}

/// Draws the outline of box `b` (`[x1, y1, x2, y2]` in the cell's pixels), 2 pixels wide,
/// into the `w`x`h` cell at `(x0, y0)`, clipped to it.
fn draw_box(
    img: &mut image::RgbImage,
    x0: usize,
    y0: usize,
    w: usize,
    h: usize,
    b: &[f32; 4],
    colour: image::Rgb<u8>,
) {
    let clip = |v: f32, max: usize| (v.round().max(0.0) as usize).min(max.saturating_sub(1));
    let (x1, x2) = (clip(b[0], w), clip(b[2], w));
    let (y1, y2) = (clip(b[1], h), clip(b[3], h));
    let mut put = |x: usize, y: usize| img.put_pixel((x0 + x) as u32, (y0 + y) as u32, colour);
    for t in 0..2 {
        for x in x1..=x2 {
            put(x, (y1 + t).min(h - 1));
            put(x, y2.saturating_sub(t));
        }
        for y in y1..=y2 {
            put((x1 + t).min(w - 1), y);
            put(x2.saturating_sub(t), y);
        }
    }
}

/// Draws `text` in the 8x8 BIOS font, clipped to `max_w` pixels.
fn draw_text(img: &mut image::RgbImage, x0: usize, y0: usize, max_w: usize, text: &str) {
    for (i, ch) in text.chars().take(max_w / 8).enumerate() {
        let glyph = font8x8::legacy::BASIC_LEGACY
            .get(ch as usize)
            .copied()
            .unwrap_or(font8x8::legacy::BASIC_LEGACY[b'?' as usize]);
        for (dy, row) in glyph.iter().enumerate() {
            for dx in 0..8 {
                if row >> dx & 1 == 1 {
                    let (x, y) = ((x0 + i * 8 + dx) as u32, (y0 + dy) as u32);
                    if x < img.width() && y < img.height() {
                        img.put_pixel(x, y, image::Rgb([240, 240, 240]));
                    }
                }
            }
        }
    }
}
