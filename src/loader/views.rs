//! Several views of one image (DINO's multi-crop: two global crops and several local ones,
//! each with its own plan): the image is read and decoded once, on the host, and each view's
//! crop, resize, pixel ops and writer run from that one decoded image into its own part of
//! the sample's slot.
//!
//! ```text
//! slot of one sample: | view 0 (the loader's pipeline) | view 1 | ... | view k-1 |
//! ```
//!
//! View 0 is the loader's own pipeline (`Shared::plan`, `Shared::stage`) and draws what a
//! one-view loader would; every other view draws from a seed of its own
//! ([`crate::rng::view_seed`]), so two views of one pipeline differ.

use std::ops::Range;

use crate::augment::{
    compose_padded, AugmentError, Pipeline, PixelStage, Plan, Resampler, SamplePlan,
};
use crate::hpu::{Dtype, Layout};
use crate::Error;

/// A view after the first: its plan, what writes it, and where it lies in the slot.
pub(crate) struct View {
    pub plan: Plan,
    pub stage: PixelStage,
    /// The seed its plans are drawn from.
    pub seed: u64,
    /// Its bytes in the sample's slot.
    pub bytes: Range<usize>,
    /// Its output `(height, width)`.
    pub size: (u32, u32),
}

/// The output size of one view's plan, which must be fixed and not a detection one.
fn fixed(plan: &Plan, which: usize) -> Result<(u32, u32), Error> {
    let Some(size) = plan.fixed_out() else {
        return Err(Error::config(
            "views",
            format!("view {which} has no crop or resize to a fixed size: every view needs one"),
        ));
    };
    if plan.detect.is_some() {
        return Err(Error::config(
            "views",
            format!("view {which} is a detection pipeline: views are for images with labels"),
        ));
    }
    if plan.has_pre_ops() {
        return Err(Error::config(
            "views",
            format!("view {which} has pixel ops before its crop or resize: the views share one decoded image, so put them after it"),
        ));
    }
    Ok(size)
}

/// The views after the first (`extra`, given after the loader's own `main` plan) and the
/// bytes of one sample's slot holding all of them.
pub(super) fn build(
    main: &Plan,
    extra: &[Pipeline],
    dtype: Dtype,
    layout: Layout,
    seed: u64,
) -> Result<(Vec<View>, usize), Error> {
    let pixels = |(h, w): (u32, u32)| (h as usize) * (w as usize) * 3 * dtype.size();
    let one_channel = || {
        Error::config(
            "views",
            "several views are of three channels (single_channel is for one view)",
        )
    };
    if main.single_channel {
        return Err(one_channel());
    }
    let mut end = pixels(fixed(main, 0)?);
    let mut views = Vec::with_capacity(extra.len());
    for (k, pipeline) in extra.iter().enumerate() {
        let plan = pipeline.plan(dtype)?;
        if plan.single_channel {
            return Err(one_channel());
        }
        let size = fixed(&plan, k + 1)?;
        let start = end;
        end += pixels(size);
        views.push(View {
            stage: PixelStage::new(dtype, layout, plan.normalize),
            plan,
            seed: crate::rng::view_seed(seed, k + 1),
            bytes: start..end,
            size,
        });
    }
    Ok((views, end))
}

impl View {
    /// Draws this view's plan for sample `index` of a `width`x`height` image.
    pub fn sample(
        &self,
        epoch: u64,
        index: usize,
        size: (u32, u32),
    ) -> Result<SamplePlan, AugmentError> {
        self.plan.sample(self.seed, epoch, index, size, None)
    }

    /// Draws and renders this view of the decoded `rgb` (`width`x`height`) into its part of
    /// `slot`.
    #[allow(clippy::too_many_arguments)]
    pub fn render(
        &self,
        epoch: u64,
        index: usize,
        rgb: &[u8],
        (width, height): (u32, u32),
        resampler: &mut Resampler,
        ops: &mut crate::augment::Scratch,
        slot: &mut [u8],
    ) -> Result<(), AugmentError> {
        let plan = self.sample(epoch, index, (width, height))?;
        let (oh, ow) = plan.pixels.resampled();
        resampler.set_size(oh, ow);
        let mut padded = Vec::new();
        let resized = match &plan.padding {
            Some(padding) => {
                let crop = compose_padded(&plan.crop, padding, rgb, width, height, &mut padded);
                let (w, h) = (crop.width as u32, crop.height as u32);
                resampler.run_with(&padded, w, h, &crop, plan.interpolation)?
            }
            None => resampler.run_with(rgb, width, height, &plan.crop, plan.interpolation)?,
        };
        let (mut reshaped, mut scratch) = (Vec::new(), Vec::new());
        let resized = match plan
            .pixels
            .reshape(resized, &mut reshaped, &mut scratch, ops)
        {
            true => &mut reshaped[..],
            false => resized,
        };
        self.stage.ops(resized, &plan.pixels, ops);
        self.stage
            .write(resized, &plan.pixels, &mut slot[self.bytes.clone()]);
        Ok(())
    }
}
