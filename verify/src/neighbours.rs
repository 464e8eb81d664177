//! Nearest-neighbour agreement of an embedding output: whether each
//! sample's closest other sample (by cosine of the output vectors) is the
//! same in the candidate as in the original.
//!
//! Why: a sentence or image embedding is used by comparing it with other
//! embeddings (retrieval, clustering, deduplication), and its error matters
//! relative to the gaps between samples, not to the vector's length. On
//! paraphrase-MiniLM-L3 an INT8 model at cosine 0.995 against FP32 (well
//! within the cosine target of 0.99) changed the nearest neighbour of 6 of
//! 100 sentences and lost 1.67 points of retrieval: sentence embeddings
//! share a large common direction, so the differences that rank them are a
//! small part of each vector. Judged like a classifier's top-1: each row's
//! similarities to the other rows are its "class scores".

use crate::top_class::{argmax, margin_and_error_at};

/// Rows kept per output (the first ones): every judgement compares each
/// pair, so the cost grows with the square (128 rows of 384 values: about
/// 6 M multiply-adds per model, a few milliseconds).
pub const ROWS_KEPT: usize = 128;

/// How much larger than on the judged samples an embedding's error is
/// taken to be for [`crate::evaluate::expected_agreement`] (a classifier's
/// is doubled, [`crate::evaluate::UNSEEN_ERROR_FACTOR`]). Pairing every
/// margin with every error is already pessimistic here, where a few rows
/// of near-duplicate samples have margins of 1e-3 or less: on
/// paraphrase-MiniLM-L3 with every layer in INT8 and 64 calibration
/// sentences, the estimate was 0.79 with the errors as measured (0.65
/// doubled) against 0.97 measured on those sentences and 0.94 on 100
/// others, where neighbours are closer.
pub const UNSEEN_ERROR_FACTOR: f64 = 1.0;

/// Fewest rows that make a neighbour (each row needs two others: a nearest
/// one and a runner-up that gives its margin).
const FEWEST_ROWS: usize = 3;

/// Rows whose nearest and second-nearest neighbour are this close in the
/// original have no nearest neighbour to keep (duplicates, constant
/// outputs): they are left out.
const TIE: f64 = 1e-6;

/// Fewest values per row of an embedding.
const LEAST_DIM: usize = 8;

/// Most values per row of an embedding: the widest in use hold 4096 (VGG's
/// features; text embeddings reach 3072). A longer row is a map over
/// positions, a prediction per time step or sample (brainmaze's spindle
/// detector: `[rows, 1, 7500]`, one logit per EEG sample, was judged by its
/// rows' nearest neighbours, 0.87 with every layer in INT8, and the search
/// kept 24 of 29 layers in float to write float).
const MOST_DIM: usize = 4096;

/// Whether an output of `shape` is judged as embeddings: one vector per
/// row, `[rows, dim]` with 8 to 4096 values per row, or the same with
/// axes of 1 around `dim` (`[rows, 1, 1, dim]`: openwakeword's speech
/// embedding; `[rows, dim, 1, 1]`: a CNN's pooled features), when it is not
/// a classifier's output (whose last axis holds classes, judged by top-1).
pub fn is_embedding(shape: &[usize]) -> bool {
    let Some((_, per_row)) = shape.split_first() else {
        return false;
    };
    let wide: Vec<usize> = per_row.iter().copied().filter(|&d| d != 1).collect();
    matches!(wide.as_slice(), [dim] if (LEAST_DIM..=MOST_DIM).contains(dim))
}

/// Values per row of an embedding output of `shape`.
fn row_len(shape: &[usize]) -> usize {
    shape.iter().skip(1).product()
}

/// A text model's token inputs on one sample: the sequence length of its
/// `[batch, tokens]` integer inputs, and the attention mask among them
/// (the one whose values are all 0 or 1, a name with "mask" first).
#[derive(Debug, Clone, PartialEq)]
pub struct Tokens {
    pub len: usize,
    /// `[batch * len]`, 1 for a token, 0 for padding.
    pub mask: Option<Vec<f32>>,
}

/// The token inputs of a sample, when it has `[batch, tokens]` integer
/// inputs of one length (None otherwise: not a text model's sample).
pub fn tokens(inputs: &[infopt_runtime::HostTensor]) -> Option<Tokens> {
    let ints: Vec<_> = inputs
        .iter()
        .filter(|t| t.dtype().is_integer() && t.shape().len() == 2)
        .collect();
    let len = ints.first()?.shape()[1];
    if len < 2 || ints.iter().any(|t| t.shape()[1] != len) {
        return None;
    }
    let binary =
        |t: &&&infopt_runtime::HostTensor| t.to_f64_vec().iter().all(|&v| v == 0.0 || v == 1.0);
    let named = |t: &&&infopt_runtime::HostTensor| {
        t.name()
            .is_some_and(|n| n.to_ascii_lowercase().contains("mask"))
    };
    let mask = ints
        .iter()
        .find(|t| named(t) && binary(t))
        .or_else(|| ints.iter().find(binary))
        .map(|t| t.to_f64_vec().iter().map(|&v| v as f32).collect());
    Some(Tokens { len, mask })
}

/// Whether [`rows`] finds embedding rows in an output of `shape` (checked
/// before its values are read: most outputs are not embeddings).
pub fn has_rows(shape: &[usize], tokens: Option<&Tokens>) -> bool {
    is_embedding(shape)
        || matches!((shape, tokens), (&[_, len, dim], Some(t)) if len == t.len && dim >= LEAST_DIM)
}

/// The embedding rows of an output of `shape` holding `values`: the rows
/// of a `[rows, dim]` output, or, for a text model's hidden states
/// `[batch, tokens, dim]` (tokens the length of its token inputs), each
/// batch row's mean over its tokens, padding left out where the mask says
/// (sentence-transformers' pooling). None for any other output.
pub fn rows(shape: &[usize], values: &[f64], tokens: Option<&Tokens>) -> Option<Vec<Vec<f32>>> {
    if values.len() != shape.iter().product::<usize>() {
        return None;
    }
    if is_embedding(shape) {
        let dim = row_len(shape);
        return Some(
            values
                .chunks(dim)
                .map(|r| r.iter().map(|&v| v as f32).collect())
                .collect(),
        );
    }
    let t = tokens?;
    let &[batch, len, dim] = shape else {
        return None;
    };
    if len != t.len || dim < LEAST_DIM {
        return None;
    }
    let mask = t.mask.as_ref().filter(|m| m.len() == batch * len);
    let mut out = Vec::with_capacity(batch);
    for b in 0..batch {
        let weight = |i: usize| mask.map_or(1.0, |m| f64::from(m[b * len + i]));
        let mut total: f64 = (0..len).map(weight).sum();
        // A row of padding only is pooled over every position.
        let all = total == 0.0;
        if all {
            total = len as f64;
        }
        let mut row = vec![0f64; dim];
        for i in 0..len {
            let w = if all { 1.0 } else { weight(i) };
            if w == 0.0 {
                continue;
            }
            let at = (b * len + i) * dim;
            for (r, v) in row.iter_mut().zip(&values[at..at + dim]) {
                *r += w * v;
            }
        }
        out.push(row.iter().map(|&v| (v / total) as f32).collect());
    }
    Some(out)
}

/// Unit-length copies of the rows (zero rows stay zero).
fn normalized(rows: &[Vec<f32>]) -> Vec<Vec<f64>> {
    rows.iter()
        .map(|r| {
            let n = r
                .iter()
                .map(|&v| f64::from(v) * f64::from(v))
                .sum::<f64>()
                .sqrt();
            // A NaN anywhere makes the whole row NaN: it neighbours nothing.
            r.iter()
                .map(|&v| {
                    if n > 0.0 || n.is_nan() {
                        f64::from(v) / n
                    } else {
                        0.0
                    }
                })
                .collect()
        })
        .collect()
}

/// Cosine similarity of row `i` to every other row, in row order.
fn similarities(unit: &[Vec<f64>], i: usize) -> Vec<f64> {
    unit.iter()
        .enumerate()
        .filter(|&(j, _)| j != i)
        .map(|(_, r)| r.iter().zip(&unit[i]).map(|(x, y)| x * y).sum())
        .collect()
}

/// What one output's rows say: rows judged, rows whose nearest neighbour
/// is the original's, and each judged row's margin (the original's nearest
/// similarity less its runner-up's) and the error against it (the most
/// another row gains on the nearest one in the candidate), as for a
/// classifier's rows.
#[derive(Debug, Default, PartialEq)]
pub struct Neighbours {
    pub rows: usize,
    pub agreeing: usize,
    pub margins: Vec<f32>,
    pub errors: Vec<f32>,
}

/// The candidate's rows `a` against the original's `b` (the same count,
/// paired). None with fewer than three rows or rows of different lengths.
pub fn judge(a: &[Vec<f32>], b: &[Vec<f32>]) -> Option<Neighbours> {
    if a.len() != b.len() || b.len() < FEWEST_ROWS {
        return None;
    }
    if a.iter().zip(b).any(|(x, y)| x.len() != y.len()) {
        return None;
    }
    let (ua, ub) = (normalized(a), normalized(b));
    let mut out = Neighbours::default();
    for i in 0..b.len() {
        // Row i's similarities to the others are its class scores.
        let (sa, sb) = (similarities(&ua, i), similarities(&ub, i));
        let top = argmax(&sb);
        let (margin, error) = margin_and_error_at(&sa, &sb, top);
        // A NaN margin is no margin either.
        if margin.is_nan() || f64::from(margin) <= TIE {
            continue;
        }
        out.rows += 1;
        // A NaN row keeps no neighbour (argmax steps past NaN).
        out.agreeing += usize::from(argmax(&sa) == top && sa[top].is_finite());
        out.margins.push(margin);
        out.errors.push(error);
    }
    (out.rows > 0).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(v: &[[f32; 3]]) -> Vec<Vec<f32>> {
        v.iter().map(|r| r.to_vec()).collect()
    }

    #[test]
    fn the_same_rows_keep_every_neighbour_with_no_error() {
        let b = rows(&[
            [1.0, 0.0, 0.0],
            [0.9, 0.1, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.9, 0.2],
        ]);
        let n = judge(&b, &b).unwrap();
        assert_eq!((n.rows, n.agreeing), (4, 4));
        assert!(n.errors.iter().all(|&e| e == 0.0));
        assert!(n.margins.iter().all(|&m| m > 0.0));
    }

    #[test]
    fn a_row_moved_past_its_runner_up_loses_its_neighbour() {
        // Row 0's nearest is row 1; the candidate moves row 0 toward row 2.
        let b = rows(&[
            [1.0, 0.2, 0.0],
            [1.0, 0.0, 0.0],
            [1.0, 0.5, 0.0],
            [0.0, 0.0, 1.0],
        ]);
        let mut a = b.clone();
        a[0] = vec![1.0, 0.45, 0.0];
        let n = judge(&a, &b).unwrap();
        // Row 3 is as far from every other row: no neighbour, left out.
        assert_eq!(n.rows, 3);
        assert_eq!(n.agreeing, 2, "{n:?}");
        assert!(n.errors[0] > n.margins[0], "{n:?}");
    }

    #[test]
    fn tied_rows_and_too_few_rows_judge_nothing() {
        let same = rows(&[[1.0, 0.0, 0.0], [1.0, 0.0, 0.0], [1.0, 0.0, 0.0]]);
        assert_eq!(judge(&same, &same), None);
        let two = rows(&[[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]]);
        assert_eq!(judge(&two, &two), None);
    }

    #[test]
    fn a_nan_row_loses_its_neighbour() {
        let b = rows(&[
            [1.0, 0.2, 0.0],
            [1.0, 0.0, 0.0],
            [0.0, 1.0, 0.0],
            [0.0, 0.0, 1.0],
        ]);
        let mut a = b.clone();
        a[0] = vec![f32::NAN, 0.0, 0.0];
        let n = judge(&a, &b).unwrap();
        assert!(n.agreeing < n.rows);
        assert!(n.errors[0].is_infinite());
    }

    #[test]
    fn a_text_models_hidden_states_are_pooled_over_its_tokens_without_padding() {
        use infopt_runtime::HostTensor;
        let ids = HostTensor::from_vec(vec![2, 3], vec![5i64, 9, 0, 7, 0, 0])
            .unwrap()
            .named("input_ids");
        let mask = HostTensor::from_vec(vec![2, 3], vec![1i64, 1, 0, 1, 0, 0])
            .unwrap()
            .named("attention_mask");
        let t = tokens(&[ids, mask]).unwrap();
        assert_eq!(t.len, 3);
        assert_eq!(t.mask, Some(vec![1.0, 1.0, 0.0, 1.0, 0.0, 0.0]));
        // [2, 3, 8]: position i of batch row b holds 10 b + i everywhere.
        let values: Vec<f64> = (0..2)
            .flat_map(|b| (0..3).flat_map(move |i| [f64::from(10 * b + i); 8]))
            .collect();
        let pooled = super::rows(&[2, 3, 8], &values, Some(&t)).unwrap();
        assert_eq!(pooled, vec![vec![0.5f32; 8], vec![10.0f32; 8]]);
        // Hidden states of another length, or no token inputs: no rows.
        assert_eq!(super::rows(&[2, 4, 8], &vec![0.0; 64], Some(&t)), None);
        assert_eq!(super::rows(&[2, 3, 8], &values, None), None);
        // An image model's input is no token input.
        let image = HostTensor::from_vec(vec![1, 3, 2, 2], vec![0f32; 12]).unwrap();
        assert_eq!(tokens(&[image]), None);
    }

    #[test]
    fn only_row_vectors_are_embeddings() {
        assert!(is_embedding(&[1, 384]));
        assert!(is_embedding(&[32, 8]));
        assert!(!is_embedding(&[32, 1]));
        assert!(!is_embedding(&[1, 128, 384]));
        // Axes of 1 around the vector change nothing.
        assert!(is_embedding(&[4, 1, 1, 96]));
        assert!(is_embedding(&[4, 1280, 1, 1]));
        assert!(!is_embedding(&[4, 1, 1, 1]));
        assert!(!is_embedding(&[4, 16, 1, 96]));
        assert!(!is_embedding(&[96]));
        // The widest embeddings in use, and a map over 7500 positions.
        assert!(is_embedding(&[2, 4096]));
        assert!(!is_embedding(&[2, 4097]));
        assert!(!is_embedding(&[3, 1, 7500]));
        let values: Vec<f64> = (0..2 * 96).map(f64::from).collect();
        let r = super::rows(&[2, 1, 1, 96], &values, None).unwrap();
        assert_eq!((r.len(), r[1].len(), r[1][0]), (2, 96, 96.0));
    }
}
