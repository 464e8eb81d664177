#!/usr/bin/env bash
# Fuzz at the command line, as a user meets infopt: mutated models (fixtures,
# or --corpus DIR) written to files, then `infopt optimize` run on each with
# its default command — verification on, in whatever runtime it picks (ONNX
# Runtime included, which runs in-process). Counts exit codes; a signal
# (crash), exit 1 (internal error, a bug), a timeout (hang) or an error that
# is not one line is a finding.
#
#   bench/fuzz_cli.sh [--cases 2000] [--seed 1] [--timeout 60] [--corpus DIR]... [--bin target/release/infopt]
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cases=2000; seed=1; timeout_s=60; bin="$root/target/release/infopt"; corpus=()
while [ $# -gt 0 ]; do
    case "$1" in
        --cases) cases="$2"; shift 2;;
        --seed) seed="$2"; shift 2;;
        --timeout) timeout_s="$2"; shift 2;;
        --corpus) corpus+=(--corpus "$2"); shift 2;;
        --bin) bin="$2"; shift 2;;
        *) echo "unknown option $1" >&2; exit 2;;
    esac
done
[ -x "$bin" ] || (cd "$root" && cargo build --release -q -p infopt) || exit 2
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
(cd "$root" && cargo run --release -q -p infopt-fuzz -- --emit "$work/in" --cases "$cases" --seed "$seed" "${corpus[@]}") > "$work/index.tsv" || exit 2
mkdir -p "$work/out"
declare -A codes=()
findings=0
while IFS=$'\t' read -r file model mutations; do
    err="$work/err"
    timeout -s KILL "$timeout_s" "$bin" optimize "$work/in/$file" -o "$work/out/$file" > /dev/null 2> "$err"
    rc=$?
    codes[$rc]=$(( ${codes[$rc]:-0} + 1 ))
    last_errors=$(grep -c '^error:' "$err")
    lines=$(grep -v '^\(note\|warning\|loaded\|ran \|pipeline \|verified \|wrote \)' "$err" | grep -c .)
    what=""
    if [ "$rc" -ge 128 ] || [ "$rc" -eq 124 ]; then what="killed by signal $((rc - 128)) (crash or timeout)"
    elif [ "$rc" -eq 1 ]; then what="internal error: $(tail -1 "$err")"
    elif [ "$rc" -ne 0 ] && [ "$last_errors" -ne 1 ]; then what="$last_errors error lines"
    elif [ "$rc" -ne 0 ] && grep -q 'panicked\|RUST_BACKTRACE' "$err"; then what="panic text"
    fi
    if [ -n "$what" ]; then
        findings=$((findings + 1))
        echo "finding: $file ($model with $mutations): $what"
        cp "$work/in/$file" "/tmp/fuzz-cli-finding-$seed-$file" 2>/dev/null
    fi
    rm -f "$work/out/"*
done < "$work/index.tsv"
summary="cases $cases:"
for rc in $(printf '%s\n' "${!codes[@]}" | sort -n); do summary+=" exit $rc x${codes[$rc]};"; done
echo "$summary findings $findings"
[ "$findings" -eq 0 ]
