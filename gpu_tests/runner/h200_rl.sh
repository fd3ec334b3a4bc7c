#!/bin/bash
# Issue 26's RL run (points 1-4, both frontends) on an offline H200, in one device call:
#
#   gpu_tests/runner/h200_rl.sh OUT_DIR [run_rl.py options...]
#
# Like h200.sh: unpacks the payload parts in $STAGE (default /tmp/stage) unless /tmp/site (with ray) and
# /tmp/tiny/llama are there already (device_setup.sh, building only the tiny-llama model), the same
# environment, then gpu_tests/rl/run_rl.py under a deadline that keeps the whole call under 560 s (setup,
# the servers' stop and the packing included). Writes OUT_DIR/results-rl.tgz (rl/: the JSON reports,
# run.json, call.json, the servers' logs).
# Run from the repo root.
set -uo pipefail
out=${1:?usage: gpu_tests/runner/h200_rl.sh OUT_DIR [run_rl options]}; shift
t0=$(date +%s)
# A machine set up from a payload without ray (before issue 26) is set up again.
{ [ -d /tmp/site/vllm ] && [ -d /tmp/site/ray ] && [ -d /tmp/tiny/llama ]; } || TINY_FAMILIES=llama bash gpu_tests/runner/device_setup.sh
setup_s=$(( $(date +%s) - t0 ))
export PYTHONPATH=$PWD:/tmp/site HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
# flashinfer is not in the payload: without this the sampler imports it and the engine dies.
export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_DEVCLIENT_TINY_DIR=/tmp/tiny
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TRITON_CACHE_DIR=/tmp/triton-cache
rm -rf /tmp/rl-out /tmp/rl-work && mkdir -p "$out" /tmp/rl-out/rl "$TRITON_CACHE_DIR"
echo "setup ${setup_s} s"
# 560 s for the whole call: after the deadline a step still running gets 20 s, the servers' stop up to 25 s.
deadline=$(( 500 - setup_s ))
# The runner stops by itself (deadline + 20 s, then the servers' stop); timeout is the net that keeps the packing.
timeout -k 5 $(( deadline + 50 )) python3 -m gpu_tests.rl.run_rl --out /tmp/rl-out --deadline-s "$deadline" "$@"
status=$?
echo "{\"setup_s\": ${setup_s}, \"call_s\": $(( $(date +%s) - t0 )), \"status\": ${status}}" > /tmp/rl-out/rl/call.json
tar czf "$out/results-rl.tgz" -C /tmp/rl-out rl
exit $status
