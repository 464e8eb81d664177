//! An output file written by a second thread, straight to the disk.
//!
//! Every output is fsynced before it is renamed into place (see
//! [`crate::atomic`]), so a save costs at least the time the disk takes to
//! store the file. Through the page cache that was several times the disk's
//! own speed on the machines measured (436 MB: 1.5–3.3 s written and fsynced,
//! 0.5–0.9 s written with `O_DIRECT`; `bench/results/cost.md`). So
//! [`OutputFile`] collects the bytes in aligned stretches of [`STAGE`] bytes
//! and a writer thread writes each finished stretch with `O_DIRECT` while the
//! next one is filled: the disk works while the model is encoded, and the
//! final fsync (still done, for the metadata and the disk's cache) has
//! little left to wait for. The last stretch is padded to a whole block and
//! the file cut back to its length.
//!
//! Where `O_DIRECT` is refused (a file system without it, tmpfs on older
//! kernels, an unusual block size), the same thread writes through the page
//! cache and starts the writeback of each stretch as it goes
//! (`sync_file_range(SYNC_FILE_RANGE_WRITE)`). The file holds the same bytes
//! either way; only the speed differs.
//!
//! Bytes that lie in a file mapping of an input (a weight of the loaded
//! model) are read into the stretch from that file (`pread`) instead of
//! through the mapping, so writing a model does not fault the input's pages
//! into this process (its resident set stays small).

use std::alloc::Layout;
use std::fs::File;
use std::io::{self, Write};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::thread::JoinHandle;

/// Bytes per write of the writer thread. A multiple of [`BLOCK`].
pub(crate) const STAGE: usize = 8 << 20;

/// Alignment of direct writes: memory address, file offset and length.
const BLOCK: usize = 4096;

/// [`STAGE`] bytes of anonymous memory, page-aligned (a multiple of
/// [`BLOCK`]) as `O_DIRECT` needs. A mapping rather than an aligned heap
/// allocation: the allocator zeroes an over-aligned block by writing it, so
/// every save held both stages resident (16 MiB) whatever its size, where
/// the kernel's zero pages cost nothing until the bytes are written.
struct Stage {
    map: memmap2::MmapMut,
}

impl Stage {
    fn new() -> Stage {
        match memmap2::MmapMut::map_anon(STAGE) {
            Ok(map) => Stage { map },
            Err(_) => match Layout::from_size_align(STAGE, BLOCK) {
                Ok(layout) => std::alloc::handle_alloc_error(layout),
                Err(_) => panic!("no memory for a write stage of {STAGE} bytes"),
            },
        }
    }

    fn bytes(&self) -> &[u8] {
        &self.map
    }

    fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }
}

/// A stretch for the writer: `len` bytes of `stage` go at `offset`; the
/// write covers `len` rounded up to a whole block.
struct Job {
    stage: Stage,
    offset: u64,
    len: usize,
}

/// The writer thread's end: stretches to write in, empty stages (or the
/// first error) back.
struct Writer {
    jobs: Option<SyncSender<Job>>,
    free: Receiver<io::Result<Stage>>,
    thread: Option<JoinHandle<()>>,
}

/// A new output file being written from its start (see the module doc).
pub struct OutputFile {
    file: Arc<File>,
    /// Bytes accepted so far.
    written: u64,
    /// The stage being filled and how much of it is filled.
    stage: Option<Stage>,
    fill: usize,
    writer: Writer,
}

impl OutputFile {
    /// Starts the writer thread for `file` (empty, just created), asking for
    /// direct writes where the file system allows them.
    pub fn new(file: File) -> OutputFile {
        let direct = std::env::var_os("INFOPT_NO_DIRECT_IO").is_none();
        OutputFile::with_direct(file, direct)
    }

    /// [`OutputFile::new`], with direct writes only when `want_direct`.
    fn with_direct(file: File, want_direct: bool) -> OutputFile {
        let direct = want_direct && enable_direct(&file);
        let file = Arc::new(file);
        let (jobs, inbox) = sync_channel::<Job>(1);
        let (give_back, free) = sync_channel::<io::Result<Stage>>(2);
        // Two stages: one filled here while the other is written.
        let _ = give_back.send(Ok(Stage::new()));
        let target = file.clone();
        let thread = std::thread::Builder::new()
            .name("infopt-write".into())
            .spawn(move || write_jobs(&target, direct, inbox, give_back));
        let (thread, jobs) = match thread {
            Ok(t) => (Some(t), Some(jobs)),
            // No thread: stretches are written on this one (see `submit`).
            Err(_) => (None, None),
        };
        OutputFile {
            file,
            written: 0,
            stage: Some(Stage::new()),
            fill: 0,
            writer: Writer { jobs, free, thread },
        }
    }

    /// Appends `data`, which may lie in a mapped input file: then it is read
    /// from that file instead of through the mapping. Same bytes either way.
    pub fn write_mapped(&mut self, data: &[u8]) -> io::Result<()> {
        let mut done = 0;
        while done < data.len() {
            let fill = self.fill;
            let stage = self.current()?;
            let n = (STAGE - fill).min(data.len() - done);
            let dst = &mut stage.bytes_mut()[fill..fill + n];
            let src = &data[done..done + n];
            let read = crate::external::read_mapped_into(src, dst);
            dst[read..].copy_from_slice(&src[read..]);
            self.advance(n)?;
            done += n;
        }
        Ok(())
    }

    /// Writes what is left, waits for the writer, and returns the file (for
    /// the caller's fsync) holding exactly the bytes written.
    pub fn finish(mut self) -> io::Result<File> {
        if self.fill > 0 {
            let len = self.fill;
            let stage = self.current()?;
            // The padding of a direct write's last block; cut off below.
            let padded = len.div_ceil(BLOCK) * BLOCK;
            stage.bytes_mut()[len..padded].fill(0);
            self.submit(len)?;
        }
        drop(self.writer.jobs.take());
        if let Some(t) = self.writer.thread.take() {
            t.join()
                .map_err(|_| io::Error::other("the output writer thread panicked"))?;
        }
        // The writer's first error, if any (else the stages it gave back).
        while let Ok(back) = self.writer.free.try_recv() {
            back?;
        }
        self.file.set_len(self.written)?;
        let file = self.file.clone();
        // The writer thread has ended and dropped its handle; this is the last.
        drop(self);
        Arc::try_unwrap(file).map_err(|_| io::Error::other("the output file is still shared"))
    }

    /// The stage being filled (taking a free one when none is).
    fn current(&mut self) -> io::Result<&mut Stage> {
        if self.stage.is_none() {
            let stage = match self.writer.free.recv() {
                Ok(back) => back?,
                // The writer stopped without a word: no thread, or it ended.
                Err(_) => Stage::new(),
            };
            self.stage = Some(stage);
        }
        Ok(self.stage.as_mut().expect("stage just set"))
    }

    /// Records `n` more bytes in the stage; a full stage goes to the writer.
    fn advance(&mut self, n: usize) -> io::Result<()> {
        self.fill += n;
        self.written += n as u64;
        if self.fill == STAGE {
            self.submit(STAGE)?;
        }
        Ok(())
    }

    /// Hands the stage's first `len` bytes to the writer (or writes them here
    /// when there is no writer thread).
    fn submit(&mut self, len: usize) -> io::Result<()> {
        let Some(stage) = self.stage.take() else {
            return Ok(());
        };
        let offset = self.written - self.fill as u64;
        self.fill = 0;
        let job = Job { stage, offset, len };
        match &self.writer.jobs {
            Some(jobs) => jobs
                .send(job)
                .map_err(|_| io::Error::other("the output writer thread stopped")),
            None => {
                write_job(&self.file, false, &job)?;
                self.stage = Some(job.stage);
                Ok(())
            }
        }
    }
}

impl Write for OutputFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let fill = self.fill;
        let stage = self.current()?;
        let n = (STAGE - fill).min(buf.len());
        stage.bytes_mut()[fill..fill + n].copy_from_slice(&buf[..n]);
        self.advance(n)?;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        // Bytes reach the file in whole stages; `finish` writes the rest.
        Ok(())
    }
}

impl Drop for OutputFile {
    fn drop(&mut self) {
        // Abandoned (an error while encoding): let the writer end; the caller
        // removes the file.
        drop(self.writer.jobs.take());
        if let Some(t) = self.writer.thread.take() {
            let _ = t.join();
        }
    }
}

/// The writer thread: writes each stretch, gives its stage back; after an
/// error it sends that error and stops.
fn write_jobs(
    file: &File,
    mut direct: bool,
    inbox: Receiver<Job>,
    give_back: SyncSender<io::Result<Stage>>,
) {
    for job in inbox {
        let result = match write_job(file, direct, &job) {
            // Direct writes refused after all: the page cache from here on.
            Err(e) if direct && e.raw_os_error() == Some(libc_einval()) => {
                direct = false;
                disable_direct(file).and_then(|()| write_job(file, false, &job))
            }
            other => other,
        };
        let stop = result.is_err();
        if give_back.send(result.map(|()| job.stage)).is_err() || stop {
            return;
        }
    }
}

/// Writes one stretch at its offset: the whole padded block when direct,
/// else just its bytes (then starting their writeback).
fn write_job(file: &File, direct: bool, job: &Job) -> io::Result<()> {
    let len = if direct {
        job.len.div_ceil(BLOCK) * BLOCK
    } else {
        job.len
    };
    write_all_at(file, &job.stage.bytes()[..len], job.offset)?;
    if !direct {
        start_writeback(file, job.offset, job.len as u64);
    }
    Ok(())
}

#[cfg(unix)]
fn write_all_at(file: &File, data: &[u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::write_all_at(file, data, offset)
}

#[cfg(not(unix))]
fn write_all_at(file: &File, data: &[u8], offset: u64) -> io::Result<()> {
    use std::io::{Seek, SeekFrom};
    let mut f = file;
    f.seek(SeekFrom::Start(offset))?;
    f.write_all(data)
}

#[cfg(target_os = "linux")]
fn libc_einval() -> i32 {
    libc::EINVAL
}

#[cfg(not(target_os = "linux"))]
fn libc_einval() -> i32 {
    -1
}

/// Turns on `O_DIRECT` for `file`; false when the file system refuses it.
#[cfg(target_os = "linux")]
fn enable_direct(file: &File) -> bool {
    use std::os::fd::AsRawFd;
    // SAFETY: fcntl on a descriptor this process owns; no memory is passed.
    unsafe {
        let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
        flags >= 0 && libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags | libc::O_DIRECT) == 0
    }
}

#[cfg(not(target_os = "linux"))]
fn enable_direct(_file: &File) -> bool {
    false
}

/// Turns `O_DIRECT` off again (after a direct write was refused).
#[cfg(target_os = "linux")]
fn disable_direct(file: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: as in `enable_direct`.
    let ok = unsafe {
        let flags = libc::fcntl(file.as_raw_fd(), libc::F_GETFL);
        flags >= 0 && libc::fcntl(file.as_raw_fd(), libc::F_SETFL, flags & !libc::O_DIRECT) == 0
    };
    if ok {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn disable_direct(_file: &File) -> io::Result<()> {
    Ok(())
}

/// Starts (does not wait for) the writeback of `[offset, offset + len)`.
/// Only a hint: a failure here changes nothing, the fsync still reports it.
#[cfg(target_os = "linux")]
fn start_writeback(file: &File, offset: u64, len: u64) {
    use std::os::fd::AsRawFd;
    let (Ok(offset), Ok(len)) = (i64::try_from(offset), i64::try_from(len)) else {
        return;
    };
    // SAFETY: a plain syscall on a file descriptor this process owns; it
    // reads no memory of ours.
    unsafe {
        libc::sync_file_range(file.as_raw_fd(), offset, len, libc::SYNC_FILE_RANGE_WRITE);
    }
}

#[cfg(not(target_os = "linux"))]
fn start_writeback(_file: &File, _offset: u64, _len: u64) {}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(n: usize, seed: usize) -> Vec<u8> {
        (0..n).map(|i| ((i * 7 + seed) % 253) as u8).collect()
    }

    /// Writes `pieces` (heap or mapped, by the flag) with direct writes and
    /// through the page cache; checks both files agree and returns the bytes.
    fn written(pieces: &[(&[u8], bool)]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let mut outputs = [true, false].map(|direct| {
            let path = dir.path().join(format!("out.{direct}.bin"));
            let mut w = OutputFile::with_direct(File::create(&path).unwrap(), direct);
            for (piece, mapped) in pieces {
                match mapped {
                    true => w.write_mapped(piece).unwrap(),
                    false => w.write_all(piece).unwrap(),
                }
            }
            w.finish().unwrap().sync_all().unwrap();
            std::fs::read(&path).unwrap()
        });
        assert!(
            outputs[0] == outputs[1],
            "direct and page-cache writes differ"
        );
        std::mem::take(&mut outputs[0])
    }

    #[test]
    fn every_byte_lands_in_order_across_stages_and_the_tail_is_cut_back() {
        let data = pattern(STAGE * 2 + 12345, 1);
        let pieces: Vec<(&[u8], bool)> = data.chunks(STAGE / 3 + 7).map(|c| (c, false)).collect();
        assert_eq!(written(&pieces), data);
        // Exactly whole stages: no tail, no padding.
        let whole = pattern(STAGE * 2, 2);
        assert_eq!(written(&[(&whole, false)]), whole);
        // Less than a block, and nothing at all.
        assert_eq!(written(&[(b"abc", false)]), b"abc");
        assert_eq!(written(&[]), b"");
    }

    #[test]
    fn mapped_and_heap_bytes_land_where_they_are_written() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("in.bin");
        let data = pattern(STAGE + 3 * 4096 + 77, 3);
        std::fs::write(&input, &data).unwrap();
        let mapped = crate::external::map_file(&input).unwrap();
        let pieces: [(&[u8], bool); 5] = [
            (b"head", false),
            (&mapped[100..STAGE + 5000], true),
            (b"not mapped", true),
            (&mapped[7..9], true),
            (&mapped[..], false),
        ];
        let mut expected = b"head".to_vec();
        expected.extend_from_slice(&data[100..STAGE + 5000]);
        expected.extend_from_slice(b"not mapped");
        expected.extend_from_slice(&data[7..9]);
        expected.extend_from_slice(&data);
        assert_eq!(written(&pieces), expected);
    }

    #[test]
    fn the_page_cache_path_writes_the_same_bytes() {
        // A job refused as direct is written through the page cache.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.bin");
        let file = File::create(&path).unwrap();
        let mut stage = Stage::new();
        stage.bytes_mut()[..5].copy_from_slice(b"hello");
        let job = Job {
            stage,
            offset: 3,
            len: 5,
        };
        write_job(&file, false, &job).unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"\0\0\0hello");
    }

    #[test]
    fn a_write_error_reaches_the_caller() {
        // A read-only descriptor: every write fails, and `finish` says so.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ro.bin");
        std::fs::write(&path, b"").unwrap();
        let mut w = OutputFile::new(File::open(&path).unwrap());
        let data = pattern(STAGE + 10, 4);
        let first = w.write_all(&data);
        let end = w.finish().map(|_| ());
        assert!(first.is_err() || end.is_err());
    }
}
