//! How timed runs move data between the host and the device the model runs on.
//!
//! People who deploy on a GPU keep inputs and outputs on the device (ONNX
//! Runtime's IoBinding) and pay for copies only where their pipeline needs
//! them; timing host to host adds two PCIe copies (and, with fresh output
//! buffers, page faults) to every run. Both are measured, and reports say
//! which one a latency is.

use std::str::FromStr;

use serde::{Serialize, Serializer};

use crate::error::{Result, RuntimeError};

/// Where a timed run's inputs come from and its outputs go.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Transfer {
    /// Inputs copied from host memory and outputs copied back into host memory
    /// on every run (the outputs into buffers reused from run to run where the
    /// backend allows it).
    #[default]
    HostToHost,
    /// Inputs placed on the device once; outputs written to device buffers
    /// allocated once. A run's time is the model's work, synchronized.
    DeviceResident,
}

impl Transfer {
    pub const NAMES: [&'static str; 2] = ["host-to-host", "device-resident"];

    pub fn as_str(self) -> &'static str {
        match self {
            Transfer::HostToHost => Self::NAMES[0],
            Transfer::DeviceResident => Self::NAMES[1],
        }
    }
}

impl std::fmt::Display for Transfer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Transfer {
    type Err = RuntimeError;

    fn from_str(s: &str) -> Result<Transfer> {
        match s {
            "host-to-host" => Ok(Transfer::HostToHost),
            "device-resident" => Ok(Transfer::DeviceResident),
            _ => Err(RuntimeError::InvalidArgument(format!(
                "unknown transfer mode `{s}` (choose one of {})",
                Self::NAMES.join(", ")
            ))),
        }
    }
}

impl Serialize for Transfer {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The refusal for device-resident timing where no device memory exists.
pub const DEVICE_RESIDENT_NEEDS_CUDA: &str = "device-resident timing (--io-binding) needs ONNX Runtime with the CUDA execution provider: add --backend ort --ep cuda";

/// One model prepared for timed runs: whatever binding or buffers the
/// transfer mode needs were set up when the runner was made, so a run does
/// only the work being timed.
pub trait TimedRun {
    /// One run, complete (device work synchronized) when it returns.
    fn run_once(&mut self) -> Result<()>;

    /// Whether inputs and outputs are bound once (buffers reused across runs)
    /// rather than converted on every run.
    fn reuses_buffers(&self) -> bool {
        false
    }
}

/// A runner that calls a closure each time (the plain `run` path).
pub struct RunEachTime<F: FnMut() -> Result<()>>(pub F);

impl<F: FnMut() -> Result<()>> TimedRun for RunEachTime<F> {
    fn run_once(&mut self) -> Result<()> {
        (self.0)()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for n in Transfer::NAMES {
            let t: Transfer = n.parse().unwrap();
            assert_eq!(t.as_str(), n);
        }
        let e = "device".parse::<Transfer>().unwrap_err().to_string();
        assert!(
            e.contains("choose one of host-to-host, device-resident"),
            "{e}"
        );
        assert_eq!(Transfer::default(), Transfer::HostToHost);
    }
}
