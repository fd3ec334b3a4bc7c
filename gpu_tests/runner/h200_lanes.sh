#!/bin/bash
# Several matrices side by side in one device call, everything they leave packed into one file:
#
#   JUDGE_COMMIT=<sha> [SITES="0.23.0 0.24.0"] gpu_tests/runner/h200_lanes.sh LANES_FILE
#
# LANES_FILE holds one lane a line, `NAME [VAR=VALUE ...] -- h200.sh options` ('#' starts a comment). Each
# lane runs h200.sh with its matrix in /tmp/lanes/NAME and a deadline counted from the call's start
# (CALL_LIMIT_S, default 600, less 40 s for the setup's margin and the packing); a lane's own --deadline-s wins.
# First, when missing: the full setup (/tmp/site, payload in /tmp/stage) and, beside it, each release of SITES
# (/tmp/site-X from /tmp/stage-X, device_setup.sh SITE_ONLY=1).
# Why one file: the device tool returns only a few files a call, and a machine left idle for 30 s is gone with
# whatever its calls left. $OUT/lanes.tgz (/tmp/lanes/CALL, CALL the lanes file's name) is packed when the lanes end or, if one overruns, 15 s before the
# call's limit; it holds every lane's reports, logs and summaries and the setup logs.
set -uo pipefail
lanes=${1:?usage: gpu_tests/runner/h200_lanes.sh LANES_FILE}
t0=$(date +%s); limit=${CALL_LIMIT_S:-600}; out=${OUT:?OUT: the folder the device tool returns}
# One folder a call (the lanes file's name), so that a later call packs only its own.
call=$(basename "$lanes"); call=${call%.*}; root=/tmp/lanes/$call; mkdir -p "$root" /tmp/lanes-tgz
pack() { tar czf "$out/lanes.tgz" -C /tmp/lanes "$call"; }
# The watchdog holds no output open (the device call ends when its last holder does).
( while [ "$(date +%s)" -lt $(( t0 + limit - 15 )) ]; do sleep 1; done; pack ) > /dev/null 2>&1 & watchdog=$!
stop_watchdog() { kill "$watchdog" 2>/dev/null; }
# The lanes are read before the setup, so that a malformed file costs no device time.
names=(); varss=(); optss=()
while IFS= read -r line; do
  line=${line%%#*}; [ -n "${line// /}" ] || continue
  name=${line%% *}; spec=${line#"$name"}; vars=${spec%% -- *}
  [ "$vars" != "$spec" ] || { echo "lane '$name': no ' -- ' before the h200.sh options" >&2; stop_watchdog; exit 2; }
  names+=("$name"); varss+=("$vars"); optss+=("${spec#* -- }")
done < "$lanes"
pids=()
for v in ${SITES:-}; do
  [ -d "/tmp/site-$v/vllm" ] || { VLLM_SITE=/tmp/site-$v STAGE=/tmp/stage-$v SITE_ONLY=1 \
    bash gpu_tests/runner/device_setup.sh > "$root/setup-$v.log" 2>&1 & pids+=($!); }
done
[ -d /tmp/site/vllm ] || bash gpu_tests/runner/device_setup.sh > "$root/setup.log" 2>&1
for p in "${pids[@]}"; do wait "$p"; done
deadline=$(( limit - 40 - ($(date +%s) - t0) ))
echo "setup $(( $(date +%s) - t0 )) s, lane deadline ${deadline} s" | tee "$root/times.txt"
pids=()
for i in "${!names[@]}"; do
  eval "args=(${optss[$i]})"
  # shellcheck disable=SC2086  # VAR=VALUE words, split on purpose
  env ${varss[$i]} MATRIX_OUT="$root/${names[$i]}" gpu_tests/runner/h200.sh "/tmp/lanes-tgz/${names[$i]}" \
    --deadline-s "$deadline" "${args[@]}" > "$root/${names[$i]}.log" 2>&1 &
  pids+=($!); echo "lane ${names[$i]}:${varss[$i]} -- ${optss[$i]}"
done
for p in "${pids[@]}"; do wait "$p"; done
stop_watchdog
echo "call $(( $(date +%s) - t0 )) s" | tee -a "$root/times.txt"
pack
for f in "$root"/*.log; do echo "== $(basename "$f")"; tail -n 4 "$f"; done
