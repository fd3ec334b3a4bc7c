#!/bin/bash
# The one-GPU tiny matrix on an offline H200 (the project's device machine):
#
#   gpu_tests/runner/h200.sh OUT_DIR [run_matrix.py options...]
#
# Expects the payload parts of gpu_tests/runner/build_payload.sh in $STAGE (default /tmp/stage), unpacks them
# (device_setup.sh, unless $VLLM_SITE, default /tmp/site, is there already), then runs run_matrix.py: every tiny
# family x connector x frontend with three clean passes, and per family the mutation catalogue, in parallel on
# the one GPU. The plan is dealt over device calls (--parts 2 --part 1, then --part 2 on the same warm machine),
# each under its deadline. `--families real` runs upstream's models at real size instead
# (gpu_tests/real_size/PLAN.md).
# Writes OUT_DIR/results-partK.tgz (JSON reports, probe folders, summary, logs). Run from the repo root.
set -uo pipefail
out=${1:?usage: gpu_tests/runner/h200.sh OUT_DIR [run_matrix options]}; shift
t0=$(date +%s)
# The real-size matrix serves no tiny model: its setup skips building them.
case " $* " in *" real "*) export TINY_FAMILIES=${TINY_FAMILIES:-none} ;; esac
# VLLM_SITE picks the release when a machine holds several (device_setup.sh, SITE_ONLY); each keeps its own
# compile cache, so one release never reads another's compiled graphs.
site=${VLLM_SITE:-/tmp/site}
[ -d "$site/vllm" ] || bash gpu_tests/runner/device_setup.sh
setup_s=$(( $(date +%s) - t0 ))
[ "$site" = /tmp/site ] || export VLLM_CACHE_ROOT=$site-cache
export PYTHONPATH=$PWD:$site HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
# flashinfer is not in the payload: without this the sampler imports it and the engine dies.
export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_DEVCLIENT_TINY_DIR=/tmp/tiny VLLM_DEVCLIENT_GSM8K_DIR=/tmp/gsm8k
export VLLM_DEVCLIENT_SMALL_MODEL=/tmp/models/smollm2 VLLM_DEVCLIENT_REAL_DIR=/tmp/real
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
# One Triton cache for every server: a family's kernels compile once per machine, not once per server.
export TRITON_CACHE_DIR=/tmp/triton-cache
# The judge's commit, fixed before the run (the caller passes `git rev-parse HEAD`), goes into every report.
export VLLM_DEVCLIENT_JUDGE_COMMIT=${JUDGE_COMMIT:-unknown}
# MATRIX_OUT lets two matrices (a tiny and a real-size one) share a call, each in its own folder.
m=${MATRIX_OUT:-/tmp/matrix}
mkdir -p "$out" "$m" "$TRITON_CACHE_DIR"
echo "setup ${setup_s} s"
part=$(printf '%s\n' "$@" | awk 'prev=="--part"{print; exit} {prev=$0}'); part=${part:-1}
# The device tool allows 600 s a command: the deadline leaves room for the setup and the packing.
deadline=$(( 575 - setup_s ))
python3 -m gpu_tests.runner.run_matrix --out "$m" --families all --deadline-s "$deadline" "$@"
status=$?
echo "{\"setup_s\": ${setup_s}, \"part\": \"${part}\", \"call_s\": $(( $(date +%s) - t0 ))}" > "$m/call_part${part}.json"
tar czf "$out/results-part${part}.tgz" -C "$(dirname "$m")" "$(basename "$m")"
exit $status
