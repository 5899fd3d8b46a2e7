//! Video: H.264 and MPEG-4 Part 2 in MP4 (ISO BMFF) and AVI files. The frame index is built from the container's tables
//! without decoding a frame ([`VideoIndex`]): every frame's presentation and decode timestamps,
//! whether it is a keyframe, and where its compressed bytes lie. A [`ClipSampler`] picks each
//! clip's frames as torchcodec's and torchvision's samplers do; a [`DecodePlan`] turns the
//! frames a sampler wants into runs that start at keyframes, and the [`VideoDecoder`] decodes
//! them on the host (issue 30).

mod avi;
mod cache;
mod clips;
pub mod colour;
mod decoder;
mod display;
mod fragments;
mod frames;
mod libav;
mod make;
mod mp4;
mod mpeg4;
mod plan;
mod read;
mod render;
pub mod sps;
mod write;

pub use cache::{
    index_threads, index_videos, parse_index_file, IndexCache, IndexStats, PackedIndex, VideoAt,
    INDEX_FILE, INDEX_MAGIC,
};
pub use clips::{
    random_clip_sampler, uniform_clip_sampler, video_clips, ClipError, ClipSampler, IndexClips,
    Policy, TimeClips, Timeline, WindowClips,
};
pub(crate) use decoder::openh264_cannot;
pub use decoder::{h264_decoder, AvcConfig, DecodeCounts, Picture, VideoDecoder};
pub use display::{turn, Display};
pub(crate) use frames::frame_error;
pub use frames::{FramesJob, FramesScratch};
pub use libav::{library as libavcodec, Libav};
pub use make::{default_video_dataset, make_video_dataset, VideoSetSpec};
pub use mp4::{Codec, Container, Frame, VideoError, VideoFailure, VideoIndex};
pub use plan::{DecodePlan, Run};
pub use read::{frame_times, outline, read_frames, Frames};
pub use render::{Bitstream, ClipsError, ClipsJob, ClipsScratch, Rendered};
pub use write::{Mp4Writer, WriteError};
