//! A stacked archive read one sample at a time: an `.npz` (or one `.npy`)
//! whose arrays share a leading sample axis, streamed item by item instead
//! of read whole, so memory does not grow with the number of samples in the
//! file.
//!
//! Each array gets its own reader over its stretch of the file: a stored
//! zip entry (`np.savez`) is read as it is, a deflated one
//! (`np.savez_compressed`) through an inflater that runs forward with the
//! samples. Samples are taken in order, so neither kind needs to seek back,
//! and one sample of every array is in memory at a time.

use std::fs::File;
use std::io::{BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use infopt_runtime::HostTensor;
use ndarray_npy::npy::header::Header;

use crate::inputs::NpyLayout;

/// One array of the archive, positioned at its next item.
struct ArrayStream {
    name: String,
    reader: Box<dyn Read + Send>,
    layout: NpyLayout,
    /// The shape of one item, with the leading axis of 1 kept.
    item_shape: Vec<usize>,
    item_bytes: usize,
    /// Items along the leading axis.
    count: usize,
}

impl ArrayStream {
    /// Reads the `.npy` header at the start of `reader`.
    fn new(name: String, mut reader: Box<dyn Read + Send>) -> Result<ArrayStream, String> {
        let header = Header::from_reader(&mut reader)
            .map_err(|e| format!("array `{name}`: bad .npy header: {e}"))?;
        let layout = NpyLayout::of(&header).map_err(|e| format!("array `{name}`: {e}"))?;
        if layout.is_fortran() {
            // First axis fastest: one sample's elements are spread over the
            // whole array, so it cannot be read a sample at a time.
            return Err(format!(
                "array `{name}` is Fortran-ordered, so its samples are not stored one after another; save np.ascontiguousarray(a) (or one .npz per sample)"
            ));
        }
        let Some((&count, rest)) = header.shape.split_first() else {
            return Err("a scalar array cannot hold a sample axis".into());
        };
        let item_bytes = rest
            .iter()
            .try_fold(layout.width(), |a, &d| a.checked_mul(d))
            .ok_or_else(|| format!("array `{name}`: the shape overflows"))?;
        let mut item_shape = vec![1];
        item_shape.extend_from_slice(rest);
        Ok(ArrayStream {
            name,
            reader,
            layout,
            item_shape,
            item_bytes,
            count,
        })
    }

    /// The next item, read into `buf` and decoded.
    fn next_item(&mut self, buf: &mut Vec<u8>) -> Result<HostTensor, String> {
        buf.resize(self.item_bytes, 0);
        self.reader
            .read_exact(buf)
            .map_err(|e| format!("array `{}`: {e}", self.name))?;
        self.layout
            .decode(&self.name, self.item_shape.clone(), buf)
            .map_err(|e| format!("array `{}`: {e}", self.name))
    }
}

/// The arrays of a stacked file, read forward one item at a time.
pub struct StackedArrays {
    arrays: Vec<ArrayStream>,
    count: usize,
    /// Items already handed out.
    taken: usize,
    buf: Vec<u8>,
}

impl StackedArrays {
    /// Opens an `.npz` or `.npy` file; every array must have the same
    /// leading axis. Errors are one line, without the path (the caller adds it).
    pub fn open(path: &Path) -> Result<StackedArrays, String> {
        let mut file = File::open(path).map_err(|e| e.to_string())?;
        let mut magic = [0u8; 6];
        let read = file.read(&mut magic).map_err(|e| e.to_string())?;
        let arrays = if magic[..read].starts_with(b"PK") {
            npz_streams(path)?
        } else if magic[..read].starts_with(b"\x93NUMPY") {
            let name = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            file.seek(SeekFrom::Start(0)).map_err(|e| e.to_string())?;
            vec![ArrayStream::new(name, Box::new(BufReader::new(file)))?]
        } else {
            return Err("neither an .npz (zip) nor an .npy file".into());
        };
        let count = arrays.first().map_or(0, |a| a.count);
        if let Some(a) = arrays.iter().find(|a| a.count != count) {
            return Err(format!(
                "array `{}` has {} samples, others {count}: every array needs the same leading sample axis",
                a.name, a.count
            ));
        }
        Ok(StackedArrays {
            arrays,
            count,
            taken: 0,
            buf: Vec::new(),
        })
    }

    /// Samples along the leading axis.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Item `i` of every array (shape `[1, ...]`, named), in archive order,
    /// or `None` after the last.
    pub fn next_item(&mut self) -> Result<Option<Vec<HostTensor>>, String> {
        if self.taken >= self.count {
            return Ok(None);
        }
        self.taken += 1;
        let buf = &mut self.buf;
        self.arrays
            .iter_mut()
            .map(|a| a.next_item(buf))
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }
}

/// A reader over each array of a zip archive, positioned at its `.npy` header.
fn npz_streams(path: &Path) -> Result<Vec<ArrayStream>, String> {
    let file = File::open(path).map_err(|e| e.to_string())?;
    let mut zip = zip::ZipArchive::new(BufReader::new(file)).map_err(|e| e.to_string())?;
    let mut out = Vec::new();
    for i in 0..zip.len() {
        let entry = zip.by_index_raw(i).map_err(|e| e.to_string())?;
        if entry.is_dir() {
            continue;
        }
        let full = entry.name().to_string();
        let name = full.strip_suffix(".npy").unwrap_or(&full).to_string();
        if entry.encrypted() {
            return Err(format!(
                "array `{name}`: encrypted archives are not supported"
            ));
        }
        let (start, size, method) = (
            entry.data_start(),
            entry.compressed_size(),
            entry.compression(),
        );
        drop(entry);
        let mut file = File::open(path).map_err(|e| e.to_string())?;
        file.seek(SeekFrom::Start(start))
            .map_err(|e| format!("array `{name}`: {e}"))?;
        let raw = BufReader::new(file).take(size);
        let reader: Box<dyn Read + Send> = match method {
            zip::CompressionMethod::Stored => Box::new(raw),
            zip::CompressionMethod::Deflated => Box::new(flate2::read::DeflateDecoder::new(raw)),
            other => {
                return Err(format!(
                    "array `{name}`: compression {other} is not supported (np.savez and np.savez_compressed are)"
                ));
            }
        };
        out.push(ArrayStream::new(name, reader)?);
    }
    if out.is_empty() {
        return Err("the archive holds no arrays".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// An `.npy` image: `descr`, `shape` as written in the header, raw data.
    fn npy(descr: &str, shape: &[usize], data: &[u8]) -> Vec<u8> {
        let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
        let shape = match dims.len() {
            1 => format!("({},)", dims[0]),
            _ => format!("({})", dims.join(", ")),
        };
        crate::inputs::tests::npy(descr, &shape, data)
    }

    fn f32_bytes(v: impl IntoIterator<Item = f32>) -> Vec<u8> {
        v.into_iter().flat_map(f32::to_le_bytes).collect()
    }

    fn write_npz(path: &Path, method: zip::CompressionMethod, arrays: &[(&str, Vec<u8>)]) {
        let mut zip = zip::ZipWriter::new(File::create(path).unwrap());
        let opts = zip::write::SimpleFileOptions::default().compression_method(method);
        for (name, bytes) in arrays {
            zip.start_file(format!("{name}.npy"), opts).unwrap();
            zip.write_all(bytes).unwrap();
        }
        zip.finish().unwrap();
    }

    #[test]
    fn stored_and_deflated_archives_give_every_item_in_order() {
        let dir = tempfile::tempdir().unwrap();
        // 7 samples of a [3, 5] float array and a scalar-per-sample int64 one.
        let x: Vec<f32> = (0..7 * 15).map(|v| v as f32 * 0.5 - 9.0).collect();
        let ids: Vec<u8> = (0..7i64).flat_map(|v| (v * 1000).to_le_bytes()).collect();
        for method in [
            zip::CompressionMethod::Stored,
            zip::CompressionMethod::Deflated,
        ] {
            let path = dir.path().join(format!("{method:?}.npz"));
            write_npz(
                &path,
                method,
                &[
                    ("x", npy("<f4", &[7, 3, 5], &f32_bytes(x.iter().copied()))),
                    ("ids", npy("<i8", &[7], &ids)),
                ],
            );
            let mut s = StackedArrays::open(&path).unwrap();
            assert_eq!(s.count(), 7);
            for i in 0..7 {
                let item = s.next_item().unwrap().expect("an item");
                assert_eq!(item[0].name(), Some("x"));
                assert_eq!(item[0].shape(), &[1, 3, 5]);
                let want: Vec<f64> = x[i * 15..(i + 1) * 15].iter().map(|&v| v.into()).collect();
                assert_eq!(item[0].to_f64_vec(), want, "{method:?} item {i}");
                assert_eq!(
                    (item[1].shape(), item[1].to_f64_vec()),
                    (&[1][..], vec![i as f64 * 1000.0])
                );
            }
            assert!(s.next_item().unwrap().is_none());
        }
        // A plain .npy is one stacked array named after the file.
        let path = dir.path().join("input.npy");
        std::fs::write(
            &path,
            npy(
                ">f4",
                &[2, 2],
                &[
                    0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x40, 0, 0,
                ],
            ),
        )
        .unwrap();
        let mut s = StackedArrays::open(&path).unwrap();
        let a = s.next_item().unwrap().unwrap();
        let b = s.next_item().unwrap().unwrap();
        assert_eq!(a[0].name(), Some("input"));
        assert_eq!(
            (a[0].to_f64_vec(), b[0].to_f64_vec()),
            (vec![1.0, -2.0], vec![0.0, 3.0])
        );
    }

    #[test]
    fn items_are_read_when_asked_for_not_at_open() {
        // The header promises 4 items, the data holds 2: a reader of the
        // whole array fails at open; this one hands out 2 and then says
        // which array ran short.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("short.npz");
        let data = f32_bytes([1.0, 2.0, 3.0, 4.0]);
        write_npz(
            &path,
            zip::CompressionMethod::Deflated,
            &[("x", npy("<f4", &[4, 2], &data))],
        );
        let mut s = StackedArrays::open(&path).unwrap();
        assert_eq!(
            s.next_item().unwrap().unwrap()[0].to_f64_vec(),
            vec![1.0, 2.0]
        );
        assert_eq!(
            s.next_item().unwrap().unwrap()[0].to_f64_vec(),
            vec![3.0, 4.0]
        );
        let e = s.next_item().unwrap_err();
        assert!(e.starts_with("array `x`: ") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn bad_archives_are_one_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("uneven.npz");
        write_npz(
            &path,
            zip::CompressionMethod::Stored,
            &[
                ("a", npy("<f4", &[3, 1], &f32_bytes([0.0; 3]))),
                ("b", npy("<f4", &[2, 1], &f32_bytes([0.0; 2]))),
            ],
        );
        let e = StackedArrays::open(&path).err().unwrap();
        assert!(e.contains("array `b` has 2 samples, others 3"), "{e}");
        let path = dir.path().join("scalar.npz");
        write_npz(
            &path,
            zip::CompressionMethod::Stored,
            &[("a", npy("<f4", &[], &f32_bytes([0.0])))],
        );
        let e = StackedArrays::open(&path).err().unwrap();
        assert_eq!(e, "a scalar array cannot hold a sample axis");
        let path = dir.path().join("c16.npz");
        write_npz(
            &path,
            zip::CompressionMethod::Stored,
            &[("z", npy("<c16", &[1], &[0; 16]))],
        );
        let e = StackedArrays::open(&path).err().unwrap();
        assert!(e.starts_with("array `z`: unsupported dtype <c16"), "{e}");
        // A stacked array stored first axis fastest has no sample in one piece.
        let path = dir.path().join("fortran.npz");
        write_npz(
            &path,
            zip::CompressionMethod::Stored,
            &[(
                "x",
                crate::inputs::tests::npy_ordered("<f4", true, "(3, 2)", &f32_bytes([0.0; 6])),
            )],
        );
        let e = StackedArrays::open(&path).err().unwrap();
        assert!(
            e.starts_with("array `x` is Fortran-ordered, so its samples are not stored one after another; save np.ascontiguousarray(a)"),
            "{e}"
        );
        let path = dir.path().join("text.npz");
        std::fs::write(&path, "hello").unwrap();
        let e = StackedArrays::open(&path).err().unwrap();
        assert_eq!(e, "neither an .npz (zip) nor an .npy file");
    }
}
