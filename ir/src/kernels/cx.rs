//! What a kernel sees ([`Cx`]) and the index arithmetic the kernels share.

use super::array::{self, Array};
use super::error::KernelError;
use crate::dtype::DataType;
use crate::graph::Node;
use crate::tensor::Tensor;

/// What a kernel sees.
pub(crate) struct Cx<'a> {
    pub node: &'a Node,
    pub raw: &'a [Option<&'a Tensor>],
    pub opset: i64,
    pub limit: Option<u64>,
}

impl Cx<'_> {
    pub fn has(&self, i: usize) -> bool {
        matches!(self.raw.get(i), Some(Some(_)))
    }

    pub fn n_inputs(&self) -> usize {
        self.raw.len()
    }

    pub fn tensor(&self, i: usize) -> Result<&Tensor, KernelError> {
        self.raw
            .get(i)
            .copied()
            .flatten()
            .ok_or_else(|| KernelError::invalid(format!("{} needs input {i}", self.node.op_type)))
    }

    pub fn input(&self, i: usize) -> Result<Array, KernelError> {
        Array::from_tensor(self.tensor(i)?)
    }

    /// Integer input values (shapes, axes, indices).
    pub fn ints(&self, i: usize) -> Result<Vec<i64>, KernelError> {
        self.input(i)?.buf.to_i64().ok_or_else(|| {
            KernelError::invalid(format!(
                "{} input {i} must be an integer tensor",
                self.node.op_type
            ))
        })
    }

    pub fn attr_int(&self, name: &str, default: i64) -> Result<i64, KernelError> {
        self.node
            .attr_int_or(name, default)
            .map_err(|e| KernelError::invalid(e.to_string()))
    }

    pub fn attr_float(&self, name: &str, default: f32) -> Result<f32, KernelError> {
        self.node
            .attr_float_or(name, default)
            .map_err(|e| KernelError::invalid(e.to_string()))
    }

    pub fn attr_ints(&self, name: &str) -> Result<Option<Vec<i64>>, KernelError> {
        Ok(self
            .node
            .attr_ints(name)
            .map_err(|e| KernelError::invalid(e.to_string()))?
            .map(|a| a.to_vec()))
    }

    /// Refuses outputs over the byte limit, before they are allocated.
    pub fn check(&self, dtype: DataType, numel: usize) -> Result<(), KernelError> {
        let Some(limit) = self.limit else {
            return Ok(());
        };
        let bytes = match dtype {
            DataType::String => numel as u64,
            d => d.storage_bytes(numel).map(|b| b as u64).unwrap_or(u64::MAX),
        };
        if bytes > limit {
            Err(KernelError::TooLarge { bytes, limit })
        } else {
            Ok(())
        }
    }

    pub fn check_dims(&self, dtype: DataType, dims: &[usize]) -> Result<(), KernelError> {
        let n = dims.iter().try_fold(1usize, |acc, &d| acc.checked_mul(d));
        match n {
            Some(n) => self.check(dtype, n),
            None => Err(KernelError::TooLarge {
                bytes: u64::MAX,
                limit: self.limit.unwrap_or(u64::MAX),
            }),
        }
    }
}

/// Normalizes an axis against `rank`.
pub(crate) fn axis(a: i64, rank: usize) -> Result<usize, KernelError> {
    let r = rank as i64;
    let x = if a < 0 { a + r } else { a };
    if (0..r).contains(&x) {
        Ok(x as usize)
    } else {
        Err(KernelError::invalid(format!(
            "axis {a} out of range for rank {rank}"
        )))
    }
}

/// Output dims of a multidirectional broadcast.
pub(crate) fn broadcast_dims(shapes: &[&[usize]]) -> Result<Vec<usize>, KernelError> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        let off = rank - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[off + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(KernelError::invalid(format!(
                    "shapes {shapes:?} do not broadcast"
                )));
            }
        }
    }
    Ok(out)
}

/// For each element of `out` (row-major), the flat index of the input element it reads.
pub(crate) fn broadcast_index(input: &[usize], out: &[usize]) -> Vec<usize> {
    let n: usize = out.iter().product();
    let off = out.len() - input.len();
    let in_strides = array::strides(input);
    // Stride 0 on broadcast axes.
    let st: Vec<usize> = (0..out.len())
        .map(|i| {
            if i < off || input[i - off] == 1 {
                0
            } else {
                in_strides[i - off]
            }
        })
        .collect();
    let mut idx = Vec::with_capacity(n);
    let mut counter = vec![0usize; out.len()];
    let mut flat = 0usize;
    for _ in 0..n {
        idx.push(flat);
        // Increment the multi-index, keeping `flat` in step.
        for ax in (0..out.len()).rev() {
            counter[ax] += 1;
            flat += st[ax];
            if counter[ax] < out[ax] {
                break;
            }
            flat -= st[ax] * counter[ax];
            counter[ax] = 0;
        }
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcast_index_maps() {
        assert_eq!(broadcast_index(&[3], &[2, 3]), vec![0, 1, 2, 0, 1, 2]);
        assert_eq!(broadcast_index(&[2, 1], &[2, 3]), vec![0, 0, 0, 1, 1, 1]);
        assert_eq!(broadcast_index(&[], &[2]), vec![0, 0]);
        assert_eq!(broadcast_dims(&[&[2, 1], &[3]]).unwrap(), vec![2, 3]);
        assert!(broadcast_dims(&[&[2], &[3]]).is_err());
    }
}
