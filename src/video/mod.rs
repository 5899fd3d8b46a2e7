//! Video: the frame index of an MP4 (ISO BMFF) file, built from its container tables without
//! decoding a frame. What the clip sampler and the decode plan will read (issue 30): every
//! frame's presentation and decode timestamps, whether it is a keyframe, and where its
//! compressed bytes lie in the file.

mod mp4;

pub use mp4::{Codec, Frame, VideoError, VideoIndex};
