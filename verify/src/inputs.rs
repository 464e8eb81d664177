//! Model inputs: shapes from `--input-shape` arguments and arrays, arrays
//! read from `.npz` / `.npy` files and folders, and seeded generation.
//!
//! Files: the `.npy` header is parsed by `ndarray-npy`, the data decoded here, so that any
//! dtype a model input can have is read in one pass (`<f2` included). `.npz` archives may
//! be stored or deflate-compressed (`np.savez` / `np.savez_compressed`); inflating uses
//! `zip` with the pure-Rust zlib-rs backend. Fortran-ordered arrays (`np.save(a.T)`) are read
//! in C order, as numpy reads them.
//!
//! An array whose dtype differs from the input's is converted when nothing is lost in
//! kind: float to float (rounded), integer to integer (every value must fit), integer to
//! float; `bool` only to `bool`. A float array for an integer input is refused.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::Path;

use half::f16;
use infopt_runtime::inputs::{self, InputGen};
use infopt_runtime::{DType, HostTensor, InputShapes, IoSpec, LoadedModel, TensorData};
use serde::Serialize;

/// One `--input-shape` argument, parsed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ShapeArg {
    /// `NAME:1x3x224x224`: every dim of one input.
    Dims { input: String, dims: Vec<i64> },
    /// `NAME:batch=1,seq=128`: symbol values.
    Symbols {
        input: String,
        symbols: Vec<(String, i64)>,
    },
}

/// Where the inputs came from, for reports.
#[derive(Serialize, Debug, Clone)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum InputSource {
    Generated { seed: u64, vocab: u64 },
    File { path: String },
}

impl InputSource {
    pub fn describe(&self) -> String {
        match self {
            InputSource::Generated { seed, .. } => format!("generated with seed {seed}"),
            InputSource::File { path } => format!("from {path}"),
        }
    }
}

/// Resolved input options: the shapes to load with, and the arrays read from `--inputs`.
#[derive(Clone)]
pub struct Inputs {
    pub shape_args: Vec<ShapeArg>,
    pub shapes: InputShapes,
    pub file: Option<Vec<HostTensor>>,
    pub source: InputSource,
    pub vocab: u64,
    /// Values chosen for some generated inputs instead of random ones (by
    /// input name): mode switches such as a sample rate, see
    /// [`crate::value_hints`]. Arrays from a file are never replaced.
    pub values: BTreeMap<String, f64>,
    /// Strings to draw a generated string input's values from (by input
    /// name; see [`crate::string_inputs`]): the runtime takes them as ids.
    pub strings: BTreeMap<String, Vec<String>>,
}

impl Inputs {
    /// Seed and vocabulary of generated inputs: the seed they were (or,
    /// with arrays from a file, would have been: 0) generated with, and the
    /// range integer inputs are drawn from.
    pub fn generated(&self) -> (u64, u64) {
        match self.source {
            InputSource::Generated { seed, vocab } => (seed, vocab),
            InputSource::File { .. } => (0, self.vocab),
        }
    }

    /// Reads `file` (if any) and combines its arrays' shapes with `shape_args`.
    /// Errors are one line, for the user.
    pub fn new(
        shape_args: Vec<ShapeArg>,
        file: Option<&Path>,
        seed: u64,
        vocab: u64,
    ) -> Result<Inputs, String> {
        if vocab == 0 {
            return Err("--vocab must be at least 1".into());
        }
        let (file, source) = match file {
            Some(p) => (
                Some(read_inputs(p)?),
                InputSource::File {
                    path: p.display().to_string(),
                },
            ),
            None => (None, InputSource::Generated { seed, vocab }),
        };
        let shapes = input_shapes(&shape_args, file.as_deref())?;
        Ok(Inputs {
            shape_args,
            shapes,
            file,
            source,
            vocab,
            values: BTreeMap::new(),
            strings: BTreeMap::new(),
        })
    }

    /// Arrays the caller holds in memory (the Python API's dict of numpy arrays)
    /// in place of a file; `origin` names them in reports and messages.
    pub fn given(
        shape_args: Vec<ShapeArg>,
        arrays: Vec<HostTensor>,
        origin: String,
        vocab: u64,
    ) -> Result<Inputs, String> {
        let shapes = input_shapes(&shape_args, Some(&arrays))?;
        Ok(Inputs {
            shape_args,
            shapes,
            file: Some(arrays),
            source: InputSource::File { path: origin },
            vocab,
            values: BTreeMap::new(),
            strings: BTreeMap::new(),
        })
    }

    /// Tensors for one loaded model: the file's arrays fitted to its inputs, or generated
    /// ones. Also checks that `NAME:symbol=…` arguments name a symbol of that input.
    pub fn for_model(&self, model: &dyn LoadedModel) -> Result<Vec<HostTensor>, String> {
        check_symbol_args(&self.shape_args, model.inputs())?;
        match (&self.file, &self.source) {
            (Some(arrays), InputSource::File { path }) => fit_inputs(model.inputs(), arrays, path),
            (_, InputSource::Generated { seed, .. }) => {
                let mut tensors = generate(model, *seed, self.vocab).map_err(|e| e.to_string())?;
                for t in &mut tensors {
                    if let Some(&v) = t.name().and_then(|n| self.values.get(n)) {
                        *t = filled(t, v)?;
                    }
                    if let Some(choices) = t.name().and_then(|n| self.strings.get(n)) {
                        let drawn = crate::string_inputs::drawn(choices, t.len(), *seed);
                        let ids = infopt_runtime::string_ids::ids_of(drawn);
                        *t = HostTensor::new(
                            t.name().map(str::to_string),
                            t.shape().to_vec(),
                            infopt_runtime::TensorData::I64(ids),
                        )
                        .map_err(|e| e.to_string())?;
                    }
                }
                Ok(tensors)
            }
            (None, InputSource::File { path }) => Err(format!("--inputs {path}: no arrays read")),
        }
    }
}

/// Input shapes from the file's arrays, then the `--input-shape` arguments (an input
/// given twice with different dims is an error).
pub fn input_shapes(args: &[ShapeArg], file: Option<&[HostTensor]>) -> Result<InputShapes, String> {
    let mut shapes = InputShapes::new();
    for t in file.unwrap_or_default() {
        if let Some(name) = t.name() {
            shapes = shapes.with_shape(name, t.shape().to_vec());
        }
    }
    for arg in args {
        match arg {
            ShapeArg::Dims { input, dims } => {
                let dims: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
                if let Some(prev) = shapes.shapes.get(input)
                    && prev != &dims
                {
                    return Err(format!(
                        "--input-shape {input}:{} contradicts the array for `{input}`, of shape {prev:?}",
                        dims.iter()
                            .map(|d| d.to_string())
                            .collect::<Vec<_>>()
                            .join("x")
                    ));
                }
                shapes = shapes.with_shape(input.clone(), dims);
            }
            ShapeArg::Symbols { symbols, .. } => {
                for (s, v) in symbols {
                    if let Some(&prev) = shapes.symbols.get(s)
                        && prev != *v as usize
                    {
                        return Err(format!(
                            "--input-shape binds symbol `{s}` twice ({prev} and {v})"
                        ));
                    }
                    shapes = shapes.with_symbol(s.clone(), *v as usize);
                }
            }
        }
    }
    Ok(shapes)
}

/// `NAME:sym=V` must name a model input that has the symbol `sym`.
fn check_symbol_args(args: &[ShapeArg], specs: &[IoSpec]) -> Result<(), String> {
    for arg in args {
        let ShapeArg::Symbols { input, symbols } = arg else {
            continue;
        };
        let Some(spec) = specs.iter().find(|s| &s.name == input) else {
            let names: Vec<&str> = specs.iter().map(|s| s.name.as_str()).collect();
            return Err(format!(
                "--input-shape {input}:…: `{input}` is not a model input (inputs: {})",
                names.join(", ")
            ));
        };
        for (s, _) in symbols {
            let has = spec
                .dims
                .iter()
                .flatten()
                .any(|d| matches!(d, infopt_runtime::DimSpec::Symbol(x) if x == s));
            if !has {
                return Err(format!(
                    "--input-shape {input}:{s}=…: input `{input}` has no dim named `{s}` (its dims: {})",
                    spec.dims_string()
                ));
            }
        }
    }
    Ok(())
}

/// Refuses to generate inputs that would take more than half of the memory
/// this process can still use: their sizes come from the dims the model
/// declares, and a file may declare any (a mutated channel count of
/// 1000000 once asked for 49 GB here).
pub fn check_generated_size(model: &dyn LoadedModel) -> Result<(), String> {
    let Some(available) = crate::memory::available_bytes() else {
        return Ok(());
    };
    let mut total: u128 = 0;
    let mut largest = String::new();
    let mut largest_bytes = 0u128;
    for (spec, dims) in model.inputs().iter().zip(model.input_shapes()) {
        let elements = dims
            .iter()
            .fold(1u128, |acc, &d| acc.saturating_mul(d as u128));
        let bytes = elements.saturating_mul(spec.dtype.size_of() as u128);
        total = total.saturating_add(bytes);
        if bytes >= largest_bytes {
            largest_bytes = bytes;
            largest = format!("{} {:?}", spec.name, dims);
        }
    }
    if total > u128::from(available / 2) {
        return Err(format!(
            "the generated inputs would take {} bytes ({largest} the largest), more than half of the {available} bytes available",
            total
        ));
    }
    Ok(())
}

/// Seeded inputs for a model: integers in [0, vocab) (token-type inputs in [0, 2)), masks
/// all ones, floats uniform in [-1, 1), booleans true.
pub fn generate(
    model: &dyn LoadedModel,
    seed: u64,
    vocab: u64,
) -> infopt_runtime::Result<Vec<HostTensor>> {
    let mut opts = InputGen {
        seed,
        vocab,
        ..InputGen::default()
    };
    for spec in model.inputs() {
        if spec.name.to_lowercase().contains("token_type") {
            opts = opts.with_vocab_for(spec.name.clone(), 2);
        }
    }
    check_generated_size(model).map_err(infopt_runtime::RuntimeError::InvalidArgument)?;
    let mut tensors = inputs::generate_for_model(model, &opts)?;
    for t in &mut tensors {
        if !t.name().is_some_and(|n| n.to_lowercase().contains("mask")) {
            continue;
        }
        let n = t.len();
        let ones = match t.dtype() {
            DType::F32 => TensorData::F32(vec![1.0; n]),
            DType::F64 => TensorData::F64(vec![1.0; n]),
            DType::F16 => TensorData::F16(vec![f16::ONE; n]),
            DType::I64 => TensorData::I64(vec![1; n]),
            DType::I32 => TensorData::I32(vec![1; n]),
            DType::I8 => TensorData::I8(vec![1; n]),
            DType::U8 => TensorData::U8(vec![1; n]),
            _ => continue,
        };
        *t = HostTensor::new(t.name.clone(), t.shape().to_vec(), ones)?;
    }
    Ok(tensors)
}

/// `t` with every element set to `v` (in `t`'s dtype; `v` must fit it).
fn filled(t: &HostTensor, v: f64) -> Result<HostTensor, String> {
    let n = t.len();
    let one = HostTensor::new(t.name.clone(), vec![n], TensorData::F64(vec![v; n]))
        .map_err(|e| e.to_string())?;
    let to = t.dtype();
    let converted = if to.is_float() {
        convert(&one, to)?
    } else if v.fract() == 0.0 && v.abs() < 9.0e15 {
        let ints = HostTensor::new(t.name.clone(), vec![n], TensorData::I64(vec![v as i64; n]))
            .map_err(|e| e.to_string())?;
        convert(&ints, to)?
    } else {
        return Err(format!(
            "input `{}`: value {v} does not fit its type {to}",
            t.name().unwrap_or("?")
        ));
    };
    HostTensor::new(t.name.clone(), t.shape().to_vec(), converted.data().clone())
        .map_err(|e| e.to_string())
}

/// Reads named arrays from an `.npz`, a single `.npy` (named after the file stem) or a
/// folder of `.npy` files (each named after its stem): what `--inputs` gives.
pub fn read_inputs(path: &Path) -> Result<Vec<HostTensor>, String> {
    if let Some(why) = a_dataset_folder(path) {
        return Err(why);
    }
    read_arrays(path).map_err(|e| format!("--inputs {e}"))
}

/// [`read_inputs`] for one sample of a dataset: errors start with the path,
/// not with `--inputs` (the user gave `--calib-data` or `--data`).
pub fn read_arrays(path: &Path) -> Result<Vec<HostTensor>, String> {
    let shown = path.display();
    if path.is_dir() {
        let mut entries: Vec<_> = std::fs::read_dir(path)
            .map_err(|e| format!("{shown}: {e}"))?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_file())
            .collect();
        entries.sort();
        let with = |ext: &str| -> Vec<&std::path::PathBuf> {
            entries
                .iter()
                .filter(|p| p.extension().is_some_and(|x| x == ext))
                .collect()
        };
        let files = with("npy");
        if files.is_empty() {
            return Err(format!("{shown}: the folder has no .npy files"));
        }
        return files.iter().map(|f| read_npy_file(f)).collect();
    }
    let bytes = std::fs::read(path).map_err(|e| format!("{shown}: {e}"))?;
    if bytes.starts_with(b"PK") {
        return read_npz(&bytes).map_err(|e| format!("{shown}: {e}"));
    }
    if bytes.starts_with(b"\x93NUMPY") {
        return read_npy_file(path).map(|t| vec![t]);
    }
    Err(format!("{shown}: neither an .npz (zip) nor an .npy file"))
}

/// Why a folder of `.npz` files and no `.npy` is not `--inputs`: it is a
/// dataset (one sample per file, as `--calib-data` reads it), while
/// `--inputs` is one sample. None for anything else.
fn a_dataset_folder(path: &Path) -> Option<String> {
    let mut entries: Vec<_> = std::fs::read_dir(path)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    entries.sort();
    let has = |p: &std::path::PathBuf, ext: &str| p.extension().is_some_and(|x| x == ext);
    if entries.iter().any(|p| has(p, "npy")) {
        return None;
    }
    let npz: Vec<_> = entries.iter().filter(|p| has(p, "npz")).collect();
    let first = npz.first()?;
    Some(format!(
        "--inputs {}: the folder holds {} .npz samples (a dataset, as --calib-data reads it), but --inputs is one sample: give one file, e.g. --inputs {}, or a folder of .npy files named after the model's inputs",
        path.display(),
        npz.len(),
        first.display()
    ))
}

fn read_npy_file(path: &Path) -> Result<HostTensor, String> {
    let name = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    decode_npy(&name, &bytes).map_err(|e| format!("{}: {e}", path.display()))
}

fn read_npz(bytes: &[u8]) -> Result<Vec<HostTensor>, String> {
    let mut zip = zip::ZipArchive::new(std::io::Cursor::new(bytes)).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for i in 0..zip.len() {
        let mut entry = zip.by_index(i).map_err(|e| e.to_string())?;
        if entry.is_dir() {
            continue;
        }
        let full = entry.name().to_string();
        let name = full.strip_suffix(".npy").unwrap_or(&full).to_string();
        let mut data = Vec::with_capacity(entry.size() as usize);
        entry
            .read_to_end(&mut data)
            .map_err(|e| format!("array `{name}`: {e}"))?;
        out.push(decode_npy(&name, &data).map_err(|e| format!("array `{name}`: {e}"))?);
    }
    if out.is_empty() {
        return Err("the archive holds no arrays".into());
    }
    Ok(out)
}

/// Decodes one `.npy` image into a named host tensor.
pub fn decode_npy(name: &str, bytes: &[u8]) -> Result<HostTensor, String> {
    use ndarray_npy::npy::header::Header;
    let mut reader = bytes;
    let header = Header::from_reader(&mut reader).map_err(|e| format!("bad .npy header: {e}"))?;
    NpyLayout::of(&header)?.decode(name, header.shape.clone(), reader)
}

/// One array from its raw parts: numpy's dtype string (`<f4`, `|b1`), its
/// shape and its elements in C order (the Python API's arrays, without an
/// `.npy` file in between).
pub fn decode_raw(
    name: &str,
    dtype: &str,
    shape: Vec<usize>,
    data: &[u8],
) -> Result<HostTensor, String> {
    NpyLayout::from_descr(dtype.to_string())?.decode(name, shape, data)
}

/// How the elements of an `.npy` array are stored: dtype code, byte order
/// and width (checked to be one infopt reads, C order).
#[derive(Clone, Debug)]
pub(crate) struct NpyLayout {
    /// The descriptor as written (`<f4`), for messages.
    descr: String,
    /// The type code without byte order (`f4`).
    code: String,
    big_endian: bool,
    /// Bytes per element.
    width: usize,
    /// Stored first axis fastest: [`NpyLayout::decode`] reorders to C order.
    fortran: bool,
}

impl NpyLayout {
    pub(crate) fn of(header: &ndarray_npy::npy::header::Header) -> Result<NpyLayout, String> {
        let descr = header
            .type_descriptor
            .as_string()
            .ok_or_else(|| format!("unsupported dtype {}", header.type_descriptor))?
            .clone();
        let mut layout = NpyLayout::from_descr(descr)?;
        // With at most one axis longer than 1 both orders are the same bytes.
        layout.fortran =
            header.layout.is_fortran() && header.shape.iter().filter(|&&d| d > 1).count() > 1;
        Ok(layout)
    }

    /// Whether the elements are stored first axis fastest (numpy's
    /// `fortran_order`, what `np.save(np.transpose(a))` writes).
    pub(crate) fn is_fortran(&self) -> bool {
        self.fortran
    }

    /// The layout of a dtype descriptor (`<f4`).
    fn from_descr(descr: String) -> Result<NpyLayout, String> {
        let (order, code) = descr.split_at(1.min(descr.len()));
        let (order, code) = if matches!(order, "<" | ">" | "|" | "=") {
            (order, code)
        } else {
            ("=", descr.as_str())
        };
        // Strings: `U<n>` holds n UTF-32 code units per element, `S<n>` n
        // bytes (numpy's str_ and bytes_ arrays).
        // At most 1 MiB an element: a hostile header's `<U99999999999` must
        // not overflow the sizes computed from it.
        let chars = |prefix: &str| {
            code.strip_prefix(prefix)
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n <= 1 << 18)
        };
        let width = match code {
            "f8" | "i8" | "u8" => 8,
            "f4" | "i4" | "u4" => 4,
            "f2" | "e" | "i2" | "u2" => 2,
            "i1" | "b" | "u1" | "B" | "b1" | "?" => 1,
            _ if chars("U").is_some_and(|n| n > 0) => 4 * chars("U").unwrap_or(1),
            _ if chars("S").is_some_and(|n| n > 0) => chars("S").unwrap_or(1),
            _ => {
                return Err(format!(
                    "unsupported dtype {descr} (supported: float16/32/64, int8-64, uint8-64, bool, strings as str_ or bytes_)"
                ));
            }
        };
        Ok(NpyLayout {
            big_endian: order == ">",
            code: code.to_string(),
            descr,
            width,
            fortran: false,
        })
    }

    /// Bytes per element.
    pub(crate) fn width(&self) -> usize {
        self.width
    }

    /// One element of a string array: UTF-32 code units (`U`) or bytes
    /// (`S`), up to the first NUL (numpy pads with them).
    fn string_of(&self, element: &[u8]) -> String {
        if self.code.starts_with('S') {
            let end = element
                .iter()
                .position(|&b| b == 0)
                .unwrap_or(element.len());
            return String::from_utf8_lossy(&element[..end]).into_owned();
        }
        element
            .chunks_exact(4)
            .map(|c| {
                let a = [c[0], c[1], c[2], c[3]];
                match self.big_endian {
                    true => u32::from_be_bytes(a),
                    false => u32::from_le_bytes(a),
                }
            })
            .take_while(|&u| u != 0)
            .map(|u| char::from_u32(u).unwrap_or(char::REPLACEMENT_CHARACTER))
            .collect()
    }

    /// The tensor of `shape` whose elements are `data`.
    pub(crate) fn decode(
        &self,
        name: &str,
        shape: Vec<usize>,
        data: &[u8],
    ) -> Result<HostTensor, String> {
        let (descr, big) = (&self.descr, self.big_endian);
        let n = shape
            .iter()
            .try_fold(1usize, |a, &d| a.checked_mul(d))
            .ok_or("the shape overflows")?;
        let c_order;
        let data = if self.fortran && n.checked_mul(self.width) == Some(data.len()) {
            c_order = fortran_to_c_order(data, &shape, self.width);
            &c_order[..]
        } else {
            data
        };
        macro_rules! num {
            ($t:ty, $variant:ident) => {{
                const W: usize = std::mem::size_of::<$t>();
                if data.len() != n * W {
                    return Err(format!(
                        "shape {:?} of {descr} needs {} data bytes, the file has {}",
                        shape,
                        n * W,
                        data.len()
                    ));
                }
                TensorData::$variant(
                    data.chunks_exact(W)
                        .map(|c| {
                            let mut a = [0u8; W];
                            a.copy_from_slice(c);
                            if big {
                                <$t>::from_be_bytes(a)
                            } else {
                                <$t>::from_le_bytes(a)
                            }
                        })
                        .collect(),
                )
            }};
        }
        let data = match self.code.as_str() {
            c if c.starts_with('U') || c.starts_with('S') => {
                let needed = n.checked_mul(self.width).ok_or("the shape overflows")?;
                if data.len() != needed {
                    return Err(format!(
                        "shape {:?} of {descr} needs {needed} data bytes, the file has {}",
                        shape,
                        data.len()
                    ));
                }
                let strings = data
                    .chunks_exact(self.width)
                    .map(|e| self.string_of(e))
                    .collect::<Vec<String>>();
                TensorData::I64(infopt_runtime::string_ids::ids_of(strings))
            }
            "f4" => num!(f32, F32),
            "f8" => num!(f64, F64),
            "f2" | "e" => num!(f16, F16),
            "i1" | "b" => num!(i8, I8),
            "i2" => num!(i16, I16),
            "i4" => num!(i32, I32),
            "i8" => num!(i64, I64),
            "u1" | "B" => num!(u8, U8),
            "u2" => num!(u16, U16),
            "u4" => num!(u32, U32),
            "u8" => num!(u64, U64),
            _ => {
                if data.len() != n {
                    return Err(format!(
                        "shape {:?} of bool needs {n} data bytes, the file has {}",
                        shape,
                        data.len()
                    ));
                }
                TensorData::Bool(data.iter().map(|&b| b != 0).collect())
            }
        };
        HostTensor::new(Some(name.to_string()), shape, data).map_err(|e| e.to_string())
    }
}

/// The elements of a Fortran-ordered array of `shape` (first axis
/// fastest), `width` bytes each, in C order (last axis fastest): the
/// transpose numpy makes when it reads one.
fn fortran_to_c_order(data: &[u8], shape: &[usize], width: usize) -> Vec<u8> {
    let mut strides = Vec::with_capacity(shape.len());
    let mut stride = width;
    for &d in shape {
        strides.push(stride);
        stride *= d;
    }
    let mut out = Vec::with_capacity(data.len());
    let mut index = vec![0usize; shape.len()];
    let mut offset = 0usize;
    for _ in 0..data.len() / width.max(1) {
        out.extend_from_slice(&data[offset..offset + width]);
        // Advance the C-order index, last axis fastest, keeping the
        // Fortran offset in step.
        for axis in (0..shape.len()).rev() {
            index[axis] += 1;
            offset += strides[axis];
            if index[axis] < shape[axis] {
                break;
            }
            offset -= strides[axis] * shape[axis];
            index[axis] = 0;
        }
    }
    out
}

/// Integer elements widened exactly, `None` for float and bool data.
fn int_values(d: &TensorData) -> Option<Vec<i128>> {
    Some(match d {
        TensorData::I8(v) => v.iter().map(|&x| x.into()).collect(),
        TensorData::I16(v) => v.iter().map(|&x| x.into()).collect(),
        TensorData::I32(v) => v.iter().map(|&x| x.into()).collect(),
        TensorData::I64(v) => v.iter().map(|&x| x.into()).collect(),
        TensorData::U8(v) => v.iter().map(|&x| x.into()).collect(),
        TensorData::U16(v) => v.iter().map(|&x| x.into()).collect(),
        TensorData::U32(v) => v.iter().map(|&x| x.into()).collect(),
        TensorData::U64(v) => v.iter().map(|&x| x.into()).collect(),
        _ => return None,
    })
}

/// Converts `t` to `to` (see the module doc for what is allowed).
pub fn convert(t: &HostTensor, to: DType) -> Result<HostTensor, String> {
    let from = t.dtype();
    if from == to {
        return Ok(t.clone());
    }
    let refuse = || format!("cannot use {from} data for an input of type {to}");
    let data = if to.is_float() && (from.is_float() || from.is_integer()) {
        let v = t.to_f64_vec();
        match to {
            DType::F32 => TensorData::F32(v.iter().map(|&x| x as f32).collect()),
            DType::F64 => TensorData::F64(v),
            DType::F16 => TensorData::F16(v.iter().map(|&x| f16::from_f64(x)).collect()),
            DType::BF16 => TensorData::BF16(v.iter().map(|&x| half::bf16::from_f64(x)).collect()),
            _ => unreachable!(),
        }
    } else if to.is_integer() {
        let v = int_values(t.data()).ok_or_else(refuse)?;
        macro_rules! ints {
            ($t:ty, $variant:ident) => {
                TensorData::$variant(
                    v.iter()
                        .map(|&x| {
                            <$t>::try_from(x).map_err(|_| {
                                format!("value {x} does not fit the input's type {to}")
                            })
                        })
                        .collect::<Result<_, _>>()?,
                )
            };
        }
        match to {
            DType::I8 => ints!(i8, I8),
            DType::I16 => ints!(i16, I16),
            DType::I32 => ints!(i32, I32),
            DType::I64 => ints!(i64, I64),
            DType::U8 => ints!(u8, U8),
            DType::U16 => ints!(u16, U16),
            DType::U32 => ints!(u32, U32),
            DType::U64 => ints!(u64, U64),
            _ => unreachable!(),
        }
    } else {
        return Err(refuse());
    };
    HostTensor::new(t.name.clone(), t.shape().to_vec(), data).map_err(|e| e.to_string())
}

/// The file's arrays in model input order, converted to the input dtypes. Every input
/// needs an array and every array must be an input; a model of one input takes a file's
/// one array whatever its name (a `.npy` is named by its file, `np.savez(f, x)` calls
/// its array `arr_0`: nothing else could be meant).
pub fn fit_inputs(
    specs: &[IoSpec],
    arrays: &[HostTensor],
    source: &str,
) -> Result<Vec<HostTensor>, String> {
    if let ([spec], [only]) = (specs, arrays)
        && only.name() != Some(spec.name.as_str())
    {
        let renamed = only.clone().named(&spec.name);
        return fit_inputs(specs, std::slice::from_ref(&renamed), source);
    }
    let wanted: BTreeSet<&str> = specs.iter().map(|s| s.name.as_str()).collect();
    let extra: Vec<&str> = arrays
        .iter()
        .filter_map(|t| t.name())
        .filter(|n| !wanted.contains(n))
        .collect();
    if !extra.is_empty() {
        return Err(format!(
            "{source} has arrays that are not model inputs: {} (inputs: {}): save only the model's inputs in each file, named as the model names them (labels and other arrays in files of their own)",
            extra.join(", "),
            specs
                .iter()
                .map(|s| s.name.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    specs
        .iter()
        .map(|spec| {
            let t = arrays
                .iter()
                .find(|t| t.name() == Some(spec.name.as_str()))
                .ok_or_else(|| {
                    format!(
                        "{source} has no array for input `{}` (its arrays: {}): name each array after the model input it feeds",
                        spec.name,
                        arrays
                            .iter()
                            .map(|t| t.name().unwrap_or("?"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                })?;
            convert(t, spec.dtype).map_err(|e| format!("{source}, array `{}`: {e}", spec.name))
        })
        .collect()
}

/// `name dtype [dims]` for each tensor, comma-separated.
pub fn describe(tensors: &[HostTensor]) -> String {
    describe_with_strings(tensors, &[])
}

/// [`describe`], the inputs named in `strings` (string inputs, held as
/// ids) said as `str`.
pub fn describe_with_strings(tensors: &[HostTensor], strings: &[String]) -> String {
    tensors
        .iter()
        .map(|t| {
            let name = t.name().unwrap_or("?");
            let dtype = match strings.iter().any(|s| s == name) {
                true => "str".to_string(),
                false => t.dtype().to_string(),
            };
            format!(
                "{} {} [{}]",
                name,
                dtype,
                t.shape()
                    .iter()
                    .map(|d| d.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An `.npy` image as numpy writes it (format 1.0, header padded to 64 bytes).
    pub(crate) fn npy(descr: &str, shape: &str, data: &[u8]) -> Vec<u8> {
        npy_ordered(descr, false, shape, data)
    }

    /// [`npy`] with numpy's `fortran_order` flag.
    pub(crate) fn npy_ordered(descr: &str, fortran: bool, shape: &str, data: &[u8]) -> Vec<u8> {
        let order = if fortran { "True" } else { "False" };
        let mut header =
            format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
        while (10 + header.len() + 1) % 64 != 0 {
            header.push(' ');
        }
        header.push('\n');
        let mut out = b"\x93NUMPY\x01\x00".to_vec();
        out.extend_from_slice(&(header.len() as u16).to_le_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn decodes_string_arrays_as_ids_of_their_strings() {
        // numpy's str_ ("<U2": UTF-32, NUL-padded) and bytes_ ("|S2").
        let mut wide = Vec::new();
        for c in ['a', 'b', 'é', '\0'] {
            wide.extend_from_slice(&(c as u32).to_le_bytes());
        }
        let t = decode_npy("w", &npy("<U2", "(2,)", &wide)).unwrap();
        let TensorData::I64(ids) = t.data() else {
            panic!("{:?}", t.dtype())
        };
        assert_eq!(infopt_runtime::string_ids::strings_of(ids), ["ab", "é"]);
        let t = decode_npy("s", &npy("|S2", "(2,)", b"ab\0\0")).unwrap();
        let TensorData::I64(ids) = t.data() else {
            panic!("{:?}", t.dtype())
        };
        assert_eq!(infopt_runtime::string_ids::strings_of(ids), ["ab", ""]);
        let e = decode_npy("s", &npy("|S2", "(3,)", b"ab")).unwrap_err();
        assert!(e.contains("needs 6 data bytes, the file has 2"), "{e}");
        // A width no file holds is refused, not multiplied.
        let e = decode_npy("s", &npy("<U99999999999999999", "(3,)", b"ab")).unwrap_err();
        assert!(e.contains("unsupported dtype <U99999999999999999"), "{e}");
        let e = decode_npy("s", &npy("<U0", "(1,)", b"")).unwrap_err();
        assert!(e.contains("unsupported dtype <U0"), "{e}");
    }

    #[test]
    fn fortran_ordered_arrays_are_read_in_c_order() {
        // np.save of a.T where a = arange(24).reshape(4, 3, 2): shape (2, 3, 4),
        // fortran_order True, the bytes those of `a` (element [i, j, k] of
        // the transpose at offset i + 2j + 6k).
        let f32s = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        let stored: Vec<f32> = (0..24).map(|x| x as f32).collect();
        let t = decode_npy("x", &npy_ordered("<f4", true, "(2, 3, 4)", &f32s(&stored))).unwrap();
        assert_eq!(t.shape(), &[2, 3, 4]);
        let expected: Vec<f32> = (0..2)
            .flat_map(|i| (0..3).flat_map(move |j| (0..4).map(move |k| (i + 2 * j + 6 * k) as f32)))
            .collect();
        assert_eq!(t.as_slice::<f32>(), Some(&expected[..]));
        // Wider elements move whole, and a string array too.
        let t = decode_npy("y", &npy_ordered("|S2", true, "(2, 2)", b"a0b0a1b1")).unwrap();
        let TensorData::I64(ids) = t.data() else {
            panic!("{:?}", t.dtype())
        };
        assert_eq!(
            infopt_runtime::string_ids::strings_of(ids),
            ["a0", "a1", "b0", "b1"]
        );
        // One axis longer than 1: the same bytes in either order.
        let t = decode_npy(
            "z",
            &npy_ordered("<f4", true, "(1, 3)", &f32s(&[1.0, 2.0, 3.0])),
        )
        .unwrap();
        assert_eq!(t.as_slice::<f32>(), Some(&[1.0f32, 2.0, 3.0][..]));
        // A short file is still said as such.
        let e = decode_npy("w", &npy_ordered("<f4", true, "(2, 2)", &f32s(&[1.0]))).unwrap_err();
        assert!(e.contains("needs 16 data bytes, the file has 4"), "{e}");
    }

    #[test]
    fn decodes_npy_dtypes() {
        let f: Vec<u8> = [1.5f32, -2.0]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let t = decode_npy("x", &npy("<f4", "(2,)", &f)).unwrap();
        assert_eq!(t.as_slice::<f32>(), Some(&[1.5f32, -2.0][..]));
        assert_eq!(t.name(), Some("x"));
        let h: Vec<u8> = [f16::from_f32(0.5)]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        let t = decode_npy("h", &npy("<f2", "(1, 1)", &h)).unwrap();
        assert_eq!((t.dtype(), t.shape()), (DType::F16, &[1usize, 1][..]));
        let i: Vec<u8> = [7i64, -1].iter().flat_map(|x| x.to_be_bytes()).collect();
        let t = decode_npy("i", &npy(">i8", "(2,)", &i)).unwrap();
        assert_eq!(t.as_slice::<i64>(), Some(&[7i64, -1][..]));
        let t = decode_npy("m", &npy("|b1", "(3,)", &[1, 0, 1])).unwrap();
        assert_eq!(t.as_slice::<bool>(), Some(&[true, false, true][..]));
        let t = decode_npy("s", &npy("<f8", "()", &2.0f64.to_le_bytes())).unwrap();
        assert_eq!(t.shape(), &[] as &[usize]);
        let e = decode_npy("x", &npy("<f4", "(3,)", &f)).unwrap_err();
        assert!(e.contains("needs 12 data bytes, the file has 8"), "{e}");
        let e = decode_npy("x", &npy("<c8", "(1,)", &f)).unwrap_err();
        assert!(e.contains("unsupported dtype <c8"), "{e}");
        assert!(decode_npy("x", b"garbage").is_err());
    }

    #[test]
    fn a_folder_of_npz_samples_is_refused_naming_one_to_give() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["0001.npz", "0000.npz"] {
            std::fs::write(dir.path().join(n), b"PK").unwrap();
        }
        let e = read_inputs(dir.path()).unwrap_err();
        assert!(e.contains("holds 2 .npz samples"), "{e}");
        assert!(e.contains("--inputs is one sample"), "{e}");
        assert!(e.contains("0000.npz"), "{e}");
        let empty = tempfile::tempdir().unwrap();
        let e = read_inputs(empty.path()).unwrap_err();
        assert!(e.ends_with("the folder has no .npy files"), "{e}");
    }

    #[test]
    fn conversions_keep_kind() {
        let t = HostTensor::from_vec(vec![2], vec![1.0f64, 2.5]).unwrap();
        assert_eq!(
            convert(&t, DType::F32).unwrap().as_slice::<f32>(),
            Some(&[1.0f32, 2.5][..])
        );
        assert!(
            convert(&t, DType::I64)
                .unwrap_err()
                .contains("cannot use f64")
        );
        let t = HostTensor::from_vec(vec![2], vec![3i64, 300]).unwrap();
        assert_eq!(
            convert(&t, DType::I32).unwrap().as_slice::<i32>(),
            Some(&[3, 300][..])
        );
        assert!(
            convert(&t, DType::U8)
                .unwrap_err()
                .contains("300 does not fit")
        );
        assert_eq!(convert(&t, DType::F32).unwrap().dtype(), DType::F32);
        let b = HostTensor::from_vec(vec![1], vec![true]).unwrap();
        assert!(convert(&b, DType::I64).is_err());
    }

    #[test]
    fn fitting_names_missing_and_extra_arrays() {
        let spec = |n: &str| IoSpec {
            name: n.into(),
            dtype: DType::F32,
            dims: None,
        };
        let a = HostTensor::from_vec(vec![1], vec![1.0f32])
            .unwrap()
            .named("a");
        let z = HostTensor::from_vec(vec![1], vec![1.0f32])
            .unwrap()
            .named("z");
        let e =
            fit_inputs(&[spec("a"), spec("b")], std::slice::from_ref(&a), "in.npz").unwrap_err();
        assert_eq!(
            e,
            "in.npz has no array for input `b` (its arrays: a): name each array after the model input it feeds"
        );
        let e = fit_inputs(&[spec("a")], &[a.clone(), z], "in.npz").unwrap_err();
        assert_eq!(
            e,
            "in.npz has arrays that are not model inputs: z (inputs: a): save only the model's inputs in each file, named as the model names them (labels and other arrays in files of their own)"
        );
        assert_eq!(fit_inputs(&[spec("a")], &[a], "f").unwrap().len(), 1);
        // One input, one array: the array is the input, whatever its name.
        let z = HostTensor::from_vec(vec![1], vec![2.0f32])
            .unwrap()
            .named("arr_0");
        let fitted = fit_inputs(&[spec("a")], &[z], "f").unwrap();
        assert_eq!(fitted[0].name(), Some("a"));
        assert_eq!(fitted[0].as_slice::<f32>(), Some(&[2.0f32][..]));
    }

    #[test]
    fn shapes_from_file_and_arguments() {
        let file = vec![
            HostTensor::from_vec(vec![2, 3], vec![0f32; 6])
                .unwrap()
                .named("x"),
        ];
        let args = vec![ShapeArg::Symbols {
            input: "y".into(),
            symbols: vec![("batch".into(), 4)],
        }];
        let s = input_shapes(&args, Some(&file)).unwrap();
        assert_eq!(s.shapes["x"], vec![2, 3]);
        assert_eq!(s.symbols["batch"], 4);
        let args = vec![ShapeArg::Dims {
            input: "x".into(),
            dims: vec![1, 3],
        }];
        let e = input_shapes(&args, Some(&file)).unwrap_err();
        assert!(e.contains("contradicts"), "{e}");
    }
}

/// Plainer values for generated inputs, tried in turn when the original
/// model fails to run on the seeded ones: an integer input is often an
/// index, an axis or a count (seeded values in `[0, vocab)` fall out of
/// range), and a float input may have to be positive (scales, a Log's
/// argument).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fallback {
    /// Every integer element 0 (a valid index and axis of any tensor).
    IntegersZero,
    /// Every integer element 1 (a valid divisor and count), floats made
    /// positive (`|x| + 0.5`).
    IntegersOnePositiveFloats,
    /// Integer elements counting from 0 (distinct axes), or from 1
    /// (distinct axes and non-zero steps).
    IntegersCounting(u8),
}

impl Fallback {
    pub const ALL: [Fallback; 4] = [
        Fallback::IntegersZero,
        Fallback::IntegersOnePositiveFloats,
        Fallback::IntegersCounting(0),
        Fallback::IntegersCounting(1),
    ];

    pub fn describe(self) -> &'static str {
        match self {
            Fallback::IntegersZero => "integer inputs set to 0",
            Fallback::IntegersOnePositiveFloats => {
                "integer inputs set to 1 and float inputs made positive"
            }
            Fallback::IntegersCounting(0) => "integer inputs counting from 0",
            Fallback::IntegersCounting(_) => "integer inputs counting from 1",
        }
    }

    /// The first plainer values `model` runs on, in [`Fallback::ALL`]'s
    /// order, with the fallback and the outputs: what to do when the seeded
    /// `tensors` make a model fail (the verification's inputs and
    /// `random:N` calibration samples alike).
    pub fn first_that_runs(
        model: &dyn LoadedModel,
        tensors: &[HostTensor],
    ) -> Option<(Fallback, Vec<HostTensor>, Vec<HostTensor>)> {
        Fallback::ALL.into_iter().find_map(|fb| {
            let plain = fb.apply(tensors)?;
            let outputs = model.run(&plain).ok()?;
            Some((fb, plain, outputs))
        })
    }

    /// `tensors` with this fallback's values; `None` when it changes nothing.
    pub fn apply(self, tensors: &[HostTensor]) -> Option<Vec<HostTensor>> {
        let (int, step) = match self {
            Fallback::IntegersZero => (0u8, 0u8),
            Fallback::IntegersOnePositiveFloats => (1, 0),
            Fallback::IntegersCounting(start) => (start, 1),
        };
        let floats = self == Fallback::IntegersOnePositiveFloats;
        let mut changed = false;
        let mut out = Vec::with_capacity(tensors.len());
        for t in tensors {
            let n = t.len();
            macro_rules! ints {
                ($variant:ident) => {{
                    changed = true;
                    // Counting wraps at 100, inside every integer type.
                    Some(TensorData::$variant(
                        (0..n)
                            .map(|i| (int as usize + (step as usize) * i) % 100)
                            .map(|v| v as _)
                            .collect(),
                    ))
                }};
            }
            let data = match t.data() {
                TensorData::I8(_) => ints!(I8),
                TensorData::I16(_) => ints!(I16),
                TensorData::I32(_) => ints!(I32),
                TensorData::I64(_) => ints!(I64),
                TensorData::U8(_) => ints!(U8),
                TensorData::U16(_) => ints!(U16),
                TensorData::U32(_) => ints!(U32),
                TensorData::U64(_) => ints!(U64),
                TensorData::F32(v) if floats => {
                    changed = true;
                    Some(TensorData::F32(v.iter().map(|x| x.abs() + 0.5).collect()))
                }
                TensorData::F64(v) if floats => {
                    changed = true;
                    Some(TensorData::F64(v.iter().map(|x| x.abs() + 0.5).collect()))
                }
                _ => None,
            };
            match data {
                Some(d) => out.push(HostTensor::new(t.name.clone(), t.shape().to_vec(), d).ok()?),
                None => out.push(t.clone()),
            }
        }
        changed.then_some(out)
    }
}
