//! The media engine's JPEG decoder on arbitrary bytes and crop rectangles: probe, then decode a
//! region at a scale (at full scale also in place in a whole-image buffer, as the CPU path
//! does, which must write the same pixels), and decode it again resampled to an output size,
//! parsing the headers again, from the probe's parse, and as the media engine runs it (its
//! planes before colour, converted after), which must all agree; and resampled as a grey read
//! (the luma alone, equal channels; a grey file's equal to its colour decode). It must never panic, read out
//! of bounds or use unbounded memory.
//!
//! The input's first 5 bytes choose the region (as fractions of the image) and the scale, and
//! also a fractional window inside the region and the output size; the rest is the file.
#![no_main]

use hpuload_decoders::jpeg::{
    scaled_region, DecodePlan, Filter, Planes, Region, ResizeRequest, Scale, Window,
};
use hpuload_decoders::{JpegDecoder, Limits};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((params, file)) = data.split_at_checked(5) else {
        return;
    };
    // A small pixel limit keeps each run fast; the limit logic itself is what is exercised.
    let mut limits = Limits::default();
    limits.max_pixels = 4_000_000;
    let mut decoder = JpegDecoder::with_limits(limits);
    let Ok((info, parsed)) = decoder.probe_parsed(file) else {
        return;
    };
    let frac = |b: u8, full: u32| (u64::from(b) * u64::from(full) / 256) as u32;
    let x = frac(params[0], info.width);
    let y = frac(params[1], info.height);
    let width = (frac(params[2], info.width - x)).max(1);
    let height = (frac(params[3], info.height - y)).max(1);
    let region = Region {
        x,
        y,
        width,
        height,
    };
    let scale = Scale::ALL[usize::from(params[4] % 8)];
    let sr = scaled_region(&info, region, scale);
    let mut out = vec![0u8; sr.width as usize * sr.height as usize * 3];
    let tight = decoder.decode_region(file, region, scale, &mut out);
    if scale.is_full() {
        let stride = info.width as usize * 3;
        let mut image = vec![0u8; stride * info.height as usize];
        let in_place = decoder.decode_region_in_place(file, &parsed, region, &mut image);
        assert_eq!(tight.is_ok(), in_place.is_ok());
        if in_place.is_ok() {
            let row = width as usize * 3;
            for (j, want) in out.chunks_exact(row).enumerate() {
                let at = (y as usize + j) * stride + x as usize * 3;
                assert_eq!(&image[at..at + row], want);
            }
        }
    }
    let inset = |b: u8| f64::from(b & 7) / 32.0;
    let (w, h) = (f64::from(width), f64::from(height));
    let window = Window {
        left: f64::from(x) + w * inset(params[0]),
        top: f64::from(y) + h * inset(params[1]),
        width: w * (1.0 - inset(params[0]) - inset(params[2])),
        height: h * (1.0 - inset(params[1]) - inset(params[3])),
    };
    let (out_w, out_h) = (1 + u32::from(params[2] % 64), 1 + u32::from(params[3] % 64));
    let request = ResizeRequest {
        filter: Filter::Bilinear,
        region,
        scale,
        window,
        out_w,
        out_h,
    };
    let mut out = vec![0u8; out_w as usize * out_h as usize * 3];
    let again = decoder
        .decode_resized(file, &request, &mut out)
        .map(|()| out.clone());
    // What the media engine runs: the probe's headers, not parsed again. Same outcome.
    let mut once = vec![0u8; out.len()];
    let parsed_decode = decoder
        .decode_resized_parsed(file, &parsed, &request, &mut once)
        .map(|()| once);
    assert_eq!(again.is_ok(), parsed_decode.is_ok());
    // The engine's own call: the planes before colour, converted to RGB afterwards. Same
    // outcome and the same bytes.
    let plan = DecodePlan {
        request,
        parsed: Some(parsed),
        limits,
        luma: false,
    };
    let grey = DecodePlan {
        luma: true,
        ..plan.clone()
    };
    let mut grey_file = false;
    let planes = decoder.decode_planned_planes(file, &plan).map(|p| {
        grey_file = matches!(p, Planes::Grey(_));
        let mut rgb = vec![0u8; out.len()];
        p.to_rgb(&mut rgb);
        rgb
    });
    assert_eq!(again.is_ok(), planes.is_ok());
    let colour = planes.as_ref().ok().cloned();
    if let (Ok(a), Ok(b), Ok(c)) = (again, parsed_decode, planes) {
        assert_eq!(a, b);
        assert_eq!(a, c);
    }
    // A grey read's resampled decode: the luma alone, in all three channels (a grey JPEG's
    // equal to its colour decode).
    if let Ok(p) = decoder.decode_planned_planes(file, &grey) {
        let mut rgb = vec![0u8; out.len()];
        p.to_rgb(&mut rgb);
        assert!(rgb
            .chunks_exact(3)
            .all(|px| px[0] == px[1] && px[1] == px[2]));
        if let (Some(colour), true) = (colour, grey_file) {
            assert_eq!(colour, rgb);
        }
    }
});
