//! Decodes each JPEG given on the command line with the media-engine decoder and the CPU
//! decoder and prints the agreement (PSNR) or the error: a debugging aid.
use hpuload_decoders::{CpuDecoder, Decode, JpegDecoder};

fn main() {
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path).expect("readable file");
        let mut ours = JpegDecoder::default();
        let result = ours.probe(&bytes).and_then(|info| {
            let mut a = vec![0; info.rgb_len()];
            ours.decode_into(&bytes, &info, &mut a)?;
            let mut b = vec![0; info.rgb_len()];
            let mut cpu = CpuDecoder::default();
            let cpu_info = cpu.probe(&bytes)?;
            cpu.decode_into(&bytes, &cpu_info, &mut b)?;
            let mse = a
                .iter()
                .zip(&b)
                .map(|(x, y)| (f64::from(*x) - f64::from(*y)).powi(2))
                .sum::<f64>()
                / a.len() as f64;
            Ok((info, 10.0 * (65025.0 / mse).log10()))
        });
        println!("{path}: {result:?}");
    }
}
