#!/usr/bin/env bash
# Runs a command inside a fresh memory cgroup with a hard limit, so page
# cache is reclaimed instead of mistaken for use, and prints wall time, the
# cgroup's peak usage and the process's peak RSS (root needed; cgroup v1 or v2).
#
#   bench/under_limit.sh 4G target/release/infopt optimize big/decoder.onnx -o out/decoder.onnx
set -euo pipefail
limit="$1"; shift
bytes=$(numfmt --from=iec "$limit")
name="infopt-bench-$$"
if [ -d /sys/fs/cgroup/memory ]; then          # v1
    cg=/sys/fs/cgroup/memory/$name
    mkdir "$cg"
    echo "$bytes" > "$cg/memory.limit_in_bytes"
    echo "$bytes" > "$cg/memory.memsw.limit_in_bytes" 2>/dev/null || true
    peak_file=memory.max_usage_in_bytes
else                                            # v2
    cg=/sys/fs/cgroup/$name
    mkdir "$cg"
    echo "$bytes" > "$cg/memory.max"
    echo 0 > "$cg/memory.swap.max" 2>/dev/null || true
    peak_file=memory.peak
fi
trap 'rmdir "$cg" 2>/dev/null || true' EXIT
start=$(date +%s.%N)
set +e
bash -c 'echo $$ > "$1/cgroup.procs"; shift; exec /usr/bin/time -f "peak RSS %M KB" "$@"' _ "$cg" "$@"
rc=$?
set -e
end=$(date +%s.%N)
echo "limit $limit: exit $rc, wall $(echo "$end - $start" | bc) s, cgroup peak $(numfmt --to=iec "$(cat "$cg/$peak_file")")"
exit $rc
