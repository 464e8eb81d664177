//! Filling a new weight on every core.
//!
//! Folding a scale into a weight or concatenating weights writes a fresh
//! buffer as large as the weights: most of that time is the kernel handing
//! out (and zeroing) the new pages on first touch, and the arithmetic. Both
//! split cleanly by rows, so a large buffer is cut into contiguous pieces
//! filled on scoped threads. Every byte is computed by the same code from the
//! same input whatever the number of pieces, so the result does not depend
//! on the machine.

/// Below this many bytes one thread fills the buffer: a thread costs tens of
/// microseconds, a megabyte about as much.
const MIN_PARALLEL_BYTES: usize = 4 << 20;

/// Most threads used, however many cores there are.
const MAX_THREADS: usize = 8;

/// How many pieces a buffer of `bytes` is filled in.
fn pieces_for(bytes: usize) -> usize {
    if bytes < MIN_PARALLEL_BYTES {
        return 1;
    }
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    cores
        .clamp(1, MAX_THREADS)
        .min(bytes / (MIN_PARALLEL_BYTES / 2))
}

/// A buffer of `rows * row_bytes` bytes where `fill(first_row, piece)` writes
/// rows `first_row..` into `piece` (a whole number of rows), called on
/// contiguous pieces of rows, possibly on several threads at once.
pub fn fill_rows<F>(rows: usize, row_bytes: usize, fill: F) -> Vec<u8>
where
    F: Fn(usize, &mut [u8]) + Sync,
{
    let total = rows * row_bytes;
    let mut out = vec![0u8; total];
    fill_rows_in(&mut out, rows, row_bytes, pieces_for(total), &fill);
    out
}

/// [`fill_rows`] into `out` with exactly `pieces` pieces (at most one per
/// row), so tests can check that the split does not change the bytes.
fn fill_rows_in<F>(out: &mut [u8], rows: usize, row_bytes: usize, pieces: usize, fill: &F)
where
    F: Fn(usize, &mut [u8]) + Sync,
{
    let pieces = pieces.clamp(1, rows.max(1));
    if pieces == 1 || row_bytes == 0 {
        fill(0, out);
        return;
    }
    let rows_per_piece = rows.div_ceil(pieces);
    std::thread::scope(|scope| {
        let mut rest = out;
        let mut first = 0;
        let mut handles = Vec::with_capacity(pieces);
        while first < rows {
            let n = rows_per_piece.min(rows - first);
            let (piece, tail) = rest.split_at_mut(n * row_bytes);
            rest = tail;
            let start = first;
            // Quiet like the pass that called it: a panic (a bug) is caught
            // here and raised again on the calling thread, inside its guard.
            handles.push(
                scope.spawn(move || crate::panic_guard::catch_quietly(|| fill(start, piece))),
            );
            first += n;
        }
        for h in handles {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(caught)) => panic!("{}", caught.message),
                Err(payload) => std::panic::resume_unwind(payload),
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pattern(first: usize, piece: &mut [u8], row_bytes: usize) {
        for (i, row) in piece.chunks_exact_mut(row_bytes).enumerate() {
            for (j, b) in row.iter_mut().enumerate() {
                *b = ((first + i) * 31 + j * 7) as u8;
            }
        }
    }

    #[test]
    fn every_split_gives_the_same_bytes() {
        let (rows, row_bytes) = (37, 12);
        let mut one = vec![0u8; rows * row_bytes];
        fill_rows_in(&mut one, rows, row_bytes, 1, &|f, p| {
            pattern(f, p, row_bytes)
        });
        for pieces in [2, 3, 5, 36, 37, 100] {
            let mut many = vec![0u8; rows * row_bytes];
            fill_rows_in(&mut many, rows, row_bytes, pieces, &|f, p| {
                pattern(f, p, row_bytes)
            });
            assert_eq!(many, one, "{pieces} pieces");
        }
        // The public entry point, on a buffer large enough to be split.
        let rows = (MIN_PARALLEL_BYTES * 3) / 1024;
        let big = fill_rows(rows, 1024, |f, p| pattern(f, p, 1024));
        let mut reference = vec![0u8; rows * 1024];
        pattern(0, &mut reference, 1024);
        assert_eq!(big, reference);
    }

    #[test]
    fn a_panic_while_filling_reaches_the_caller() {
        let caught = std::panic::catch_unwind(|| {
            let mut out = vec![0u8; 64];
            fill_rows_in(&mut out, 8, 8, 4, &|first, _| {
                assert!(first < 4, "row {first}");
            });
        });
        assert!(caught.is_err());
    }

    #[test]
    fn small_buffers_stay_on_one_thread() {
        assert_eq!(pieces_for(MIN_PARALLEL_BYTES - 1), 1);
        assert!(pieces_for(64 << 20) >= 1);
    }
}
