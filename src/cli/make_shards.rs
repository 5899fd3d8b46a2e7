//! `hpuload make-shards`: an ImageFolder (or manifest, or a COCO set's images, or a folder of
//! videos) written as WebDataset tar shards of about a given size, each with its sidecar index.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use hpuload::source::shards::{
    build_index, index_path, is_image_member, write_index, Fields, Media,
};
use hpuload::{Error, Manifest, Source};
use indicatif::{ProgressBar, ProgressStyle};

/// `hpuload make-shards` arguments.
#[derive(clap::Args, Clone, Debug)]
pub struct MakeShardsArgs {
    /// ImageFolder dataset to convert.
    #[arg(
        long,
        conflicts_with = "manifest",
        required_unless_present = "manifest"
    )]
    pub data: Option<PathBuf>,
    /// Manifest file (`path<TAB>label` per line) instead of a folder.
    #[arg(long)]
    pub manifest: Option<PathBuf>,
    /// A COCO annotation file: `--data` is then its image folder, and each image keeps its
    /// `file_name` as its member's name (no `.cls` member), so the same annotation file
    /// reads the shards (`--coco FILE --data 'out/shard-{000000..N}.tar'`).
    #[arg(long, value_name = "ANNOTATIONS", conflicts_with = "manifest")]
    pub coco: Option<PathBuf>,
    /// `--data` is a folder of class folders of videos (H.264 in MP4/MOV, MPEG-4 Part 2 in
    /// AVI): each sample is a video member (`<key>.mp4`, `<key>.avi`, ...) and its `.cls`,
    /// read by `bench --video --data 'out/...'` and by `hpuload.VideoShards`.
    #[arg(long, conflicts_with_all = ["manifest", "coco"])]
    pub video: bool,
    /// Output folder (created if missing).
    #[arg(long)]
    pub out: PathBuf,
    /// Target size of a shard: a number of bytes with an optional unit (KB, MB, GB, KiB, MiB,
    /// GiB). A shard ends at the first sample that reaches it.
    #[arg(long, default_value = "1GB", value_parser = parse_size)]
    pub shard_size: u64,
    /// Seed of the order samples are written in (shuffled, so each shard mixes classes, as
    /// streaming readers need; hpuload itself reads shards by random access).
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// `1GB` -> 1_000_000_000, `64MiB` -> 67_108_864, `4096` -> 4096.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let number: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size such as 1GB or 256MiB"))?;
    let scale = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "kb" | "k" => 1e3,
        "mb" | "m" => 1e6,
        "gb" | "g" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        other => return Err(format!("unknown size unit {other:?} in {text:?}")),
    };
    let bytes = number * scale;
    if !(1.0..1e18).contains(&bytes) {
        return Err(format!("shard size {text:?} is out of range"));
    }
    Ok(bytes as u64)
}

/// Writes the shards; prints where they are and the brace pattern that names them.
pub fn run(args: &MakeShardsArgs) -> Result<(), Error> {
    let source: Box<dyn Source> = match (&args.data, &args.manifest, &args.coco) {
        (_, Some(m), _) => Box::new(Manifest::open(m)?),
        (Some(d), None, Some(annotations)) => Box::new(hpuload::CocoDataset::open(
            annotations,
            d,
            &hpuload::CocoOptions::default(),
        )?),
        (Some(d), None, None) if args.video => Box::new(hpuload::VideoFolder::open(d)?),
        (Some(d), None, None) => hpuload::source::open(&d.to_string_lossy(), &Default::default())?,
        (None, None, _) => return Err(Error::config("--data", "give --data or --manifest")),
    };
    // A COCO image keeps its name (the annotation file names it); others are renumbered.
    let coco_images = args.coco.as_ref().and(args.data.as_deref());
    if let Some(dir) = coco_images {
        for entry in source.entries() {
            let name = entry.path.strip_prefix(dir).unwrap_or(&entry.path);
            // The shards' reader groups members by WebDataset's key: a name it would not take
            // for an image is refused here rather than lost there.
            if !is_image_member(&name.to_string_lossy()) {
                return Err(Error::config(
                    "--coco",
                    format!(
                        "image {} would not be found in the shards: a member's key ends at the \
                         first dot of its name and the rest must be jpg, jpeg, png or webp; \
                         rename it in the folder and the annotation file",
                        name.display()
                    ),
                ));
            }
        }
    }
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    std::fs::create_dir_all(&args.out).map_err(io(&args.out))?;
    let entries = source.entries();
    let order = shuffled(entries.len(), args.seed);
    let bar = if std::io::stderr().is_terminal() {
        let bar = ProgressBar::new(entries.len() as u64);
        bar.set_style(
            ProgressStyle::with_template("{bar:40} {pos}/{len} samples  {msg}  ETA {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        bar
    } else {
        ProgressBar::hidden()
    };
    let fields = Fields {
        label: "cls",
        media: if args.video {
            Media::Videos
        } else {
            Media::Images
        },
    };
    let started = std::time::Instant::now();
    let (mut shards, mut written, mut buf) = (Vec::new(), 0u64, Vec::new());
    let mut current: Option<(PathBuf, tar::Builder<std::io::BufWriter<std::fs::File>>)> = None;
    for (n, &index) in order.iter().enumerate() {
        let entry = &entries[index];
        let bytes = source
            .read(index, hpuload::ReadMode::Read, &mut buf)
            .map_err(io(&entry.path))?;
        let (path, builder) = match &mut current {
            Some(c) => c,
            None => {
                let path = args.out.join(format!("shard-{:06}.tar", shards.len()));
                let file = std::fs::File::create(&path).map_err(io(&path))?;
                current.insert((path, tar::Builder::new(std::io::BufWriter::new(file))))
            }
        };
        match coco_images.and_then(|dir| entry.path.strip_prefix(dir).ok()) {
            Some(name) => {
                append(builder, &name.to_string_lossy(), &bytes).map_err(io(path))?;
            }
            None => {
                let ext = entry
                    .path
                    .extension()
                    .and_then(|e| e.to_str())
                    .unwrap_or("jpg")
                    .to_ascii_lowercase();
                let key = format!("{index:08}");
                append(builder, &format!("{key}.{ext}"), &bytes).map_err(io(path))?;
                append(
                    builder,
                    &format!("{key}.cls"),
                    entry.label.to_string().as_bytes(),
                )
                .map_err(io(path))?;
            }
        }
        written += bytes.len() as u64 + 2048;
        bar.set_position(n as u64 + 1);
        if written >= args.shard_size || n + 1 == order.len() {
            let (path, builder) = current.take().expect("a shard is open");
            finish(builder, &path, fields)?;
            bar.set_message(format!("{} shards", shards.len() + 1));
            shards.push(path);
            written = 0;
        }
    }
    bar.finish_and_clear();
    let last = shards.len().saturating_sub(1);
    println!(
        "wrote {} samples in {} shards (with indexes) to {} in {:.1}s: {}",
        entries.len(),
        shards.len(),
        args.out.display(),
        started.elapsed().as_secs_f64(),
        args.out
            .join(if last == 0 {
                "shard-000000.tar".to_string()
            } else {
                format!("shard-{{000000..{last:06}}}.tar")
            })
            .display()
    );
    Ok(())
}

fn append<W: std::io::Write>(
    builder: &mut tar::Builder<W>,
    name: &str,
    data: &[u8],
) -> std::io::Result<()> {
    let mut header = tar::Header::new_ustar();
    header.set_size(data.len() as u64);
    header.set_mode(0o644);
    header.set_mtime(0);
    header.set_entry_type(tar::EntryType::Regular);
    builder.append_data(&mut header, name, data)
}

/// Closes a shard and writes its index (from its own headers, so the two always agree).
fn finish(
    builder: tar::Builder<std::io::BufWriter<std::fs::File>>,
    path: &Path,
    fields: Fields<'_>,
) -> Result<(), Error> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let file = builder
        .into_inner()
        .map_err(io)?
        .into_inner()
        .map_err(|e| io(e.into_error()))?;
    file.sync_all().map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let samples = build_index(path, fields)?;
    write_index(&index_path(path), size, fields, &samples).map_err(io)
}

/// `0..n` in a seeded random order (Fisher-Yates on a splitmix64 stream).
fn shuffled(n: usize, seed: u64) -> Vec<usize> {
    let mut state = seed;
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut order: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        order.swap(i, j);
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_with_decimal_and_binary_units() {
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("64MiB"), Ok(64 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("1.5kb"), Ok(1500));
        assert!(parse_size("lots").is_err());
        assert!(parse_size("0").is_err());
        assert!(parse_size("3 parsecs").is_err());
    }

    #[test]
    fn the_write_order_is_a_seeded_permutation() {
        let a = shuffled(100, 1);
        let mut sorted = a.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, (0..100).collect::<Vec<_>>());
        assert_eq!(a, shuffled(100, 1));
        assert_ne!(a, shuffled(100, 2));
    }
}
