//! Calibration samples from a folder of images, preprocessed as declared in YAML.
//!
//! ```yaml
//! images:
//!   input: x            # which model input the tensor feeds
//!   size: [224, 224]    # H, W of the model input
//!   resize: letterbox   # resize | letterbox | resize-shorter-then-crop
//!   interpolation: bilinear  # bilinear (PIL, antialiased) | opencv-linear (cv2.INTER_LINEAR)
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
//! Checked against other pipelines by `tests/data/compare_preprocessing.py`: `resize`
//! and `resize-shorter-then-crop` are within one pixel level of PIL's `BILINEAR` (and
//! torchvision's Resize + CenterCrop arithmetic); `opencv-linear` resizes and letterboxes
//! within one level of `cv2.INTER_LINEAR` and a YOLO-style `cv2` letterbox.
//!
//! Files are read in sorted name order (`.png`, `.jpg`, `.jpeg`, `.bmp`, `.webp`; other
//! files are skipped), so the same folder always gives the same samples.

mod folder;
mod preprocess;
mod spec;

pub use folder::{ImageFolder, is_image_file};
pub use preprocess::preprocess;
pub use spec::{Channels, ImageDType, ImageSpec, Interpolation, Layout, ResizeMode};
