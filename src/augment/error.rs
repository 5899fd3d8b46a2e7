//! [`AugmentError`]: why a pipeline could not process one sample. A leaf of `augment/`.

/// Why the pipeline could not process a sample (its file is named by the
/// [`SampleError`](crate::SampleError) that carries this).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AugmentError {
    /// The image (resized, when the pipeline resizes first) is smaller than its center crop.
    #[error(
        "the {width}x{height} image is smaller than the {crop_width}x{crop_height} center crop"
    )]
    SmallerThanCrop {
        /// The image's width (after the resize of its shorter side).
        width: u32,
        /// Its height.
        height: u32,
        /// The crop's width.
        crop_width: u32,
        /// The crop's height.
        crop_height: u32,
    },
    /// The crop window reaches outside the decoded image, or the image's pixels are short.
    #[error("the crop lies outside the image")]
    CropOutside,
    /// The resampler refused the sizes it was given.
    #[error("resize: {0}")]
    Resize(String),
    /// A random interpolation reached the resampler without being drawn.
    #[error("interpolation 'random' was not drawn")]
    Undrawn,
    /// The sample's output is larger than a batch slot (slots are sized from the image sizes a
    /// detection dataset's annotations give).
    #[error("the image is {width}x{height} and its output {out_width}x{out_height}, more than the batch slots hold: they are sized from the image sizes the annotations give")]
    LargerThanSlot {
        /// The decoded image's width.
        width: u32,
        /// Its height.
        height: u32,
        /// The output's width.
        out_width: u32,
        /// The output's height.
        out_height: u32,
    },
    /// Only the media engine may decode (`Backend::Hw`), and it does not run a step the
    /// sample needs.
    #[error("{0}")]
    NotOnEngine(&'static str),
    /// The engine's decoded region is shorter than its size says.
    #[error("the decoded region is short")]
    ShortRegion,
}
