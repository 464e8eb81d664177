//! A candidate whose float inputs and outputs became float16/bfloat16
//! (`--fp16-io`, `keep_io_types: false`) judged against a float32 original:
//! the inputs the original ran on are rounded to the candidate's half type
//! (what a caller feeding half does), and its half outputs are widened back to
//! float32 to be compared. Only the verifier wraps a candidate so, and only
//! when the pipeline asked for half inputs and outputs: anywhere else a changed
//! output type stays a mismatch.

use std::sync::OnceLock;

use half::{bf16, f16};
use infopt_runtime::backend::{IoSpec, LoadedModel, ShapeResolution};
use infopt_runtime::{DType, HostTensor, RuntimeError, TensorData, TimedRun, Transfer};

/// The candidate, fed and read in float32.
pub struct HalfIo {
    inner: Box<dyn LoadedModel>,
    /// The inputs of the first timed runner, converted once (timing always
    /// repeats one set of inputs).
    timed_inputs: OnceLock<Vec<HostTensor>>,
}

impl HalfIo {
    pub fn new(inner: Box<dyn LoadedModel>) -> HalfIo {
        HalfIo {
            inner,
            timed_inputs: OnceLock::new(),
        }
    }

    /// `inputs` with every float32 tensor the candidate declares half rounded to it.
    fn to_candidate(&self, inputs: &[HostTensor]) -> infopt_runtime::Result<Vec<HostTensor>> {
        self.inner
            .inputs()
            .iter()
            .zip(inputs)
            .map(|(spec, t)| narrow(t, spec.dtype))
            .collect()
    }
}

/// `t` as `to` when it is float32 and `to` a half type; unchanged otherwise.
fn narrow(t: &HostTensor, to: DType) -> infopt_runtime::Result<HostTensor> {
    let TensorData::F32(v) = t.data() else {
        return Ok(t.clone());
    };
    let shape = t.shape().to_vec();
    let out = match to {
        DType::F16 => HostTensor::from_vec(shape, v.iter().map(|&x| f16::from_f32(x)).collect())?,
        DType::BF16 => HostTensor::from_vec(shape, v.iter().map(|&x| bf16::from_f32(x)).collect())?,
        _ => return Ok(t.clone()),
    };
    Ok(match t.name() {
        Some(n) => out.named(n),
        None => out,
    })
}

/// A half output widened to float32 (exactly: every half value is a float32).
fn widen(t: HostTensor) -> infopt_runtime::Result<HostTensor> {
    let v: Vec<f32> = match t.data() {
        TensorData::F16(v) => v.iter().map(|x| x.to_f32()).collect(),
        TensorData::BF16(v) => v.iter().map(|x| x.to_f32()).collect(),
        _ => return Ok(t),
    };
    let out = HostTensor::from_vec(t.shape().to_vec(), v)?;
    Ok(match t.name() {
        Some(n) => out.named(n),
        None => out,
    })
}

impl LoadedModel for HalfIo {
    fn inputs(&self) -> &[IoSpec] {
        self.inner.inputs()
    }

    fn outputs(&self) -> &[IoSpec] {
        self.inner.outputs()
    }

    fn resolution(&self) -> &ShapeResolution {
        self.inner.resolution()
    }

    fn rebind_shapes(&mut self, at: &infopt_runtime::InputShapes) -> infopt_runtime::Result<bool> {
        self.inner.rebind_shapes(at)
    }

    fn run(&self, inputs: &[HostTensor]) -> infopt_runtime::Result<Vec<HostTensor>> {
        let fed = self.to_candidate(inputs)?;
        self.inner.run(&fed)?.into_iter().map(widen).collect()
    }

    fn timed_runner<'a>(
        &'a self,
        inputs: &'a [HostTensor],
        transfer: Transfer,
    ) -> infopt_runtime::Result<Box<dyn TimedRun + 'a>> {
        let converted = self.to_candidate(inputs)?;
        let stored = self.timed_inputs.get_or_init(|| converted.clone());
        if *stored != converted {
            return Err(RuntimeError::InvalidArgument(
                "a half-input candidate is timed on one set of inputs".into(),
            ));
        }
        self.inner.timed_runner(stored, transfer)
    }
}
