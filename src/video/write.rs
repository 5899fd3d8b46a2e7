//! Writing H.264 into an MP4 file: the muxer behind `make-dataset --video`.
//!
//! Takes each encoded frame as the encoder gives it (Annex B: NAL units after start codes),
//! keeps the first sequence and picture parameter sets for the `avcC` record, and stores the
//! other NAL units length-prefixed, one sample per frame. The file is `ftyp`, then `moov`
//! (before the media data, so a reader finds the index in the first bytes), then `mdat`. Frames
//! come in presentation order with a constant frame rate and no B-frames, so the tables are
//! `stts` (one run), `stss` (the keyframes), one chunk (`stsc`, `stco`) and `stsz`.

/// An MP4 file of one H.264 video track, built frame by frame.
#[derive(Debug)]
pub struct Mp4Writer {
    width: u16,
    height: u16,
    timescale: u32,
    delta: u32,
    sps: Option<Vec<u8>>,
    pps: Option<Vec<u8>>,
    data: Vec<u8>,
    sizes: Vec<u32>,
    /// Keyframes, 1-based (the numbering of `stss`).
    sync: Vec<u32>,
}

/// Why frames do not make an MP4 file.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WriteError {
    /// No sequence or picture parameter set was given before the first frame's slices.
    #[error("the first frame carries no sequence and picture parameter sets")]
    NoParameterSets,
    /// A frame holds no slice.
    #[error("frame {0} holds no slice")]
    Empty(usize),
    /// The media data outgrows 32-bit offsets.
    #[error("the media data outgrows 4 GiB")]
    TooLarge,
}

impl Mp4Writer {
    /// A track of `width` x `height` frames at `fps` frames per second (timestamps in units
    /// of 1/(512 fps) s, as FFmpeg writes them).
    pub fn new(width: u16, height: u16, fps: u32) -> Self {
        Self {
            width,
            height,
            timescale: fps.max(1) * 512,
            delta: 512,
            sps: None,
            pps: None,
            data: Vec::new(),
            sizes: Vec::new(),
            sync: Vec::new(),
        }
    }

    /// Adds the next frame, as Annex B bytes.
    ///
    /// # Errors
    /// [`WriteError::NoParameterSets`] for slices before any parameter sets,
    /// [`WriteError::Empty`] for a frame without slices.
    pub fn push(&mut self, annex_b: &[u8], keyframe: bool) -> Result<(), WriteError> {
        let start = self.data.len();
        for nal in annex_b_units(annex_b) {
            match nal.first().map(|b| b & 0x1f) {
                Some(7) => {
                    self.sps.get_or_insert_with(|| nal.to_vec());
                }
                Some(8) => {
                    self.pps.get_or_insert_with(|| nal.to_vec());
                }
                Some(_) => {
                    if self.sps.is_none() || self.pps.is_none() {
                        return Err(WriteError::NoParameterSets);
                    }
                    self.data
                        .extend_from_slice(&(nal.len() as u32).to_be_bytes());
                    self.data.extend_from_slice(nal);
                }
                None => {}
            }
        }
        if self.data.len() == start {
            return Err(WriteError::Empty(self.sizes.len()));
        }
        self.sizes.push((self.data.len() - start) as u32);
        if keyframe {
            self.sync.push(self.sizes.len() as u32);
        }
        Ok(())
    }

    /// The file's bytes.
    ///
    /// # Errors
    /// [`WriteError::NoParameterSets`] when no frame was pushed, [`WriteError::TooLarge`]
    /// past 4 GiB.
    pub fn finish(self) -> Result<Vec<u8>, WriteError> {
        let (Some(sps), Some(pps)) = (&self.sps, &self.pps) else {
            return Err(WriteError::NoParameterSets);
        };
        let ftyp = boxed(b"ftyp", b"isom\0\0\x02\0isomiso2avc1mp41");
        // The movie box's size does not depend on the chunk offset's value.
        let first = ftyp.len() + self.moov(sps, pps, 0).len() + 8;
        let offset = u32::try_from(first + self.data.len())
            .map(|_| first as u32)
            .map_err(|_| WriteError::TooLarge)?;
        let mut out = ftyp;
        out.extend(self.moov(sps, pps, offset));
        out.extend_from_slice(&(8 + self.data.len() as u32).to_be_bytes());
        out.extend_from_slice(b"mdat");
        out.extend_from_slice(&self.data);
        Ok(out)
    }

    fn moov(&self, sps: &[u8], pps: &[u8], chunk_offset: u32) -> Vec<u8> {
        let n = self.sizes.len() as u32;
        let duration = n * self.delta;
        let movie_ms = (u64::from(duration) * 1000 / u64::from(self.timescale)) as u32;
        let identity = u32s(&[0x10000, 0, 0, 0, 0x10000, 0, 0, 0, 0x4000_0000]);
        let mvhd = [
            u32s(&[0, 0, 1000, movie_ms, 0x10000]),
            vec![1, 0, 0, 0, 0, 0, 0, 0, 0, 0], // volume, reserved
            identity.clone(),
            vec![0; 24],
            u32s(&[2]), // next track id
        ]
        .concat();
        let tkhd = [
            u32s(&[0, 0, 1, 0, movie_ms, 0, 0, 0, 0]),
            identity,
            u32s(&[u32::from(self.width) << 16, u32::from(self.height) << 16]),
        ]
        .concat();
        let mdhd = [
            u32s(&[0, 0, self.timescale, duration]),
            vec![0x55, 0xc4, 0, 0], // language "und"
        ]
        .concat();
        let hdlr = [&u32s(&[0])[..], b"vide", &[0; 12], b"VideoHandler\0"].concat();
        let avcc = [
            &[1, sps[1], sps[2], sps[3], 0xff, 0xe1][..],
            &(sps.len() as u16).to_be_bytes(),
            sps,
            &[1],
            &(pps.len() as u16).to_be_bytes(),
            pps,
        ]
        .concat();
        let entry = [
            vec![0; 6],
            vec![0, 1], // data reference index
            vec![0; 16],
            self.width.to_be_bytes().to_vec(),
            self.height.to_be_bytes().to_vec(),
            u32s(&[0x0048_0000, 0x0048_0000, 0]),
            vec![0, 1], // frames per sample
            vec![0; 32],
            vec![0, 0x18, 0xff, 0xff], // depth, no colour table
            boxed(b"avcC", &avcc),
        ]
        .concat();
        let stsd = [u32s(&[1]), boxed(b"avc1", &entry)].concat();
        let stss = [u32s(&[self.sync.len() as u32]), u32s(&self.sync)].concat();
        let stsz = [u32s(&[0, n]), u32s(&self.sizes)].concat();
        let stbl = [
            full(b"stsd", 0, &stsd),
            full(b"stts", 0, &u32s(&[1, n, self.delta])),
            full(b"stss", 0, &stss),
            full(b"stsc", 0, &u32s(&[1, 1, n, 1])),
            full(b"stsz", 0, &stsz),
            full(b"stco", 0, &u32s(&[1, chunk_offset])),
        ]
        .concat();
        let dref = [u32s(&[1]), full(b"url ", 1, &[])].concat();
        let minf = [
            full(b"vmhd", 1, &[0; 8]),
            boxed(b"dinf", &full(b"dref", 0, &dref)),
            boxed(b"stbl", &stbl),
        ]
        .concat();
        let mdia = [
            full(b"mdhd", 0, &mdhd),
            full(b"hdlr", 0, &hdlr),
            boxed(b"minf", &minf),
        ]
        .concat();
        let trak = [full(b"tkhd", 3, &tkhd), boxed(b"mdia", &mdia)].concat();
        boxed(
            b"moov",
            &[full(b"mvhd", 0, &mvhd), boxed(b"trak", &trak)].concat(),
        )
    }
}

/// The NAL units of Annex B bytes (each after a 3- or 4-byte start code).
fn annex_b_units(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut starts = Vec::new();
    let mut i = 0;
    while i + 3 <= bytes.len() {
        if bytes[i..i + 3] == [0, 0, 1] {
            starts.push(i + 3);
            i += 3;
        } else {
            i += 1;
        }
    }
    let ends: Vec<usize> = starts
        .iter()
        .skip(1)
        .map(|&s| {
            // The next start code, and the zero before it of a 4-byte one.
            let end = s - 3;
            if end > 0 && bytes[end - 1] == 0 {
                end - 1
            } else {
                end
            }
        })
        .chain(std::iter::once(bytes.len()))
        .collect();
    starts
        .into_iter()
        .zip(ends)
        .map(move |(s, e)| &bytes[s..e.max(s)])
}

/// A box: size, type, body.
fn boxed(kind: &[u8; 4], body: &[u8]) -> Vec<u8> {
    [&((8 + body.len()) as u32).to_be_bytes()[..], kind, body].concat()
}

/// A full box: version 0, `flags`, body.
fn full(kind: &[u8; 4], flags: u32, body: &[u8]) -> Vec<u8> {
    boxed(kind, &[&flags.to_be_bytes()[..], body].concat())
}

fn u32s(values: &[u32]) -> Vec<u8> {
    values.iter().flat_map(|v| v.to_be_bytes()).collect()
}
