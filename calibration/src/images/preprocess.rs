//! One decoded image to the model's H×W×C values: geometry (resize / letterbox / shorter
//! side then centre crop), channel order, scale and per-channel normalization, layout.

use image::imageops::{self, FilterType};
use image::{DynamicImage, Rgb, RgbImage};

use super::spec::{Channels, ImageSpec, Interpolation, Layout, ResizeMode};

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
        ResizeMode::Resize => resize(&img, w, h, spec.interpolation),
        ResizeMode::Letterbox => {
            let r = (f64::from(w) / f64::from(iw)).min(f64::from(h) / f64::from(ih));
            let nw = scaled(iw, r).min(w);
            let nh = scaled(ih, r).min(h);
            let inner = resize(&img, nw, nh, spec.interpolation);
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
            // As torchvision's Resize(int): the shorter side becomes exactly `shorter`,
            // the longer one `⌊shorter · long / short⌋` (truncated, not rounded).
            let s = spec.shorter_side();
            let along = |len: u32, other: u32| {
                if len <= other {
                    s
                } else {
                    (u64::from(s) * u64::from(len) / u64::from(other)) as u32
                }
            };
            // At least the crop size, whatever the arithmetic does to the longer side.
            let nw = along(iw, ih).max(w);
            let nh = along(ih, iw).max(h);
            let big = resize(&img, nw, nh, spec.interpolation);
            // Centre crop, offsets rounded half-to-even as torchvision's CenterCrop
            // (Python's round) does.
            let left = (f64::from(nw - w) / 2.0).round_ties_even() as u32;
            let top = (f64::from(nh - h) / 2.0).round_ties_even() as u32;
            imageops::crop_imm(&big, left, top, w, h).to_image()
        }
    }
}

/// `len · r` rounded half-to-even (as the Python letterbox implementations round).
fn scaled(len: u32, r: f64) -> u32 {
    ((f64::from(len) * r).round_ties_even() as u32).max(1)
}

fn resize(img: &RgbImage, w: u32, h: u32, interpolation: Interpolation) -> RgbImage {
    if img.dimensions() == (w, h) {
        return img.clone();
    }
    match interpolation {
        Interpolation::Bilinear => imageops::resize(img, w, h, FilterType::Triangle),
        Interpolation::OpencvLinear => opencv_linear(img, w, h),
    }
}

/// Source index and weight of the next pixel for destination index `d`, as OpenCV's
/// `INTER_LINEAR` computes them: half-pixel centres, clamped at the borders.
fn linear_tap(d: u32, scale: f64, len: u32) -> (u32, u32, f32) {
    let f = (f64::from(d) + 0.5) * scale - 0.5;
    let s = f.floor();
    if s < 0.0 {
        return (0, 0, 0.0);
    }
    let s0 = s as u32;
    if s0 >= len - 1 {
        return (len - 1, len - 1, 0.0);
    }
    (s0, s0 + 1, (f - s) as f32)
}

/// Bilinear without antialiasing (OpenCV's float formulation; its u8 path uses 11-bit
/// fixed-point weights, so results can differ by one level).
fn opencv_linear(img: &RgbImage, w: u32, h: u32) -> RgbImage {
    let (iw, ih) = img.dimensions();
    let (sx, sy) = (f64::from(iw) / f64::from(w), f64::from(ih) / f64::from(h));
    let cols: Vec<_> = (0..w).map(|x| linear_tap(x, sx, iw)).collect();
    RgbImage::from_fn(w, h, |x, y| {
        let (y0, y1, fy) = linear_tap(y, sy, ih);
        let (x0, x1, fx) = cols[x as usize];
        let p = |x, y| img.get_pixel(x, y).0.map(f32::from);
        let (a, b, c, d) = (p(x0, y0), p(x1, y0), p(x0, y1), p(x1, y1));
        Rgb(std::array::from_fn(|k| {
            let top = a[k] + (b[k] - a[k]) * fx;
            let bottom = c[k] + (d[k] - c[k]) * fx;
            (top + (bottom - top) * fy).round().clamp(0.0, 255.0) as u8
        }))
    })
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
            interpolation: Interpolation::Bilinear,
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
    fn opencv_linear_interpolates_between_neighbours_without_antialiasing() {
        // 4 columns 0, 40, 80, 120 halved: destination pixel x samples source 2x + 0.5,
        // halfway between columns 2x and 2x + 1.
        let img = DynamicImage::ImageRgb8(RgbImage::from_fn(4, 1, |x, _| Rgb([(40 * x) as u8; 3])));
        let s = ImageSpec {
            interpolation: Interpolation::OpencvLinear,
            ..spec([1, 2], ResizeMode::Resize)
        };
        assert_eq!(&preprocess(&img, &s)[..2], &[20.0, 100.0]);
        // Upscaling 2 -> 4: taps at -0.25 (clamped), 0.25, 0.75, 1.25 (clamped).
        let img =
            DynamicImage::ImageRgb8(RgbImage::from_fn(2, 1, |x, _| Rgb([(100 * x) as u8; 3])));
        let s = ImageSpec {
            interpolation: Interpolation::OpencvLinear,
            ..spec([1, 4], ResizeMode::Resize)
        };
        assert_eq!(&preprocess(&img, &s)[..4], &[0.0, 25.0, 75.0, 100.0]);
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
        // Default shorter side 4/0.875 = 5 (rounded): 10×5, then a 4×4 crop at column
        // round_half_even(3) = 3, row round_half_even(0.5) = 0.
        let v = preprocess(&img, &spec([4, 4], ResizeMode::ResizeShorterThenCrop));
        assert_eq!(v.len(), 48);
        // 9 wide, 4 high, shorter 4: 9×4, crop offset (9 - 4) / 2 = 2.5 -> 2 (half to even).
        let s = ImageSpec {
            shorter: Some(4),
            ..spec([4, 4], ResizeMode::ResizeShorterThenCrop)
        };
        let v = preprocess(&ramp(9, 4), &s);
        assert_eq!(&v[..4], &[20.0, 30.0, 40.0, 50.0]);
    }
}
