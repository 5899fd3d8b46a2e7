use hpuload_decoders::{CpuDecoder, Decode};
fn main() {
    for path in std::env::args().skip(1) {
        let bytes = std::fs::read(&path).unwrap();
        let mut d = CpuDecoder::default();
        let r = d.probe(&bytes).and_then(|info| {
            let mut out = vec![0; info.rgb_len()];
            d.decode_into(&bytes, &info, &mut out)?;
            Ok(out)
        });
        match r {
            Ok(out) => {
                std::fs::write(format!("{path}.rgb"), &out).unwrap();
            }
            Err(e) => println!("{path} ERR {e}"),
        }
    }
}
