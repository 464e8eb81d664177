//! Constant data in the half types, and Casts that cancel.

use infopt_ir::{DataType, Graph, IrError, Tensor, ValueId};

use super::half_type::Half;
use crate::pass::PassCx;

/// A converted tensor and what the conversion lost.
pub struct Converted {
    pub tensor: Tensor,
    /// Finite values beyond the half type's range, clamped to its largest value.
    pub clamped: usize,
    /// Nonzero values that became zero (below the smallest subnormal).
    pub flushed: usize,
}

/// Converts a float32 tensor to `to`, clamping finite values beyond the
/// range (rather than producing infinities) and counting values flushed to zero.
pub fn convert_tensor(t: &Tensor, to: Half) -> Result<Converted, IrError> {
    if t.dtype() != DataType::Float {
        return Err(IrError::Unsupported(format!(
            "converting a {} tensor to {}",
            t.dtype(),
            to.type_name()
        )));
    }
    // Straight from the (possibly memory-mapped) bytes: no f64 copy of a
    // large weight.
    let raw = t.raw_bytes()?;
    let mut clamped = 0;
    let mut flushed = 0;
    let mut bytes: Vec<u8> = Vec::with_capacity(raw.len() / 2);
    for c in raw.chunks_exact(4) {
        let x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        let bits = match to {
            Half::F16 => {
                let max = half::f16::MAX.to_f32();
                let y = if x.is_finite() && x.abs() > max {
                    clamped += 1;
                    max.copysign(x)
                } else {
                    x
                };
                let h = half::f16::from_f32(y);
                if h.to_f32() == 0.0 && y != 0.0 {
                    flushed += 1;
                }
                h.to_bits()
            }
            Half::Bf16 => {
                let max = half::bf16::MAX.to_f32();
                let y = if x.is_finite() && x.abs() > max {
                    clamped += 1;
                    max.copysign(x)
                } else {
                    x
                };
                let h = half::bf16::from_f32(y);
                if h.to_f32() == 0.0 && y != 0.0 {
                    flushed += 1;
                }
                // Rounding can still reach infinity just below f32::MAX.
                if h.is_infinite() && y.is_finite() {
                    clamped += 1;
                    half::bf16::MAX.copysign(h).to_bits()
                } else {
                    h.to_bits()
                }
            }
        };
        bytes.extend_from_slice(&bits.to_le_bytes());
    }
    Ok(Converted {
        tensor: Tensor::from_raw(to.dtype(), t.dims().to_vec(), bytes.into()),
        clamped,
        flushed,
    })
}

/// Magnitudes at or above this stand for infinity (`finfo(float32).min` in
/// attention masks): clamping them to the half type's largest value keeps
/// their meaning.
pub const SENTINEL: f32 = 1e30;

/// Largest finite magnitude of a float32 tensor below [`SENTINEL`] (0 for
/// other types).
pub fn largest_finite(t: &Tensor) -> f32 {
    if t.dtype() != DataType::Float {
        return 0.0;
    }
    let Ok(raw) = t.raw_bytes() else {
        return 0.0;
    };
    raw.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]).abs())
        .filter(|x| x.is_finite() && *x < SENTINEL)
        .fold(0.0, f32::max)
}

/// Says what converting tensor `name` lost, if anything: clamping changes
/// results and is a note; tiny values flushed to zero are a detail (one
/// summary note per run counts them, see the pass). Returns how many values
/// were flushed.
pub fn note_rounding(cx: &mut PassCx, to: Half, name: &str, c: &Converted) -> usize {
    let pass = to.pass_name();
    if c.clamped > 0 {
        let max = match to {
            Half::F16 => half::f16::MAX.to_f32(),
            Half::Bf16 => half::bf16::MAX.to_f32(),
        };
        cx.note(format!(
            "{pass}: '{name}': {} value{} beyond ±{max:e} clamped to ±{max:e}",
            c.clamped,
            if c.clamped == 1 { "" } else { "s" }
        ));
    }
    if c.flushed > 0 {
        cx.detail(format!(
            "{pass}: '{name}': {} nonzero value{} below the smallest {} subnormal became 0",
            c.flushed,
            if c.flushed == 1 { "" } else { "s" },
            to.type_name()
        ));
    }
    c.flushed
}

/// True when casting `from` to `to` is exact for every value.
fn widens(from: DataType, to: DataType) -> bool {
    use DataType::*;
    from == to
        || matches!(
            (from, to),
            (Float16 | Bfloat16, Float | Double) | (Float, Double)
        )
}

fn cast_target(g: &Graph, n: infopt_ir::NodeId) -> Option<DataType> {
    let to = g.node(n).attr_int("to").ok().flatten()?;
    Some(DataType::from_code(i32::try_from(to).ok()?))
}

/// Removes Casts to the type their input already has, and second Casts of
/// exact round trips (`Cast(Cast(x:f16, f32), f16)` reads `x`). Casts left
/// without readers go too. Returns the number of Casts removed.
pub fn cancel_casts(g: &mut Graph) -> usize {
    let mut removed = 0;
    let dtype = |g: &Graph, v: ValueId| g.value_type(v).map(|t| t.dtype).unwrap_or(DataType::Undefined);
    loop {
        let mut changed = false;
        for id in g.node_ids() {
            if g.try_node(id).is_none() || !g.node(id).is("Cast") {
                continue;
            }
            let (Some(x), Some(out), Some(to)) = (
                g.node(id).inputs.first().copied().flatten(),
                g.node(id).outputs.first().copied().flatten(),
                cast_target(g, id),
            ) else {
                continue;
            };
            if g.is_graph_output(out) {
                continue;
            }
            // The value this Cast computes exactly, without it.
            let mut source = None;
            if dtype(g, x) == to {
                source = Some(x);
            } else if let Some((p, _)) = g.value(x).producer
                && g.node(p).is("Cast")
                && let Some(x0) = g.node(p).inputs.first().copied().flatten()
                && dtype(g, x0) == to
                && widens(to, dtype(g, x))
            {
                source = Some(x0);
            }
            let Some(src) = source else { continue };
            if !g.can_replace(out, src) {
                continue;
            }
            g.replace_all_uses(out, src);
            g.remove_node(id);
            g.remove_value(out);
            removed += 1;
            changed = true;
        }
        // Casts nobody reads any more.
        for id in g.node_ids() {
            if g.try_node(id).is_none() || !g.node(id).is("Cast") {
                continue;
            }
            let Some(out) = g.node(id).outputs.first().copied().flatten() else {
                continue;
            };
            if g.reader_count(out) == 0 {
                g.remove_node(id);
                g.remove_value(out);
                removed += 1;
                changed = true;
            }
        }
        if !changed {
            return removed;
        }
    }
}
