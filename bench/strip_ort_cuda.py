#!/usr/bin/env python3
"""Shrink onnxruntime-gpu's CUDA execution provider for one GPU architecture.

Not a test. The device machine's calls carry at most 64 MiB, and
onnxruntime-gpu 1.31.1's `libonnxruntime_providers_cuda.so` is 284 MB, of
which 218 MB is the `.nv_fatbin` section: one fat binary per CUDA source file,
each holding a zstd-compressed cubin per architecture (sm_75, 80, 86, 89, 90,
120). A GPU uses only the cubin of its own architecture, so this script
rewrites the library in place (same size, same offsets, nothing relinked):

- every cubin of another architecture than `--keep` gets a zeroed payload
  (its entry header stays, so the driver still sees it and still skips it);
- the cubins of `--keep` whose every kernel is a mixture-of-experts or FP8
  grouped GEMM (`moe`, `deep_gemm`, `GroupProblemShape`: CUTLASS kernels for
  the contrib MoE ops, which none of the benchmark models use), or that come
  from a source file in `DROP_SRC` (bfloat16 and unusual head sizes of flash
  attention, 2/4/8-bit matmuls, ...), are zeroed too and their entry is
  relabelled to another architecture, so the driver finds no image for them
  and a launch would fail loudly with "no kernel image" rather than read
  zeros.

Zeroed bytes compress to nothing: with `--keep 90` the three libraries the
CUDA EP needs go from 314 MB to about 40 MB with `zstd -19`. Run with
`CUDA_MODULE_LOADING=LAZY` (CUDA's default) so the driver loads a module only
when one of its kernels runs.

Needs `readelf`, `c++filt` and the `zstd` command.

    python3 bench/strip_ort_cuda.py WHEEL_OR_DIR OUT_DIR [--keep 90]

writes OUT_DIR/libonnxruntime.so.VERSION, libonnxruntime_providers_shared.so
and the stripped libonnxruntime_providers_cuda.so, and prints what it zeroed.
"""

from __future__ import annotations

import argparse
import re
import shutil
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
ENTRY = struct.Struct("<HHIQIIHHIIIQQQ")  # kind, ?, header size, payload size, ..., arch at 8
UNUSED_ARCH = 120  # what a removed sm_90 image is relabelled as (never chosen on sm_90)
DROP = re.compile(r"moe|deep_gemm|GroupProblemShape", re.IGNORECASE)
# Whole CUDA source files (named in the cubin's `_INTERNAL_<hash>_<len>_<file>_cu_`
# symbols) whose kernels no benchmark model reaches on sm_90: bfloat16 and
# head sizes other than 32/64/128 of flash attention, the cutlass attention
# kernels built for older chips (ORT picks the sm80 ones on sm_90), MoE,
# 2/4-bit and FP8 matmuls.
DROP_SRC = re.compile(
    r"flash_fwd\w*_(hdim(96|160|192|224|256)|bf16)\w*|fmha_sm(50|70|75)|moe_kernels|"
    r"topk_impl_bf16|dispatcher_\w+_int[248]|matmul_block_scaled_fp8|matmul_4bits|matmul_8bits"
)
SRC = re.compile(rb"_INTERNAL_[0-9a-f]+_\d+_(\w+?)_cu_")
LIBS = ("libonnxruntime.so", "libonnxruntime_providers_shared.so", "libonnxruntime_providers_cuda.so")


def section(path: Path, name: str) -> tuple[int, int]:
    out = subprocess.run(["readelf", "-S", "-W", str(path)], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if f" {name} " in line:
            parts = line.split("]", 1)[1].split()
            return int(parts[3], 16), int(parts[4], 16)
    raise SystemExit(f"{path}: no {name} section")


def kernels(cubin: bytes) -> list[str]:
    """Kernel names of a cubin (its `.text.NAME` sections), demangled."""
    tmp = Path("/tmp/strip_ort_cuda.cubin")
    tmp.write_bytes(cubin)
    out = subprocess.run(["readelf", "-S", "-W", str(tmp)], capture_output=True, text=True).stdout
    names = re.findall(r"\.text\.(\S+)", out)
    if not names:
        return []
    dem = subprocess.run(["c++filt"], input="\n".join(names), capture_output=True, text=True).stdout
    return dem.splitlines()


def strip(path: Path, keep: set[int]) -> None:
    data = bytearray(path.read_bytes())
    off, size = section(path, ".nv_fatbin")
    pos, end = off, off + size
    zeroed_other = zeroed_moe = kept = 0
    while pos < end:
        magic, _ver, hsize, fsize = struct.unpack_from("<IHHQ", data, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # alignment padding between fat binaries
            continue
        e, fend = pos + hsize, pos + hsize + fsize
        while e < fend:
            h = ENTRY.unpack_from(data, e)
            kind, ehs, psize, arch = h[0], h[2], h[3], h[8]
            if ehs == 0:
                break
            body = slice(e + ehs, e + ehs + psize)
            if kind == 2 and arch not in keep:
                data[body] = bytes(psize)
                zeroed_other += psize
            elif kind == 2:
                # The payload is a zstd frame plus alignment padding, which
                # makes zstd exit non-zero after writing the whole cubin.
                raw = subprocess.run(["zstd", "-d", "-q", "-c"], input=bytes(data[body]), capture_output=True)
                cubin = raw.stdout or bytes(data[body])
                names = kernels(cubin)
                src = SRC.search(cubin)
                if (names and all(DROP.search(n) for n in names)) or (
                    src and DROP_SRC.fullmatch(src.group(1).decode())
                ):
                    data[body] = bytes(psize)
                    struct.pack_into("<I", data, e + 28, UNUSED_ARCH)
                    zeroed_moe += psize
                else:
                    kept += psize
            else:
                kept += psize
            e += ehs + psize
        pos = fend
    path.write_bytes(data)
    mib = 1 << 20
    print(f"{path.name}: zeroed {zeroed_other / mib:.0f} MiB of other architectures, "
          f"{zeroed_moe / mib:.0f} MiB of MoE/FP8 grouped-GEMM cubins; kept {kept / mib:.0f} MiB")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("src", type=Path, help="onnxruntime_gpu wheel, or a folder with its capi libraries")
    ap.add_argument("out", type=Path)
    ap.add_argument("--keep", default="90", help="architectures to keep, comma-separated (90 = H100/H200)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if a.src.is_file():
        with zipfile.ZipFile(a.src) as z:
            for info in z.infolist():
                name = Path(info.filename).name
                if any(name.startswith(lib) for lib in LIBS):
                    with z.open(info) as f, open(a.out / name, "wb") as g:
                        shutil.copyfileobj(f, g)
    else:
        for p in a.src.iterdir():
            if any(p.name.startswith(lib) for lib in LIBS):
                shutil.copy2(p, a.out / p.name)
    cuda = a.out / "libonnxruntime_providers_cuda.so"
    if not cuda.exists():
        sys.exit(f"no libonnxruntime_providers_cuda.so in {a.src}")
    strip(cuda, {int(x) for x in a.keep.split(",")})


if __name__ == "__main__":
    main()
