#!/usr/bin/env bash
# Fuzz at the command line, as a user meets infopt: mutated models (fixtures,
# or --corpus DIR) written to files, then `infopt optimize` run on each with
# its default command — verification on, in whatever runtime it picks (ONNX
# Runtime included, which runs in-process) — or with `--no-verify`. Counts
# exit codes; a signal (crash, or a kill), exit 1 or 101 (internal error, a
# panic), a timeout (hang) or an error that is not one line is a finding.
#
#   bench/fuzz_cli.sh [--cases 2000] [--from 0] [--seed 1] [--timeout 60]
#       [--corpus DIR]... [--bin target/release/infopt] [--no-verify]
#       [--fuzz-bin target/debug/infopt-fuzz] [--mem-limit-gb 8]
#       [--log FILE.tsv] [--keep DIR]
#
# Cases are made in chunks of 50 (real models are MBs each) and deleted after
# their run. --mem-limit-gb caps each run's address space (ulimit -v): a case
# whose allocation would have the kernel kill it on an unlimited machine fails
# its allocation instead (an abort: still a finding) without taking the
# memory of a shared machine. --log writes one line per case: case, seed
# model, mutations, exit code, seconds, peak RSS (KB), first error line.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cases=2000; from=0; seed=1; timeout_s=60; bin="$root/target/release/infopt"; corpus=()
fuzz_bin=""; mem_gb=8; log=/dev/null; keep=/tmp; extra=()
while [ $# -gt 0 ]; do
    case "$1" in
        --cases) cases="$2"; shift 2;;
        --from) from="$2"; shift 2;;
        --seed) seed="$2"; shift 2;;
        --timeout) timeout_s="$2"; shift 2;;
        --corpus) corpus+=(--corpus "$2"); shift 2;;
        --bin) bin="$2"; shift 2;;
        --fuzz-bin) fuzz_bin="$2"; shift 2;;
        --no-verify) extra+=(--no-verify); shift;;
        --mem-limit-gb) mem_gb="$2"; shift 2;;
        --log) log="$2"; shift 2;;
        --keep) keep="$2"; shift 2;;
        *) echo "unknown option $1" >&2; exit 2;;
    esac
done
[ -x "$bin" ] || (cd "$root" && cargo build --release -q -p infopt) || exit 2
if [ -z "$fuzz_bin" ]; then
    (cd "$root" && cargo build --release -q -p infopt-fuzz) || exit 2
    fuzz_bin="$root/target/release/infopt-fuzz"
fi
work="$(mktemp -d)"; trap 'rm -rf "$work"' EXIT
mkdir -p "$work/out" "$keep"
declare -A codes=()
findings=0
mode="verify"; [ ${#extra[@]} -gt 0 ] && mode="no-verify"
for ((start = from; start < cases; start += 50)); do
    end=$((start + 50 < cases ? start + 50 : cases))
    rm -rf "$work/in"
    "$fuzz_bin" --emit "$work/in" --from "$start" --cases "$end" --seed "$seed" "${corpus[@]}" > "$work/index.tsv" || exit 2
    while IFS=$'\t' read -r file model mutations; do
        err="$work/err"
        t0=$(date +%s.%N)
        (ulimit -v $((mem_gb * 1024 * 1024)); exec /usr/bin/time -f '%M' -o "$work/rss" \
            timeout -s KILL "$timeout_s" "$bin" optimize "$work/in/$file" -o "$work/out/$file" "${extra[@]}") > /dev/null 2> "$err"
        rc=$?
        secs=$(echo "$(date +%s.%N) - $t0" | bc)
        rss=$(tail -1 "$work/rss" 2>/dev/null)
        # /usr/bin/time reports a child's signal as "Command terminated by signal N".
        if grep -q 'terminated by signal' "$work/rss" 2>/dev/null; then
            rc=$((128 + $(grep -o 'signal [0-9]*' "$work/rss" | grep -o '[0-9]*')))
        fi
        codes[$rc]=$(( ${codes[$rc]:-0} + 1 ))
        last_errors=$(grep -c '^error:' "$err")
        what=""
        if [ "$rc" -ge 128 ] || [ "$rc" -eq 124 ]; then what="killed by signal $((rc - 128)) (crash, kill or timeout)"
        elif [ "$rc" -eq 1 ] || [ "$rc" -eq 101 ]; then what="internal error (exit $rc): $(tail -1 "$err")"
        elif [ "$rc" -ne 0 ] && [ "$last_errors" -ne 1 ]; then what="$last_errors error lines"
        # The panic hook's text ("thread '...' panicked at FILE:LINE", a
        # backtrace note); a one-line error naming a caught panic of tract's
        # ("tract panicked: ...") is the message a user should get.
        elif [ "$rc" -ne 0 ] && grep -q 'panicked at\|RUST_BACKTRACE' "$err"; then what="panic text"
        fi
        first=$(grep -m1 '^error:' "$err" | cut -c1-400)
        printf '%s\t%s\t%s\t%s\t%s\t%.2f\t%s\t%s\n' "$mode" "${file%.onnx}" "$model" "$mutations" "$rc" "$secs" "$rss" "$first" >> "$log"
        if [ -n "$what" ]; then
            findings=$((findings + 1))
            echo "finding: $file ($model with $mutations): $what"
            cp "$work/in/$file" "$keep/fuzz-cli-finding-$seed-$file" 2>/dev/null
        fi
        rm -f "$work/out/"*
    done < "$work/index.tsv"
done
summary="cases $from..$cases ($mode):"
for rc in $(printf '%s\n' "${!codes[@]}" | sort -n); do summary+=" exit $rc x${codes[$rc]};"; done
echo "$summary findings $findings"
[ "$findings" -eq 0 ]
