//! Calibration samples from a folder of images, preprocessed as declared in YAML.
//!
//! ```yaml
//! images:
//!   input: x            # which model input the tensor feeds
//!   size: [224, 224]    # H, W of the model input
//!   resize: letterbox   # resize | letterbox | resize-shorter-then-crop
//!   channels: rgb       # rgb | bgr | gray
//!   scale: 0.00392156862745098
//!   mean: [0.485, 0.456, 0.406]
//!   std: [0.229, 0.224, 0.225]
//!   layout: nchw        # nchw | nhwc
//!   dtype: f32          # f32 | f16 | u8
//!   batch: 1
//! ```
//!
//! Each pixel value `p` (0..=255) becomes `(p · scale − mean[c]) / std[c]`; `mean` and
//! `std` are listed in the order of the output channels (after the rgb/bgr choice).
//! Files are read in sorted name order (`.png`, `.jpg`, `.jpeg`, `.bmp`, `.webp`; other
//! files are skipped), so the same folder always gives the same samples.

mod folder;
mod preprocess;
mod spec;

pub use folder::ImageFolder;
pub use preprocess::preprocess;
pub use spec::{Channels, ImageDType, ImageSpec, Layout, ResizeMode};
