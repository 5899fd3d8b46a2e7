//! [`PipelineError`]: why a pipeline is refused before any sample runs; [`AugmentError`]: why
//! it could not process one sample. A leaf of `augment/`.

/// Why a pipeline is refused when the loader is built (the name of the pipeline is carried by
/// the [`Error::Pipeline`](crate::Error::Pipeline) that holds this). Each message says what to
/// change.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PipelineError {
    /// No built-in pipeline has this name (the message lists them).
    #[error("{0}")]
    Unknown(String),
    /// The pipeline file does not parse: its TOML, an unknown op or field (with the line).
    #[error("{0}")]
    Syntax(String),
    /// An op's parameters are outside what torchvision accepts (the message names the op).
    #[error("{0}")]
    Parameter(String),
    /// An op where the plan cannot run it: geometry first, pixel ops on the image before
    /// normalize, erasing last, the detection ops before the resize.
    #[error("{0}")]
    Order(String),
    /// The geometry would give each image its own shape where a batch needs one, or a crop
    /// larger than what it is cut from.
    #[error("{0}")]
    Shape(String),
    /// An op after a detection pipeline's geometry that would move pixels without their boxes,
    /// named as nested (`random_apply > random_rotation`).
    #[error("{mover} after the geometry of a detection pipeline would move pixels without their boxes (put a horizontal flip before the resize; the other ops that move pixels are not box-aware yet)")]
    MovesPixelsWithoutBoxes {
        /// The op that moves pixels, with the wrappers it is inside.
        mover: String,
    },
    /// The output dtype cannot hold what the pipeline makes.
    #[error("{0}")]
    Dtype(String),
    /// A plan asked for one sample (`Loader::sample_plan`) could not be drawn for its size.
    #[error(transparent)]
    Sample(#[from] AugmentError),
}

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
