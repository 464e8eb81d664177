//! Timed runs through ONNX Runtime's IoBinding: inputs and outputs are bound
//! once, so a run does the model's work and only the copies its transfer mode
//! asks for (see [`Transfer`]).
//!
//! - Device-resident (CUDA): each input is bound once from host memory, which
//!   makes ONNX Runtime copy it to the device then and never again; outputs are
//!   bound to the CUDA device, and after the first run to the device buffers
//!   that run allocated, so every later run writes into the same memory.
//! - Host to host: inputs are rebound before every run (a provider on a device
//!   copies them in again each time; on the CPU provider rebinding an owned
//!   tensor copies nothing); outputs are bound to host memory, then to the
//!   host buffers of the first run, so copying them out never faults in fresh
//!   pages.
//!
//! A run ends with the bound outputs synchronized, so wall-clock time around it
//! is the device's time too.

use std::sync::{Mutex, MutexGuard};

use ort::memory::{AllocationDevice, AllocatorType, MemoryInfo, MemoryType};
use ort::session::{IoBinding, Session};
use ort::value::{DynValue, Tensor};

use crate::backend::IoSpec;
use crate::error::{Result, RuntimeError};
use crate::tensor::{HostTensor, TensorData};
use crate::transfer::{DEVICE_RESIDENT_NEEDS_CUDA, TimedRun, Transfer};

/// The backend's name in errors.
pub(super) const BACKEND: &str = "ort";

/// A session with its inputs and outputs bound for timed runs.
pub(super) struct BoundRunner<'a> {
    session: MutexGuard<'a, Session>,
    binding: IoBinding,
    /// Host-to-host only: the owned input values rebound before each run.
    rebind: Vec<(String, DynValue)>,
}

/// Where a session's outputs are bound: CUDA device `id`, or host memory.
fn output_memory(transfer: Transfer, cuda_device: Option<i32>) -> Result<MemoryInfo<'static>> {
    let (device, id, kind) = match transfer {
        Transfer::DeviceResident => {
            let id = cuda_device
                .ok_or_else(|| RuntimeError::InvalidArgument(DEVICE_RESIDENT_NEEDS_CUDA.into()))?;
            (AllocationDevice::CUDA, id, MemoryType::Default)
        }
        Transfer::HostToHost => (AllocationDevice::CPU, 0, MemoryType::Default),
    };
    let allocator = if device == AllocationDevice::CPU {
        AllocatorType::Arena
    } else {
        AllocatorType::Device
    };
    MemoryInfo::new(device, id, allocator, kind).map_err(|e| binding_error(&e))
}

pub(super) fn binding_error(e: &ort::Error) -> RuntimeError {
    RuntimeError::Run {
        backend: BACKEND.into(),
        message: format!("IoBinding: {e}"),
    }
}

/// An owned ONNX Runtime tensor holding a copy of `t` (bound once, or rebound
/// each run without another host copy).
fn owned_value(t: &HostTensor) -> ort::Result<DynValue> {
    let shape = t.shape().to_vec();
    macro_rules! owned {
        ($v:expr) => {
            Tensor::from_array((shape, $v.clone()))?.into_dyn()
        };
    }
    Ok(match t.data() {
        TensorData::F32(v) => owned!(v),
        TensorData::F64(v) => owned!(v),
        TensorData::F16(v) => owned!(v),
        TensorData::BF16(v) => owned!(v),
        TensorData::I8(v) => owned!(v),
        TensorData::I16(v) => owned!(v),
        TensorData::I32(v) => owned!(v),
        TensorData::I64(v) => owned!(v),
        TensorData::U8(v) => owned!(v),
        TensorData::U16(v) => owned!(v),
        TensorData::U32(v) => owned!(v),
        TensorData::U64(v) => owned!(v),
        TensorData::Bool(v) => owned!(v),
    })
}

impl<'a> BoundRunner<'a> {
    /// Binds `inputs` and the session's `outputs` for `transfer`, and runs once
    /// so that every output buffer exists before the first timed run.
    pub(super) fn new(
        session: &'a Mutex<Session>,
        input_specs: &[IoSpec],
        output_specs: &[IoSpec],
        inputs: &[HostTensor],
        transfer: Transfer,
        cuda_device: Option<i32>,
    ) -> Result<BoundRunner<'a>> {
        let out_memory = output_memory(transfer, cuda_device)?;
        let session = session.lock().unwrap_or_else(|p| p.into_inner());
        let mut binding = session.create_binding().map_err(|e| binding_error(&e))?;
        let mut values = Vec::with_capacity(inputs.len());
        for (spec, t) in input_specs.iter().zip(inputs) {
            let v = owned_value(t).map_err(|e| RuntimeError::InputMismatch {
                input: spec.name.clone(),
                message: e.to_string(),
            })?;
            binding
                .bind_input(spec.name.as_str(), &v)
                .map_err(|e| binding_error(&e))?;
            values.push((spec.name.clone(), v));
        }
        for o in output_specs {
            binding
                .bind_output_to_device(o.name.as_str(), &out_memory)
                .map_err(|e| binding_error(&e))?;
        }
        let mut runner = BoundRunner {
            session,
            binding,
            rebind: match transfer {
                Transfer::HostToHost => values,
                Transfer::DeviceResident => Vec::new(),
            },
        };
        // The first run allocates the outputs where they were bound; binding
        // those very buffers makes every later run reuse them.
        let mut first = runner
            .session
            .run_binding(&runner.binding)
            .map_err(|e| binding_error(&e))?;
        let mut buffers = Vec::with_capacity(output_specs.len());
        for o in output_specs {
            let v = first
                .remove(o.name.as_str())
                .ok_or_else(|| RuntimeError::Run {
                    backend: BACKEND.into(),
                    message: format!("ONNX Runtime bound no value to output `{}`", o.name),
                })?;
            buffers.push((o.name.clone(), v));
        }
        drop(first);
        for (name, v) in buffers {
            runner
                .binding
                .bind_output(name.as_str(), v)
                .map_err(|e| binding_error(&e))?;
        }
        // One run into the rebound buffers, so that a model the binding
        // cannot take fails here, where the caller can fall back to plain
        // runs: ONNX Runtime checks a reused output against the shape the
        // model declares (onnxmltools' LightGBM classifier declares its
        // labels `[1]` and returns one per row).
        runner.run_once()?;
        Ok(runner)
    }
}

impl TimedRun for BoundRunner<'_> {
    fn run_once(&mut self) -> Result<()> {
        for (name, v) in &self.rebind {
            self.binding
                .bind_input(name.as_str(), v)
                .map_err(|e| binding_error(&e))?;
        }
        let outputs = self
            .session
            .run_binding(&self.binding)
            .map_err(|e| binding_error(&e))?;
        drop(outputs);
        self.binding
            .synchronize_outputs()
            .map_err(|e| binding_error(&e))
    }

    fn reuses_buffers(&self) -> bool {
        true
    }
}
