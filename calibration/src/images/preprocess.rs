//! One decoded image to the model's H×W×C values: geometry (resize / letterbox / shorter
//! side then centre crop), channel order, scale and per-channel normalization, layout.

use image::imageops::{self, FilterType};
use image::{DynamicImage, Rgb, RgbImage};

use super::spec::{Channels, ImageSpec, Layout, ResizeMode};

/// The image as `C·H·W` values in the spec's layout (without the batch dimension):
/// `(p · scale − mean[c]) / std[c]` for each pixel value `p` of output channel `c`.
pub fn preprocess(img: &DynamicImage, spec: &ImageSpec) -> Vec<f32> {
    let [h, w] = spec.size;
    let rgb = geometry(img.to_rgb8(), spec);
    debug_assert_eq!(rgb.dimensions(), (w, h));
    let gray;
    let (c, pixels): (usize, &[u8]) = match spec.channels {
        Channels::Gray => {
            gray = DynamicImage::ImageRgb8(rgb.clone()).to_luma8();
            (1, gray.as_raw())
        }
        _ => (3, rgb.as_raw()),
    };
    let (mean, std) = spec.normalization();
    let (h, w) = (h as usize, w as usize);
    let mut out = vec![0f32; c * h * w];
    for y in 0..h {
        for x in 0..w {
            let px = &pixels[(y * w + x) * c..(y * w + x + 1) * c];
            for oc in 0..c {
                // BGR reads the source channels in reverse.
                let src = if spec.channels == Channels::Bgr {
                    2 - oc
                } else {
                    oc
                };
                let v = (f32::from(px[src]) * spec.scale - mean[oc]) / std[oc];
                let at = match spec.layout {
                    Layout::Nchw => oc * h * w + y * w + x,
                    Layout::Nhwc => (y * w + x) * c + oc,
                };
                out[at] = v;
            }
        }
    }
    out
}

fn geometry(img: RgbImage, spec: &ImageSpec) -> RgbImage {
    let [h, w] = spec.size;
    let (iw, ih) = img.dimensions();
    match spec.resize {
        ResizeMode::Resize => resize(&img, w, h),
        ResizeMode::Letterbox => {
            let r = (f64::from(w) / f64::from(iw)).min(f64::from(h) / f64::from(ih));
            let nw = scaled(iw, r).min(w);
            let nh = scaled(ih, r).min(h);
            let inner = resize(&img, nw, nh);
            let mut canvas = RgbImage::from_pixel(w, h, Rgb([spec.pad; 3]));
            imageops::replace(
                &mut canvas,
                &inner,
                i64::from((w - nw) / 2),
                i64::from((h - nh) / 2),
            );
            canvas
        }
        ResizeMode::ResizeShorterThenCrop => {
            let r = f64::from(spec.shorter_side()) / f64::from(iw.min(ih));
            // At least the crop size, whatever rounding does to the longer side.
            let nw = scaled(iw, r).max(w);
            let nh = scaled(ih, r).max(h);
            let big = resize(&img, nw, nh);
            // Centre crop, offsets rounded as torchvision's CenterCrop does.
            let left = ((f64::from(nw - w)) / 2.0).round() as u32;
            let top = ((f64::from(nh - h)) / 2.0).round() as u32;
            imageops::crop_imm(&big, left, top, w, h).to_image()
        }
    }
}

fn scaled(len: u32, r: f64) -> u32 {
    ((f64::from(len) * r).round() as u32).max(1)
}

fn resize(img: &RgbImage, w: u32, h: u32) -> RgbImage {
    if img.dimensions() == (w, h) {
        return img.clone();
    }
    imageops::resize(img, w, h, FilterType::Triangle)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::images::spec::ImageDType;

    fn spec(size: [u32; 2], resize: ResizeMode) -> ImageSpec {
        ImageSpec {
            input: "x".into(),
            size,
            resize,
            shorter: None,
            pad: 114,
            channels: Channels::Rgb,
            scale: 1.0,
            mean: None,
            std: None,
            layout: Layout::Nchw,
            dtype: ImageDType::F32,
            batch: 1,
            drop_last: false,
        }
    }

    /// A w×h image whose pixel (x, y) is (10x + y, 100 + y, 200 - x).
    fn ramp(w: u32, h: u32) -> DynamicImage {
        DynamicImage::ImageRgb8(RgbImage::from_fn(w, h, |x, y| {
            Rgb([(10 * x + y) as u8, (100 + y) as u8, (200 - x) as u8])
        }))
    }

    #[test]
    fn layout_channel_order_and_normalization() {
        let img = ramp(3, 2);
        let s = spec([2, 3], ResizeMode::Resize);
        let v = preprocess(&img, &s);
        // NCHW: channel 0 plane first, row-major.
        assert_eq!(&v[..6], &[0.0, 10.0, 20.0, 1.0, 11.0, 21.0]);
        assert_eq!(&v[6..9], &[100.0, 100.0, 100.0]);
        assert_eq!(v[12], 200.0);
        let nhwc = preprocess(
            &img,
            &ImageSpec {
                layout: Layout::Nhwc,
                ..s.clone()
            },
        );
        assert_eq!(&nhwc[..6], &[0.0, 100.0, 200.0, 10.0, 100.0, 199.0]);
        let bgr = preprocess(
            &img,
            &ImageSpec {
                channels: Channels::Bgr,
                layout: Layout::Nhwc,
                ..s.clone()
            },
        );
        assert_eq!(&bgr[..3], &[200.0, 100.0, 0.0]);
        let norm = ImageSpec {
            scale: 0.5,
            mean: Some(vec![1.0, 2.0, 3.0]),
            std: Some(vec![2.0, 4.0, 8.0]),
            layout: Layout::Nhwc,
            ..s.clone()
        };
        let n = preprocess(&img, &norm);
        // (10 · 0.5 − 1) / 2, (100 · 0.5 − 2) / 4, (199 · 0.5 − 3) / 8 at pixel (1, 0).
        assert_eq!(&n[3..6], &[2.0, 12.0, (99.5 - 3.0) / 8.0]);
        let gray = preprocess(
            &img,
            &ImageSpec {
                channels: Channels::Gray,
                ..s
            },
        );
        assert_eq!(gray.len(), 6);
    }

    #[test]
    fn resize_is_exact_size_and_keeps_flat_colour() {
        let flat = DynamicImage::ImageRgb8(RgbImage::from_pixel(37, 23, Rgb([9, 80, 250])));
        let v = preprocess(&flat, &spec([16, 8], ResizeMode::Resize));
        assert_eq!(v.len(), 3 * 16 * 8);
        assert!(v[..128].iter().all(|&x| x == 9.0));
        assert!(v[256..].iter().all(|&x| x == 250.0));
    }

    #[test]
    fn letterbox_keeps_aspect_and_pads_centred() {
        // 4 wide, 2 high into 4×4: content rows 1..3, pad rows 0 and 3.
        let img = ramp(4, 2);
        let s = ImageSpec {
            pad: 7,
            ..spec([4, 4], ResizeMode::Letterbox)
        };
        let v = preprocess(&img, &s);
        let plane0 = &v[..16];
        assert_eq!(&plane0[..4], &[7.0; 4]);
        assert_eq!(&plane0[12..], &[7.0; 4]);
        assert_eq!(&plane0[4..8], &[0.0, 10.0, 20.0, 30.0]);
        assert_eq!(&plane0[8..12], &[1.0, 11.0, 21.0, 31.0]);
    }

    #[test]
    fn shorter_side_then_centre_crop() {
        // 8×4 with shorter side 4: no resize, crop columns 2..6.
        let img = ramp(8, 4);
        let s = ImageSpec {
            shorter: Some(4),
            ..spec([4, 4], ResizeMode::ResizeShorterThenCrop)
        };
        let v = preprocess(&img, &s);
        assert_eq!(&v[..4], &[20.0, 30.0, 40.0, 50.0]);
        // Default shorter side 4/0.875 = 5 (rounded): 10×5, then a 4×4 crop.
        let v = preprocess(&img, &spec([4, 4], ResizeMode::ResizeShorterThenCrop));
        assert_eq!(v.len(), 48);
    }
}
