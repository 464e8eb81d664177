//! An output file that starts writing itself to disk while it is written.
//!
//! Every output is fsynced before it is renamed into place (see
//! [`crate::atomic`]). Left alone, the kernel keeps a few hundred megabytes of
//! a fresh model in the page cache and the final fsync then waits for all of
//! them at once. [`WritebackFile`] asks the kernel to start writing each
//! finished stretch of the file as soon as it is complete (Linux's
//! `sync_file_range(SYNC_FILE_RANGE_WRITE)`, which only starts the writeback
//! and does not wait), so the disk works while the rest of the model is
//! encoded and the fsync waits only for the tail. What the file holds, and
//! the durability the fsync gives, are unchanged.

use std::fs::File;
use std::io::{self, Write};

/// Bytes written between two writeback requests.
const STRETCH: u64 = 16 << 20;

/// A [`File`] being written from its start, that hands each finished
/// [`STRETCH`] of it to the kernel's writeback.
pub struct WritebackFile {
    file: File,
    /// Bytes written so far (the file is written sequentially from 0).
    written: u64,
    /// Where the range not yet handed to writeback starts.
    pending_from: u64,
}

impl WritebackFile {
    pub fn new(file: File) -> WritebackFile {
        WritebackFile {
            file,
            written: 0,
            pending_from: 0,
        }
    }

    /// The file, for the final fsync.
    pub fn into_file(self) -> File {
        self.file
    }

    /// Appends `data`: by a copy inside the kernel when it lies in a mapped
    /// input file (see [`crate::external::copy_mapped_into`]), else by a
    /// plain write. The file receives the same bytes either way.
    pub fn write_mapped(&mut self, data: &[u8]) -> io::Result<()> {
        let copied = crate::external::copy_mapped_into(data, &self.file);
        self.written += copied as u64;
        self.write_all(&data[copied..])?;
        self.start_writeback();
        Ok(())
    }

    fn start_writeback(&mut self) {
        let len = self.written - self.pending_from;
        if len >= STRETCH {
            start_writeback(&self.file, self.pending_from, len);
            self.pending_from = self.written;
        }
    }
}

impl Write for WritebackFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.file.write(buf)?;
        self.written += n as u64;
        self.start_writeback();
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Starts (does not wait for) the writeback of `[offset, offset + len)`.
/// Only a hint: a failure here changes nothing, the fsync still reports it.
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    // SAFETY: a plain syscall on a file descriptor this value owns; it reads
    // no memory of ours.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File, _offset: u64, _len: u64) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_every_byte_in_order_across_stretches() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        let mut w = WritebackFile::new(File::create(&path).unwrap());
        let data: Vec<u8> = (0..(STRETCH as usize * 2 + 12345))
            .map(|i| (i % 253) as u8)
            .collect();
        for piece in data.chunks(STRETCH as usize / 3 + 7) {
            w.write_all(piece).unwrap();
        }
        // Writeback was asked for the finished stretches.
        assert!(w.pending_from >= STRETCH);
        w.into_file().sync_all().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), data);
    }

    #[test]
    fn mapped_and_heap_bytes_land_where_they_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.bin");
        let data: Vec<u8> = (0..3 * 4096 + 77).map(|i| (i % 241) as u8).collect();
        std::fs::write(&input, &data).unwrap();
        let mapped = crate::external::map_file(&input).unwrap();
        let path = dir.path().join("out.bin");
        let mut w = WritebackFile::new(File::create(&path).unwrap());
        w.write_all(b"head").unwrap();
        w.write_mapped(&mapped[100..5000]).unwrap();
        w.write_mapped(b"not mapped").unwrap();
        w.write_mapped(&mapped[7..9]).unwrap();
        assert_eq!(w.written, 4 + 4900 + 10 + 2);
        w.into_file().sync_all().unwrap();
        let mut expected = b"head".to_vec();
        expected.extend_from_slice(&data[100..5000]);
        expected.extend_from_slice(b"not mapped");
        expected.extend_from_slice(&data[7..9]);
        assert_eq!(std::fs::read(&path).unwrap(), expected);
    }
}
