//! The YAML declaration of an image input and its validation.

use serde::Deserialize;

use crate::error::{CalibError, Result};

/// How an image is brought to the model's `size`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ResizeMode {
    /// Stretch to exactly H×W (bilinear, antialiased when shrinking, like PIL).
    #[default]
    Resize,
    /// Keep the aspect ratio, fit inside H×W, centre, fill the rest with `pad`.
    Letterbox,
    /// Scale the shorter side to `shorter` (keeping the aspect ratio), then crop the
    /// centre H×W (the ImageNet evaluation transform: 256 then 224).
    ResizeShorterThenCrop,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Channels {
    #[default]
    Rgb,
    Bgr,
    Gray,
}

impl Channels {
    pub fn count(self) -> usize {
        match self {
            Channels::Gray => 1,
            _ => 3,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    #[default]
    Nchw,
    Nhwc,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ImageDType {
    #[default]
    F32,
    F16,
    /// Raw pixels after resizing; `scale`, `mean` and `std` must stay at their defaults.
    U8,
}

/// One image input: where it goes and how pixels become tensor values.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSpec {
    /// Name of the model input.
    pub input: String,
    /// `[H, W]` of the model input.
    pub size: [u32; 2],
    #[serde(default)]
    pub resize: ResizeMode,
    /// Shorter-side length for `resize-shorter-then-crop` (default `max(H, W) / 0.875`,
    /// i.e. 256 for 224).
    #[serde(default)]
    pub shorter: Option<u32>,
    /// Fill value of `letterbox` borders, as a pixel value 0..=255 (default 114).
    #[serde(default = "default_pad")]
    pub pad: u8,
    #[serde(default)]
    pub channels: Channels,
    #[serde(default = "one")]
    pub scale: f32,
    #[serde(default)]
    pub mean: Option<Vec<f32>>,
    #[serde(default)]
    pub std: Option<Vec<f32>>,
    #[serde(default)]
    pub layout: Layout,
    #[serde(default)]
    pub dtype: ImageDType,
    /// Images per sample (the batch dimension).
    #[serde(default = "one_usize")]
    pub batch: usize,
    /// Drop a last, incomplete batch instead of emitting a smaller one (for models with
    /// a fixed batch size).
    #[serde(default)]
    pub drop_last: bool,
}

fn default_pad() -> u8 {
    114
}
fn one() -> f32 {
    1.0
}
fn one_usize() -> usize {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ImagesFile {
    images: ImageSpec,
}

impl ImageSpec {
    /// Parses a YAML document whose top-level key is `images:`; `origin` names the file
    /// in errors.
    pub fn from_yaml(text: &str, origin: &str) -> Result<ImageSpec> {
        let options = serde_saphyr::options! { strict_booleans: true };
        let file: ImagesFile = serde_saphyr::from_str_with_options(text, options).map_err(|e| {
            // serde-saphyr appends a source snippet; keep the first line, which carries
            // line and column.
            let msg = e.to_string();
            let first = msg.lines().next().unwrap_or("").trim();
            let first = first.strip_prefix("error: ").unwrap_or(first);
            CalibError::Config(format!("{origin}: {first}"))
        })?;
        file.images.validate().map_err(|e| match e {
            CalibError::Config(m) => CalibError::Config(format!("{origin}: {m}")),
            other => other,
        })?;
        Ok(file.images)
    }

    /// Checks the combination of settings.
    pub fn validate(&self) -> Result<()> {
        let bad = |m: String| Err(CalibError::Config(format!("images.{m}")));
        let [h, w] = self.size;
        if h == 0 || w == 0 {
            return bad(format!("size: [{h}, {w}] must be positive"));
        }
        if self.batch == 0 {
            return bad("batch: must be at least 1".into());
        }
        let c = self.channels.count();
        for (key, v) in [("mean", &self.mean), ("std", &self.std)] {
            if let Some(v) = v
                && v.len() != c
                && v.len() != 1
            {
                return bad(format!(
                    "{key}: {} values for {c} channel(s); give {c} (or one for all)",
                    v.len()
                ));
            }
        }
        if let Some(std) = &self.std
            && std.iter().any(|s| *s == 0.0 || !s.is_finite())
        {
            return bad("std: every value must be finite and non-zero".into());
        }
        if !(self.scale.is_finite() && self.scale != 0.0) {
            return bad(format!("scale: {} must be finite and non-zero", self.scale));
        }
        if self.dtype == ImageDType::U8
            && (self.scale != 1.0 || self.mean.is_some() || self.std.is_some())
        {
            return bad(
                "dtype: u8 feeds raw pixels; remove scale/mean/std or use dtype f32".into(),
            );
        }
        if let Some(s) = self.shorter {
            if self.resize != ResizeMode::ResizeShorterThenCrop {
                return bad("shorter: only used with resize: resize-shorter-then-crop".into());
            }
            if s < h.max(w) {
                return bad(format!(
                    "shorter: {s} is smaller than the crop size {}; it must be at least that",
                    h.max(w)
                ));
            }
        }
        Ok(())
    }

    /// Shorter-side length used by `resize-shorter-then-crop`.
    pub fn shorter_side(&self) -> u32 {
        self.shorter.unwrap_or_else(|| {
            let m = self.size[0].max(self.size[1]) as f64;
            (m / 0.875).round() as u32
        })
    }

    /// Per-channel mean and std, expanded to the channel count.
    pub(crate) fn normalization(&self) -> (Vec<f32>, Vec<f32>) {
        let c = self.channels.count();
        let expand = |v: &Option<Vec<f32>>, default: f32| match v {
            Some(v) if v.len() == 1 => vec![v[0]; c],
            Some(v) => v.clone(),
            None => vec![default; c],
        };
        (expand(&self.mean, 0.0), expand(&self.std, 1.0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXAMPLE: &str = "\
images:
  input: x            # which model input
  size: [224, 224]    # H, W
  resize: letterbox   # resize | letterbox | resize-shorter-then-crop
  channels: rgb       # rgb | bgr
  scale: 0.00392156862745098
  mean: [0.485, 0.456, 0.406]
  std: [0.229, 0.224, 0.225]
  layout: nchw
  dtype: f32
";

    #[test]
    fn parses_the_documented_example() {
        let s = ImageSpec::from_yaml(EXAMPLE, "calib.yaml").unwrap();
        assert_eq!(s.input, "x");
        assert_eq!(s.size, [224, 224]);
        assert_eq!(s.resize, ResizeMode::Letterbox);
        assert_eq!(s.channels, Channels::Rgb);
        assert_eq!(s.mean.as_deref(), Some(&[0.485, 0.456, 0.406][..]));
        assert_eq!(
            (s.layout, s.dtype, s.batch, s.pad),
            (Layout::Nchw, ImageDType::F32, 1, 114)
        );
        assert_eq!(s.shorter_side(), 256);
    }

    #[test]
    fn errors_name_the_file_and_line() {
        let typo = EXAMPLE.replace("layout: nchw", "layuot: nchw");
        let err = ImageSpec::from_yaml(&typo, "calib.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            err.starts_with("invalid calibration setting: calib.yaml:"),
            "{err}"
        );
        assert!(err.contains("layuot"), "{err}");
        assert!(err.contains("line 9") || err.contains(":9:"), "{err}");
        assert!(!err.contains('\n'), "{err}");
        let bad_mode = EXAMPLE.replacen("letterbox ", "stretch ", 1);
        let err = ImageSpec::from_yaml(&bad_mode, "c.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("stretch"), "{err}");
    }

    #[test]
    fn validation_explains_the_fix() {
        let two_means = EXAMPLE.replace("[0.485, 0.456, 0.406]", "[0.5, 0.5]");
        let err = ImageSpec::from_yaml(&two_means, "c.yaml")
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("images.mean: 2 values for 3 channel(s)"),
            "{err}"
        );
        let zero_std = EXAMPLE.replace("[0.229, 0.224, 0.225]", "[0.2, 0, 0.2]");
        assert!(ImageSpec::from_yaml(&zero_std, "c.yaml").is_err());
        let u8_scaled = EXAMPLE.replace("dtype: f32", "dtype: u8");
        let err = ImageSpec::from_yaml(&u8_scaled, "c.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("raw pixels"), "{err}");
        let small = EXAMPLE.replacen("letterbox ", "resize-shorter-then-crop\n  shorter: 200 ", 1);
        let err = ImageSpec::from_yaml(&small, "c.yaml")
            .unwrap_err()
            .to_string();
        assert!(err.contains("shorter: 200"), "{err}");
        let one_mean = EXAMPLE.replace("[0.485, 0.456, 0.406]", "[0.5]");
        let s = ImageSpec::from_yaml(&one_mean, "c.yaml").unwrap();
        assert_eq!(s.normalization().0, vec![0.5; 3]);
    }
}
