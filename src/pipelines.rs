//! Ready-made pipelines. Each is a file in the repository's `pipelines/` folder, compiled in and
//! parsed through the same public API as a user's own file ([`Pipeline::from_toml`]).

use crate::augment::{Pipeline, PipelineError};
use crate::Error;

const BUILTIN: &[(&str, &str)] = &[
    (
        "resnet50_train",
        include_str!("../pipelines/resnet50_train.toml"),
    ),
    (
        "resnet50_eval",
        include_str!("../pipelines/resnet50_eval.toml"),
    ),
    (
        "resnet50_v2_train",
        include_str!("../pipelines/resnet50_v2_train.toml"),
    ),
    (
        "resnet50_train_jitter",
        include_str!("../pipelines/resnet50_train_jitter.toml"),
    ),
    ("timm_train", include_str!("../pipelines/timm_train.toml")),
    (
        "timm_rand_augment_train",
        include_str!("../pipelines/timm_rand_augment_train.toml"),
    ),
    (
        "ssd300_train",
        include_str!("../pipelines/ssd300_train.toml"),
    ),
    (
        "ssd300_habana",
        include_str!("../pipelines/ssd300_habana.toml"),
    ),
    ("lsj_train", include_str!("../pipelines/lsj_train.toml")),
];

/// Other names of built-in pipelines: `ssd300` is the SSD training preset.
const ALIASES: &[(&str, &str)] = &[("ssd300", "ssd300_train")];

/// ResNet-50 training: RandomResizedCrop 224 (scale 0.08-1, ratio 3/4-4/3), horizontal flip
/// p = 0.5, ImageNet normalization.
pub fn resnet50_train() -> Pipeline {
    builtin("resnet50_train").expect("built-in pipeline parses (tested)")
}

/// ResNet-50 evaluation: resize the shorter side to 256, center crop 224, ImageNet
/// normalization.
pub fn resnet50_eval() -> Pipeline {
    builtin("resnet50_eval").expect("built-in pipeline parses (tested)")
}

/// Names of the built-in pipelines.
pub fn names() -> impl Iterator<Item = &'static str> {
    BUILTIN.iter().map(|(n, _)| *n)
}

/// Every name [`builtin`] takes: the built-in pipelines, then their aliases.
pub fn all_names() -> impl Iterator<Item = &'static str> {
    names().chain(ALIASES.iter().map(|(alias, _)| *alias))
}

/// A built-in pipeline by name.
///
/// # Errors
/// [`Error::Pipeline`] for an unknown name.
pub fn builtin(name: &str) -> Result<Pipeline, Error> {
    let name = ALIASES
        .iter()
        .find(|(alias, _)| *alias == name)
        .map_or(name, |(_, target)| *target);
    let (_, text) = BUILTIN
        .iter()
        .find(|(n, _)| *n == name)
        .ok_or_else(|| Error::Pipeline {
            name: name.to_string(),
            reason: PipelineError::Unknown(format!(
                "no such built-in pipeline (built-in: {})",
                all_names().collect::<Vec<_>>().join(", ")
            )),
        })?;
    Pipeline::from_toml(text, name)
}

/// A built-in pipeline name, or else the path of a pipeline file.
///
/// # Errors
/// Neither a built-in name nor a readable, valid pipeline file.
pub fn resolve(name_or_file: &str) -> Result<Pipeline, Error> {
    if all_names().any(|n| n == name_or_file) {
        return builtin(name_or_file);
    }
    if std::path::Path::new(name_or_file).exists() {
        return Pipeline::from_file(name_or_file);
    }
    builtin(name_or_file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::augment::{
        CenterCrop, Interpolation, Normalize, Op, RandomHorizontalFlip, RandomResizedCrop, Resize,
        Size,
    };

    #[test]
    fn builtin_files_parse_to_the_documented_ops() {
        let train = resnet50_train();
        assert_eq!(
            train.ops,
            vec![
                Op::RandomResizedCrop(RandomResizedCrop {
                    size: Size::Square(224),
                    scale: [0.08, 1.0],
                    ratio: [3.0 / 4.0, 4.0 / 3.0],
                    interpolation: Interpolation::Bilinear,
                }),
                Op::RandomHorizontalFlip(RandomHorizontalFlip { p: 0.5 }),
                Op::Normalize(Normalize::imagenet()),
            ]
        );
        let eval = resnet50_eval();
        assert_eq!(
            eval.ops[..2],
            [
                Op::Resize(Resize {
                    size: Size::Square(256),
                    interpolation: Interpolation::Bilinear,
                }),
                Op::CenterCrop(CenterCrop {
                    size: Size::Square(224),
                    pad: false,
                    floor: false,
                })
            ]
        );
    }

    #[test]
    fn every_builtin_parses_and_plans() {
        for name in names() {
            let p = builtin(name).unwrap();
            assert!(p.plan(crate::hpu::Dtype::Bf16).is_ok(), "{name}");
        }
    }

    #[test]
    fn ssd300_names_the_ssd_training_preset() {
        assert_eq!(resolve("ssd300").unwrap(), builtin("ssd300_train").unwrap());
    }

    #[test]
    fn unknown_name_lists_the_builtins() {
        let e = resolve("resnet51").unwrap_err().to_string();
        assert!(
            e.contains("resnet50_train") && e.contains("resnet50_eval"),
            "{e}"
        );
    }
}
