//! numpy arrays as tensors, in memory: `infopt/_samples.py` hands each array
//! over as `(name, dtype, shape, bytes)` (numpy's dtype string such as
//! `<f4`, the elements in C order), decoded by the code that reads `.npy`
//! files, so the dtypes taken and the messages are the same.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

use infopt_runtime::HostTensor;

/// The arrays of one sample (or of `inputs=`), named.
pub fn tensors(raw: &Bound<'_, PyAny>) -> Result<Vec<HostTensor>, String> {
    let mut out = Vec::new();
    for item in raw.try_iter().map_err(|e| e.to_string())? {
        let item = item.map_err(|e| e.to_string())?;
        let (name, dtype, shape, data): (String, String, Vec<usize>, Bound<'_, PyBytes>) =
            item.extract().map_err(|e: PyErr| e.to_string())?;
        let t = infopt_verify::inputs::decode_raw(&name, &dtype, shape, data.as_bytes())
            .map_err(|e| format!("{name}: {e}"))?;
        out.push(t);
    }
    Ok(out)
}
