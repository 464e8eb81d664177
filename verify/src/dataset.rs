//! Datasets: many input samples for one model, from files or seeded random
//! data. The same type feeds `--inputs`, calibration and held-out
//! evaluation. Samples come in a deterministic order (sorted file names,
//! then the leading axis of a stacked archive), one at a time, so a dataset
//! of any size is never held in memory whole.
//!
//! Sources:
//! - a folder of `.npz` files: one sample per file, arrays named after the
//!   model inputs;
//! - a folder of sub-folders of `.npy` files named after the inputs: one
//!   sample per sub-folder;
//! - a folder of `.npy` files, for a model with one input: one sample per file;
//! - one `.npz` (or `.npy`) whose arrays share a leading sample axis: sample
//!   `i` is item `i` of every array (kept as a batch of 1 when the model
//!   input has that leading dim, dropped otherwise), read from the file one
//!   item at a time (`crate::stacked`);
//! - seeded random data: only for smoke tests, and said to be meaningless
//!   for accuracy.

use std::path::{Path, PathBuf};

use infopt_runtime::{HostTensor, IoSpec, LoadedModel};

use crate::inputs::{Fallback, fit_inputs, generate, read_arrays};
use crate::stacked::StackedArrays;

/// One input sample: a tensor per model input, in model input order.
#[derive(Clone, Debug)]
pub struct Sample {
    /// Position in the dataset.
    pub index: usize,
    /// Where it came from, for messages (`data/0003.npz`, `stack.npz[3]`).
    pub origin: String,
    pub tensors: Vec<HostTensor>,
}

/// A source of samples.
pub trait Dataset {
    /// What the data is, for reports.
    fn describe(&self) -> String;
    /// False for seeded random data: statistics from it say nothing of real inputs.
    fn meaningful(&self) -> bool;
    /// Number of samples, when known ahead.
    fn sample_count(&self) -> Option<usize>;
    /// The next sample fitted to `inputs` (names, dtypes and shapes checked),
    /// or `None` at the end. Errors are one line naming the file and input.
    fn next_sample(&mut self, inputs: &[IoSpec]) -> Result<Option<Sample>, String>;
    /// Passes over the next sample without reading it where the layout allows
    /// (files, images, random data); false at the end. For slices of a dataset
    /// ([`Sliced`]): a shard of calibration must not read the others' samples.
    fn skip_sample(&mut self, inputs: &[IoSpec]) -> Result<bool, String> {
        Ok(self.next_sample(inputs)?.is_some())
    }
}

/// Samples `start..end` of another dataset (indices kept: sample `i` of the slice is
/// sample `i` of the whole, so seeded random data and messages stay the same).
pub struct Sliced {
    inner: Box<dyn Dataset>,
    start: usize,
    end: usize,
    /// Samples of `inner` passed so far.
    at: usize,
}

impl Sliced {
    pub fn new(inner: Box<dyn Dataset>, range: std::ops::Range<usize>) -> Sliced {
        Sliced {
            inner,
            start: range.start,
            end: range.end.max(range.start),
            at: 0,
        }
    }
}

impl Dataset for Sliced {
    fn describe(&self) -> String {
        format!(
            "samples {}..{} of {}",
            self.start,
            self.end,
            self.inner.describe()
        )
    }
    fn meaningful(&self) -> bool {
        self.inner.meaningful()
    }
    fn sample_count(&self) -> Option<usize> {
        let len = self.end - self.start;
        Some(match self.inner.sample_count() {
            Some(n) => len.min(n.saturating_sub(self.start)),
            None => len,
        })
    }
    fn next_sample(&mut self, inputs: &[IoSpec]) -> Result<Option<Sample>, String> {
        while self.at < self.start {
            if !self.inner.skip_sample(inputs)? {
                self.at = self.end;
                return Ok(None);
            }
            self.at += 1;
        }
        if self.at >= self.end {
            return Ok(None);
        }
        self.at += 1;
        self.inner.next_sample(inputs)
    }
    fn skip_sample(&mut self, inputs: &[IoSpec]) -> Result<bool, String> {
        Ok(self.next_sample(inputs)?.is_some())
    }
}

/// Opens `path` as a dataset (see the module doc for the layouts).
pub fn open(path: &Path) -> Result<Box<dyn Dataset>, String> {
    let shown = path.display();
    if path.is_dir() {
        let mut npz = Vec::new();
        let mut npy = Vec::new();
        let mut dirs = Vec::new();
        for entry in std::fs::read_dir(path).map_err(|e| format!("{shown}: {e}"))? {
            let p = entry.map_err(|e| format!("{shown}: {e}"))?.path();
            match p.extension().and_then(|e| e.to_str()) {
                Some("npz") if p.is_file() => npz.push(p),
                Some("npy") if p.is_file() => npy.push(p),
                _ if p.is_dir() => dirs.push(p),
                _ => {}
            }
        }
        for v in [&mut npz, &mut npy, &mut dirs] {
            v.sort();
        }
        let (items, kind) = match (npz.is_empty(), npy.is_empty(), dirs.is_empty()) {
            (false, true, _) => (npz, ItemKind::Npz),
            (true, false, _) => (npy, ItemKind::SingleNpy),
            (true, true, false) => (dirs, ItemKind::NpyFolder),
            (false, false, _) => {
                return Err(format!(
                    "{shown}: the folder mixes .npz and .npy files; use one layout (one .npz per sample, or one sub-folder of .npy per sample)"
                ));
            }
            (true, true, true) => {
                return Err(format!(
                    "{shown}: the folder has no .npz, .npy or sample sub-folders"
                ));
            }
        };
        return Ok(Box::new(FileSamples {
            root: path.to_path_buf(),
            items,
            kind,
            next: 0,
        }));
    }
    // Read one sample at a time (see `crate::stacked`), never whole.
    let arrays = StackedArrays::open(path).map_err(|e| format!("{shown}: {e}"))?;
    Ok(Box::new(Stacked {
        path: path.to_path_buf(),
        count: arrays.count(),
        arrays,
        next: 0,
    }))
}

#[derive(Clone, Copy, Debug)]
enum ItemKind {
    Npz,
    SingleNpy,
    NpyFolder,
}

struct FileSamples {
    root: PathBuf,
    items: Vec<PathBuf>,
    kind: ItemKind,
    next: usize,
}

impl Dataset for FileSamples {
    fn describe(&self) -> String {
        let what = match self.kind {
            ItemKind::Npz => ".npz files",
            ItemKind::SingleNpy => ".npy files",
            ItemKind::NpyFolder => "folders of .npy files",
        };
        format!("{} {what} in {}", self.items.len(), self.root.display())
    }
    fn meaningful(&self) -> bool {
        true
    }
    fn sample_count(&self) -> Option<usize> {
        Some(self.items.len())
    }
    fn skip_sample(&mut self, _inputs: &[IoSpec]) -> Result<bool, String> {
        let more = self.next < self.items.len();
        self.next += usize::from(more);
        Ok(more)
    }
    fn next_sample(&mut self, inputs: &[IoSpec]) -> Result<Option<Sample>, String> {
        let Some(path) = self.items.get(self.next) else {
            return Ok(None);
        };
        let index = self.next;
        self.next += 1;
        let origin = path.display().to_string();
        let mut arrays = read_arrays(path)?;
        if let ItemKind::SingleNpy = self.kind {
            if inputs.len() != 1 {
                return Err(format!(
                    "{origin}: a folder of .npy files holds one sample per file, for a model with one input; this model has {} (use one .npz or one sub-folder per sample)",
                    inputs.len()
                ));
            }
            arrays = arrays
                .into_iter()
                .map(|a| a.named(inputs[0].name.clone()))
                .collect();
        }
        let tensors = fit_inputs(inputs, &arrays, &origin)?;
        check_shapes(inputs, &tensors, &origin)?;
        Ok(Some(Sample {
            index,
            origin,
            tensors,
        }))
    }
}

struct Stacked {
    path: PathBuf,
    arrays: StackedArrays,
    count: usize,
    next: usize,
}

impl Dataset for Stacked {
    fn describe(&self) -> String {
        format!("{} samples stacked in {}", self.count, self.path.display())
    }
    fn meaningful(&self) -> bool {
        true
    }
    fn sample_count(&self) -> Option<usize> {
        Some(self.count)
    }
    fn next_sample(&mut self, inputs: &[IoSpec]) -> Result<Option<Sample>, String> {
        if self.next >= self.count {
            return Ok(None);
        }
        let index = self.next;
        self.next += 1;
        let origin = format!("{}[{index}]", self.path.display());
        let Some(arrays) = self
            .arrays
            .next_item()
            .map_err(|e| format!("{origin}: {e}"))?
        else {
            return Ok(None);
        };
        let mut items = Vec::with_capacity(arrays.len());
        for item in arrays {
            // Keep the batch axis of 1 when the input has as many dims as
            // the stacked array, else drop it.
            let want_rank = inputs
                .iter()
                .find(|s| Some(s.name.as_str()) == item.name())
                .and_then(|s| s.dims.as_ref().map(Vec::len));
            let item = if want_rank == Some(item.shape().len() - 1) {
                let shape = item.shape()[1..].to_vec();
                HostTensor::new(item.name().map(str::to_string), shape, item.into_data())
                    .map_err(|e| format!("{origin}: {e}"))?
            } else {
                item
            };
            items.push(item);
        }
        let tensors = fit_inputs(inputs, &items, &origin)?;
        check_shapes(inputs, &tensors, &origin)?;
        Ok(Some(Sample {
            index,
            origin,
            tensors,
        }))
    }
}

/// Seeded random samples (seed + index per sample).
pub struct RandomSamples {
    model: Box<dyn LoadedModel>,
    seed: u64,
    vocab: u64,
    count: usize,
    next: usize,
    /// Plainer values every sample takes, and why (see
    /// [`RandomSamples::plainer_where_needed`]).
    plain: Option<(Fallback, String)>,
    /// Run each sample before handing it out, until plainer values are
    /// chosen (see [`RandomSamples::plainer_where_needed`]).
    probe_each: bool,
}

impl RandomSamples {
    /// `model` is loaded with the shapes the samples take.
    pub fn new(model: Box<dyn LoadedModel>, seed: u64, vocab: u64, count: usize) -> RandomSamples {
        RandomSamples {
            model,
            seed,
            vocab,
            count,
            next: 0,
            plain: None,
            probe_each: false,
        }
    }

    /// Runs the model on the first sample; when its seeded values make the
    /// model fail (an index, axis or count out of range), every sample
    /// takes the first plainer values it runs on, as the verification's
    /// generated inputs do: without this, `--calib-data random:N` failed
    /// on models the plain `optimize` verifies. Nothing changes when the
    /// seeded values run or no plainer ones do (the calibration then says
    /// why the sample failed). Models with integer inputs are probed again
    /// on each later sample until plainer values are needed, since each
    /// sample draws its own indices (see [`Dataset::next_sample`]).
    pub fn plainer_where_needed(mut self) -> RandomSamples {
        if let Ok(seeded) = generate(self.model.as_ref(), self.seed, self.vocab) {
            self.choose_plainer(&seeded);
        }
        self.probe_each = self.plain.is_none() && has_integer_input(self.model.as_ref());
        self
    }

    /// Sets `plain` when `seeded` makes the model fail and plainer values run.
    fn choose_plainer(&mut self, seeded: &[HostTensor]) {
        let failure = match self.model.run(seeded) {
            Ok(_) => return,
            Err(e) => e.to_string(),
        };
        self.plain =
            Fallback::first_that_runs(self.model.as_ref(), seeded).map(|(fb, _, _)| (fb, failure));
    }
}

fn has_integer_input(model: &dyn LoadedModel) -> bool {
    model.inputs().iter().any(|spec| spec.dtype.is_integer())
}

impl Dataset for RandomSamples {
    fn describe(&self) -> String {
        let plain = match &self.plain {
            Some((fb, why)) => format!(
                "; {} (the seeded ones made the model fail: {why})",
                fb.describe()
            ),
            None => String::new(),
        };
        format!(
            "{} seeded random samples (seed {}{plain}; meaningless for accuracy)",
            self.count, self.seed
        )
    }
    fn meaningful(&self) -> bool {
        false
    }
    fn sample_count(&self) -> Option<usize> {
        Some(self.count)
    }
    fn skip_sample(&mut self, _inputs: &[IoSpec]) -> Result<bool, String> {
        let more = self.next < self.count;
        self.next += usize::from(more);
        Ok(more)
    }
    fn next_sample(&mut self, _inputs: &[IoSpec]) -> Result<Option<Sample>, String> {
        if self.next >= self.count {
            return Ok(None);
        }
        let index = self.next;
        self.next += 1;
        let mut tensors = generate(
            self.model.as_ref(),
            self.seed.wrapping_add(index as u64),
            self.vocab,
        )
        .map_err(|e| e.to_string())?;
        if self.probe_each && self.plain.is_none() {
            self.choose_plainer(&tensors);
        }
        if let Some(plain) = self.plain.as_ref().and_then(|(fb, _)| fb.apply(&tensors)) {
            tensors = plain;
        }
        Ok(Some(Sample {
            index,
            origin: format!("random sample {index}"),
            tensors,
        }))
    }
}

/// Fixed dims of the declaration must match the sample's.
fn check_shapes(inputs: &[IoSpec], tensors: &[HostTensor], origin: &str) -> Result<(), String> {
    for (spec, t) in inputs.iter().zip(tensors) {
        let Some(dims) = &spec.dims else { continue };
        let ok = dims.len() == t.shape().len()
            && dims.iter().zip(t.shape()).all(|(d, &v)| match d {
                infopt_runtime::DimSpec::Known(k) => *k == v,
                _ => true,
            });
        if !ok {
            return Err(format!(
                "{origin}: input `{}` has shape {:?}, the model takes {}",
                spec.name,
                t.shape(),
                spec.dims_string()
            ));
        }
    }
    Ok(())
}

/// Up to `limit` samples joined `batch` at a time along the first axis
/// (the last batch may be smaller).
pub fn batches(
    dataset: &mut dyn Dataset,
    inputs: &[IoSpec],
    batch: usize,
    limit: Option<usize>,
    mut each: impl FnMut(Vec<HostTensor>, &[Sample]) -> Result<(), String>,
) -> Result<usize, String> {
    let batch = batch.max(1);
    let mut taken = 0;
    let mut pending: Vec<Sample> = Vec::new();
    loop {
        let done = limit.is_some_and(|l| taken >= l);
        let next = if done {
            None
        } else {
            dataset.next_sample(inputs)?
        };
        let end = next.is_none();
        if let Some(s) = next {
            taken += 1;
            pending.push(s);
        }
        if pending.len() == batch || (end && !pending.is_empty()) {
            let tensors = if batch == 1 {
                pending[0].tensors.clone()
            } else {
                (0..inputs.len())
                    .map(|i| {
                        let parts: Vec<HostTensor> =
                            pending.iter().map(|s| s.tensors[i].clone()).collect();
                        HostTensor::concat_outer(&parts).map_err(|e| {
                            format!("{}: input `{}`: {e}", pending[0].origin, inputs[i].name)
                        })
                    })
                    .collect::<Result<Vec<_>, _>>()?
            };
            each(tensors, &pending)?;
            pending.clear();
        }
        if end {
            return Ok(taken);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;
    use std::rc::Rc;

    /// Samples read and samples skipped, shared with the test.
    type Log = Rc<RefCell<(Vec<usize>, usize)>>;

    struct Counting {
        count: usize,
        next: usize,
        log: Log,
    }

    impl Dataset for Counting {
        fn describe(&self) -> String {
            format!("{} counted samples", self.count)
        }
        fn meaningful(&self) -> bool {
            true
        }
        fn sample_count(&self) -> Option<usize> {
            Some(self.count)
        }
        fn next_sample(&mut self, _inputs: &[IoSpec]) -> Result<Option<Sample>, String> {
            if self.next >= self.count {
                return Ok(None);
            }
            self.log.borrow_mut().0.push(self.next);
            self.next += 1;
            Ok(Some(Sample {
                index: self.next - 1,
                origin: String::new(),
                tensors: Vec::new(),
            }))
        }
        fn skip_sample(&mut self, _inputs: &[IoSpec]) -> Result<bool, String> {
            let more = self.next < self.count;
            self.next += usize::from(more);
            self.log.borrow_mut().1 += usize::from(more);
            Ok(more)
        }
    }

    /// The indices a slice yields, its announced count, and what the inner dataset read
    /// and skipped.
    fn slice(count: usize, range: std::ops::Range<usize>) -> (Vec<usize>, Option<usize>, Log) {
        let log = Log::default();
        let inner = Counting {
            count,
            next: 0,
            log: log.clone(),
        };
        let mut s = Sliced::new(Box::new(inner), range);
        let n = s.sample_count();
        let mut got = Vec::new();
        while let Some(x) = s.next_sample(&[]).unwrap() {
            got.push(x.index);
        }
        (got, n, log)
    }

    #[test]
    fn a_slice_yields_its_samples_with_their_own_indices_and_skips_the_rest() {
        let (got, n, log) = slice(10, 3..6);
        assert_eq!((got, n), (vec![3, 4, 5], Some(3)));
        // The samples before the slice are skipped, not read; none after it is touched.
        assert_eq!(*log.borrow(), (vec![3, 4, 5], 3));
        let (got, n, _) = slice(10, 0..10);
        assert_eq!((got, n), ((0..10).collect(), Some(10)));
        let (got, n, _) = slice(10, 8..12);
        assert_eq!((got, n), (vec![8, 9], Some(2)));
        let (got, n, log) = slice(4, 6..9);
        assert_eq!((got, n), (vec![], Some(0)));
        assert_eq!(*log.borrow(), (vec![], 4));
        let (got, n, _) = slice(4, 2..2);
        assert_eq!((got, n), (vec![], Some(0)));
    }
}
