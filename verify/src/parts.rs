//! The parts of an output that hold different quantities, so that each is
//! judged on its own: a detector's `[1, 4 + C, N]` output puts box
//! coordinates (pixels, 0..320) next to class scores (0..1), and one cosine
//! over the whole tensor is the boxes' alone: on nudenet (YOLOv8n) it read
//! 0.9999 while a third of the detections were lost, because the scores'
//! error was invisible next to the coordinates' magnitude.
//!
//! An output is split along one axis into contiguous runs of indices whose
//! slices are of one kind: bounded in [0, 1] (scores, probabilities) next
//! to slices that are not, or, failing that, slices whose scales (largest
//! magnitude) are far apart. A split into more than [`MAX_PARTS`] runs is
//! taken as the ordinary variation of a feature map's channels, not as
//! different quantities, and the output stays whole. An output bounded in
//! [0, 1] as a whole (a probability map) is one part of scores.
//!
//! Scores are judged where they matter: see [`ACTIVE_FRACTION`].

/// What a part holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PartKind {
    /// Values in [0, 1]: judged on the positions where either model scores
    /// above [`ACTIVE_FRACTION`] of the part's largest score.
    Scores,
    /// Any other quantity: judged over every element.
    Values,
}

/// Indices `start..end` along `axis` (the whole output when `axis` is None).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Part {
    pub axis: Option<usize>,
    pub start: usize,
    pub end: usize,
    pub kind: PartKind,
}

impl Part {
    /// `output[:, 4:22]`-style label (`output (scores)` for a whole output).
    pub fn label(&self, output: &str, rank: usize) -> String {
        let kind = match self.kind {
            PartKind::Scores => "scores",
            PartKind::Values => "values",
        };
        match self.axis {
            None => format!("{output} ({kind})"),
            Some(a) => {
                let mut idx: Vec<String> = vec![":".into(); rank.max(a + 1)];
                idx[a] = format!("{}:{}", self.start, self.end);
                format!("{output}[{}] ({kind})", idx.join(", "))
            }
        }
    }

    /// Calls `f` with every contiguous run of elements of the part in a
    /// row-major tensor of `shape`, as a range of flat indices.
    pub fn for_each_run(&self, shape: &[usize], mut f: impl FnMut(std::ops::Range<usize>)) {
        let total: usize = shape.iter().product();
        let Some(axis) = self.axis else {
            f(0..total);
            return;
        };
        let len = shape.get(axis).copied().unwrap_or(1);
        let inner: usize = shape.iter().skip(axis + 1).product();
        if len == 0 || inner == 0 {
            return;
        }
        let outer = total / (len * inner);
        for o in 0..outer {
            let base = o * len * inner;
            f(base + self.start * inner..base + self.end * inner);
        }
    }
}

/// More runs than this along an axis are one quantity varying, not several
/// quantities side by side.
pub const MAX_PARTS: usize = 4;

/// Scales this far apart (largest magnitude of one run's slices against
/// another's) are different quantities.
pub const SCALE_GAP: f64 = 16.0;

/// A run next to scores is a different quantity only when its values leave
/// [0, 1] by this much (largest magnitude): not a score that overshoots
/// by rounding.
const UNBOUNDED_SCALE: f64 = 2.0;

/// Scores are judged on the positions where either model scores above this
/// fraction of the largest score there can be (1): the few high scores
/// that decide a detection or a text region, not the many near-zero ones
/// (an image without objects has only those, and their error decides
/// nothing). The positions judged are counted in the report.
pub const ACTIVE_FRACTION: f64 = 0.05;

/// Axes longer than this are positions (pixels, anchors, time steps), not
/// fields of different quantities: a scale split there would cut a map
/// into its busy and its quiet regions.
pub const MAX_FIELDS: usize = 256;

/// A run whose slices all lie below this fraction of the largest scale
/// holds (near) zeros: a block of zeros next to a signal is not a second
/// quantity.
const SILENT: f64 = 1e-3;

/// The rows of a sample: the length of its inputs' first axis, when every
/// input has one and they agree.
pub fn batch_of<'a>(shapes: impl Iterator<Item = &'a [usize]>) -> Option<usize> {
    let mut batch = None;
    for s in shapes {
        let first = *s.first()?;
        if batch.is_some_and(|b| b != first) {
            return None;
        }
        batch = Some(first);
    }
    batch
}

/// Per index along one axis: smallest and largest value, largest magnitude.
struct SliceStats {
    min: Vec<f64>,
    max: Vec<f64>,
}

impl SliceStats {
    fn along(shape: &[usize], values: &[f64], axis: usize) -> SliceStats {
        let len = shape[axis];
        let inner: usize = shape[axis + 1..].iter().product();
        let mut min = vec![f64::INFINITY; len];
        let mut max = vec![f64::NEG_INFINITY; len];
        for (e, &v) in values.iter().enumerate() {
            if !v.is_finite() {
                continue;
            }
            let i = (e / inner.max(1)) % len;
            min[i] = min[i].min(v);
            max[i] = max[i].max(v);
        }
        SliceStats { min, max }
    }

    fn bounded(&self, i: usize) -> bool {
        self.min[i] >= 0.0 && self.max[i] <= 1.0
    }

    fn scale(&self, i: usize) -> f64 {
        self.min[i].abs().max(self.max[i].abs())
    }
}

/// Contiguous runs of equal `class` values: `(start, end, class)`.
fn runs(class: &[bool]) -> Vec<(usize, usize, bool)> {
    let mut out: Vec<(usize, usize, bool)> = Vec::new();
    for (i, &c) in class.iter().enumerate() {
        match out.last_mut() {
            Some(last) if last.2 == c => last.1 = i + 1,
            _ => out.push((i, i + 1, c)),
        }
    }
    out
}

/// Scores next to other quantities along `axis` (not a long axis: see
/// [`MAX_FIELDS`]).
fn bounded_split(s: &SliceStats) -> Option<Vec<Part>> {
    let n = s.min.len();
    if n > MAX_FIELDS {
        return None;
    }
    let bounded: Vec<bool> = (0..n).map(|i| s.bounded(i)).collect();
    let r = runs(&bounded);
    if r.len() < 2 || r.len() > MAX_PARTS {
        return None;
    }
    let unbounded_scale = (0..n)
        .filter(|&i| !bounded[i])
        .map(|i| s.scale(i))
        .fold(0.0, f64::max);
    if unbounded_scale < UNBOUNDED_SCALE {
        return None;
    }
    // Zeros (a ReLU's dead channels) are not scores.
    let silent =
        |&(start, end, b): &(usize, usize, bool)| b && (start..end).all(|i| s.max[i] <= SILENT);
    if r.iter().any(silent) {
        return None;
    }
    Some(
        r.into_iter()
            .map(|(start, end, b)| Part {
                axis: None,
                start,
                end,
                kind: if b {
                    PartKind::Scores
                } else {
                    PartKind::Values
                },
            })
            .collect(),
    )
}

/// Quantities of far apart scales along `axis`: the largest gap between
/// the sorted scales of the slices splits them in two, when it is at least
/// [`SCALE_GAP`] and the two sides lie in few runs, each with a signal (see
/// [`SILENT`]). Not on long axes ([`MAX_FIELDS`]), and not among scores
/// alone (a probability map's busy and quiet rows are one quantity).
fn scale_split(s: &SliceStats) -> Option<Vec<Part>> {
    let n = s.min.len();
    if n > MAX_FIELDS || (0..n).all(|i| s.bounded(i)) {
        return None;
    }
    let scales: Vec<f64> = (0..n).map(|i| s.scale(i)).collect();
    let top = scales.iter().copied().fold(0.0, f64::max);
    if !(top > 0.0 && top.is_finite()) {
        return None;
    }
    let floored: Vec<f64> = scales.iter().map(|&x| x.max(top * SILENT)).collect();
    let mut sorted = floored.clone();
    sorted.sort_by(f64::total_cmp);
    let (gap, at) = sorted
        .windows(2)
        .map(|w| (w[1] / w[0], w[1]))
        .fold((1.0, 0.0), |best, x| if x.0 > best.0 { x } else { best });
    if gap < SCALE_GAP {
        return None;
    }
    let large: Vec<bool> = floored.iter().map(|&x| x >= at).collect();
    let r = runs(&large);
    if r.len() < 2 || r.len() > MAX_PARTS {
        return None;
    }
    let silent =
        |&(start, end, _): &(usize, usize, bool)| (start..end).all(|i| scales[i] <= top * SILENT);
    if r.iter().any(silent) {
        return None;
    }
    Some(
        r.into_iter()
            .map(|(start, end, _)| Part {
                axis: None,
                start,
                end,
                kind: if (start..end).all(|i| s.bounded(i)) {
                    PartKind::Scores
                } else {
                    PartKind::Values
                },
            })
            .collect(),
    )
}

/// The parts of an output of `shape` judged on their own, found from the
/// original model's `values`; empty when the output is one quantity that
/// is judged whole as before. `whole_scores`: an output bounded in [0, 1]
/// as a whole is one part of scores (false for classifier outputs, which
/// are judged by top-1 agreement).
///
/// `batch`, the rows of the samples (the length of every input's first
/// axis, when they share one): a first axis of that length holds the rows,
/// one prediction each, not fields (a regressor's `[8, 1]` output, whose
/// first row fell in [0, 1] on the first sample, was judged as a score row
/// and failed an INT8 model that quantized nothing).
pub fn find_parts(
    shape: &[usize],
    values: &[f64],
    whole_scores: bool,
    batch: Option<usize>,
) -> Vec<Part> {
    if values.len() < 2 || shape.iter().product::<usize>() != values.len() {
        return Vec::new();
    }
    let rows = |a: usize| a == 0 && batch.is_some_and(|b| b >= 2 && shape[0] == b);
    let axes: Vec<usize> = (0..shape.len())
        .filter(|&a| shape[a] >= 2 && !rows(a))
        .collect();
    let stats: Vec<(usize, SliceStats)> = axes
        .iter()
        .map(|&a| (a, SliceStats::along(shape, values, a)))
        .collect();
    let split = stats
        .iter()
        .find_map(|(a, s)| bounded_split(s).map(|p| (*a, p)))
        .or_else(|| {
            stats
                .iter()
                .find_map(|(a, s)| scale_split(s).map(|p| (*a, p)))
        });
    if let Some((axis, parts)) = split {
        return parts
            .into_iter()
            .map(|p| Part {
                axis: Some(axis),
                ..p
            })
            .collect();
    }
    let bounded = values.iter().all(|v| (0.0..=1.0).contains(v));
    let varies = values.iter().any(|&v| v != values[0]);
    if whole_scores && bounded && varies {
        return vec![Part {
            axis: None,
            start: 0,
            end: 1,
            kind: PartKind::Scores,
        }];
    }
    Vec::new()
}

/// Rows per sample from which a classifier output is a dense prediction (a
/// class per anchor or per pixel, an SSD's `[1, 4420, 2]`), not one
/// answer per sample.
pub const DENSE_ROWS: usize = 256;

/// The parts of a dense classifier output's probabilities judged as scores
/// beside its top-1 agreement: its top class per row is mostly the
/// background, whose agreement says nothing of the few rows that are
/// detections (Ultra-Light-Fast's face detector: top-1 agreement 0.9994
/// over 4420 anchors, while 1.6% of the faces found at its 0.7 threshold
/// changed). Along the class axis, every class but a background one (a
/// column whose mean probability is above one half), each run of them a
/// part of scores. Empty for fewer than [`DENSE_ROWS`] rows per sample
/// (`batch` rows per output), and for values outside [0, 1] (logits).
pub fn dense_classifier_parts(
    shape: &[usize],
    values: &[f64],
    classes: usize,
    batch: Option<usize>,
) -> Vec<Part> {
    let Some(&last) = shape.last() else {
        return Vec::new();
    };
    if classes < 2 || last != classes || values.is_empty() || !values.len().is_multiple_of(classes)
    {
        return Vec::new();
    }
    let rows = values.len() / classes;
    if rows / batch.unwrap_or(1).max(1) < DENSE_ROWS {
        return Vec::new();
    }
    if !values.iter().all(|v| (0.0..=1.0).contains(v)) {
        return Vec::new();
    }
    let mut sums = vec![0.0; classes];
    for row in values.chunks(classes) {
        for (s, v) in sums.iter_mut().zip(row) {
            *s += v;
        }
    }
    let foreground: Vec<bool> = sums.iter().map(|s| s / rows as f64 <= 0.5).collect();
    runs(&foreground)
        .into_iter()
        .filter(|&(_, _, kept)| kept)
        .map(|(start, end, _)| Part {
            axis: Some(shape.len() - 1),
            start,
            end,
            kind: PartKind::Scores,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A YOLO-style `[1, rows, anchors]` output: 4 coordinate rows in
    /// pixels, then class scores.
    fn detector(classes: usize, anchors: usize) -> (Vec<usize>, Vec<f64>) {
        let rows = 4 + classes;
        let mut v = Vec::with_capacity(rows * anchors);
        for r in 0..rows {
            for a in 0..anchors {
                v.push(if r < 4 {
                    (a * 7 + r * 13) as f64 % 320.0
                } else {
                    ((a + r) % 10) as f64 / 10.0
                });
            }
        }
        (vec![1, rows, anchors], v)
    }

    #[test]
    fn a_detector_output_splits_into_coordinates_and_scores() {
        let (shape, v) = detector(3, 50);
        let parts = find_parts(&shape, &v, true, None);
        assert_eq!(
            parts,
            vec![
                Part {
                    axis: Some(1),
                    start: 0,
                    end: 4,
                    kind: PartKind::Values
                },
                Part {
                    axis: Some(1),
                    start: 4,
                    end: 7,
                    kind: PartKind::Scores
                },
            ]
        );
        assert_eq!(parts[1].label("output0", 3), "output0[:, 4:7, :] (scores)");
        // The elements of the scores: rows 4..7 of the one batch.
        let mut seen = Vec::new();
        parts[1].for_each_run(&shape, |r| seen.push(r));
        assert_eq!(seen, vec![200..350]);
        // Along a long axis (positions, not fields) nothing splits.
        let n = MAX_FIELDS + 1;
        let v: Vec<f64> = (0..2 * n)
            .map(|e| if e < n { 0.5 } else { 300.0 })
            .collect();
        assert!(find_parts(&[1, n, 2], &v, true, None).is_empty());
    }

    #[test]
    fn scores_that_only_overshoot_a_little_are_not_a_second_quantity() {
        // Rows in [0, 1] next to rows reaching 1.5: one quantity.
        let shape = vec![1, 4, 3];
        let v = [0.1, 0.5, 0.9, 0.2, 1.5, 0.3, 0.0, 0.4, 0.8, 1.2, 0.1, 0.7];
        assert!(find_parts(&shape, &v, false, None).is_empty());
    }

    #[test]
    fn far_apart_scales_split_and_a_feature_map_does_not() {
        // Rows 0..2 around 1000, rows 2..4 around 1 (negative: not scores).
        let shape = vec![4, 3];
        let v = [
            900.0, -1000.0, 950.0, 800.0, 1000.0, -700.0, 0.5, -3.0, 0.7, -0.9, 0.2, 2.0,
        ];
        let parts = find_parts(&shape, &v, true, None);
        assert_eq!(parts.len(), 2, "{parts:?}");
        assert_eq!(
            (parts[0].axis, parts[0].start, parts[0].end),
            (Some(0), 0, 2)
        );
        assert_eq!(parts[1].kind, PartKind::Values);
        // Channels whose scales alternate are one feature map, however far
        // apart: more than MAX_PARTS runs.
        let shape = vec![1, 8, 2];
        let v: Vec<f64> = (0..16)
            .map(|e| if (e / 2) % 2 == 0 { 100.0 } else { 0.5 })
            .collect();
        assert!(find_parts(&shape, &v, true, None).is_empty());
        // Scales within SCALE_GAP: one quantity.
        let v = [-1.0, 2.0, -10.0, 12.0];
        assert!(find_parts(&[4], &v, false, None).is_empty());
        // A block of zeros next to a signal: one quantity.
        let v = [0.0, 0.0, -3.0, 5.0];
        assert!(find_parts(&[4], &v, false, None).is_empty());
        // A long axis is positions, not fields.
        let mut v = vec![-1000.0; MAX_FIELDS + 1];
        v[0] = -10.0;
        assert!(find_parts(&[MAX_FIELDS + 1], &v, false, None).is_empty());
        v.truncate(MAX_FIELDS);
        assert_eq!(find_parts(&[MAX_FIELDS], &v, false, None).len(), 2);
    }

    #[test]
    fn the_rows_of_a_batch_are_predictions_not_fields() {
        // A regressor's [8, 1] output: the first row in [0, 1], the others
        // not; split along axis 0 unless that axis is the samples' rows.
        let v = [0.5, 3.0, 7.0, 2.0, 9.0, 4.0, 6.0, 8.0];
        assert_eq!(find_parts(&[8, 1], &v, true, None).len(), 2);
        assert!(find_parts(&[8, 1], &v, true, Some(8)).is_empty());
        // A detector's [84, N] output (batch squeezed) is still split along
        // its first axis: its length is not the rows'.
        let mut d = vec![0.5; 4 * 3];
        d[..6].copy_from_slice(&[300.0, 10.0, 200.0, 40.0, 100.0, 80.0]);
        assert_eq!(find_parts(&[4, 3], &d, true, Some(1)).len(), 2);
        assert_eq!(batch_of([&[8usize, 64][..], &[8, 2]].into_iter()), Some(8));
        assert_eq!(batch_of([&[8usize, 64][..], &[1, 2]].into_iter()), None);
        assert_eq!(batch_of([&[][..]].into_iter()), None);
    }

    #[test]
    fn a_dense_classifier_judges_its_classes_but_the_background_as_scores() {
        // [1, 300, 2]: background then face, a few anchors on a face.
        let mut v = Vec::new();
        for i in 0..300 {
            let face = if i % 50 == 0 { 0.9 } else { 0.01 };
            v.extend([1.0 - face, face]);
        }
        let parts = dense_classifier_parts(&[1, 300, 2], &v, 2, Some(1));
        assert_eq!(
            parts,
            vec![Part {
                axis: Some(2),
                start: 1,
                end: 2,
                kind: PartKind::Scores
            }]
        );
        assert_eq!(parts[0].label("scores", 3), "scores[:, :, 1:2] (scores)");
        let mut seen = Vec::new();
        parts[0].for_each_run(&[1, 3, 2], |r| seen.push(r));
        assert_eq!(seen, vec![1..2, 3..4, 5..6]);
        // Background in the middle of four classes: the runs either side.
        let mut w = Vec::new();
        for _ in 0..300 {
            w.extend([0.05, 0.05, 0.85, 0.05]);
        }
        let spans: Vec<(usize, usize)> = dense_classifier_parts(&[300, 4], &w, 4, None)
            .iter()
            .map(|p| (p.start, p.end))
            .collect();
        assert_eq!(spans, vec![(0, 2), (3, 4)]);
        // A class above one half on average is the background, whatever its
        // index; with none, every class is one part.
        let u: Vec<f64> = (0..600)
            .map(|i| if i % 2 == 0 { 0.4 } else { 0.6 })
            .collect();
        let even = dense_classifier_parts(&[300, 2], &u[..600], 2, None);
        assert_eq!(even.len(), 1);
        assert_eq!((even[0].start, even[0].end), (0, 1));
        let flat = vec![0.5; 600];
        let spans: Vec<(usize, usize)> = dense_classifier_parts(&[300, 2], &flat, 2, None)
            .iter()
            .map(|p| (p.start, p.end))
            .collect();
        assert_eq!(spans, vec![(0, 2)]);
        // One answer per sample (an image classifier), few rows, logits, or a
        // class axis that is not the last: nothing beside top-1.
        assert!(dense_classifier_parts(&[8, 2], &v[..16], 2, Some(8)).is_empty());
        let two = [&v[..400], &v[..400]].concat();
        assert!(dense_classifier_parts(&[2, 200, 2], &two, 2, Some(2)).is_empty());
        assert_eq!(dense_classifier_parts(&[2, 200, 2], &two, 2, None).len(), 1);
        let logits: Vec<f64> = v.iter().map(|x| x * 4.0 - 2.0).collect();
        assert!(dense_classifier_parts(&[1, 300, 2], &logits, 2, Some(1)).is_empty());
        assert!(dense_classifier_parts(&[1, 2, 300], &v, 2, Some(1)).is_empty());
    }

    #[test]
    fn a_probability_map_is_scores_unless_it_is_a_classifier_output() {
        let shape = vec![1, 1, 2, 3];
        let v = [0.0, 0.1, 0.9, 1.0, 0.0, 0.3];
        let whole = find_parts(&shape, &v, true, None);
        assert_eq!(
            whole,
            vec![Part {
                axis: None,
                start: 0,
                end: 1,
                kind: PartKind::Scores
            }]
        );
        assert_eq!(whole[0].label("maps", 4), "maps (scores)");
        let mut seen = Vec::new();
        whole[0].for_each_run(&shape, |r| seen.push(r));
        assert_eq!(seen, vec![0..6]);
        assert!(find_parts(&shape, &v, false, None).is_empty());
        // Constant, or a shape that does not match the values: nothing.
        assert!(find_parts(&[3], &[0.5, 0.5, 0.5], true, None).is_empty());
        assert!(find_parts(&[4], &[0.5, 0.2, 0.1], true, None).is_empty());
    }
}
