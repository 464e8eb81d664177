#!/usr/bin/env bash
# The long fuzz run: mutated fixture models through load -> default pipeline ->
# save, in a release build with overflow checks on (an overflow is a panic, as
# in debug builds, instead of wrapping silently).
#
#   bench/fuzz.sh                       # 1,000,000 cases, seed 1, 2 threads
#   bench/fuzz.sh --cases 200000 --seed 5 --threads 1 --case-limit 10
#   bench/fuzz.sh --seed 1 --case 1234  # replay one case
#   bench/fuzz.sh --cases 50000 --corpus /path/to/real/models   # mutate your own models
#
# Prints cases/s, panics, hangs and multi-line errors; exit 1 on any finding.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
args=("$@")
[ ${#args[@]} -eq 0 ] && args=(--cases 1000000 --threads 2)
CARGO_PROFILE_RELEASE_OVERFLOW_CHECKS=true \
    cargo run --release -q -p infopt-fuzz -- "${args[@]}"
