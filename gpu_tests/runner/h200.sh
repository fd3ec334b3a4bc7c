#!/bin/bash
# The whole one-GPU tiny matrix on an offline H200 (the project's device machine), one command:
#
#   gpu_tests/runner/h200.sh OUT_DIR [run_matrix.py options...]
#
# Expects the payload parts of gpu_tests/runner/build_payload.sh in $STAGE (default /tmp/stage), unpacks them
# (device_setup.sh, unless /tmp/site is there already), then runs every default tiny family x connector x
# frontend plus one mutation per family, in parallel on the one GPU. Writes OUT_DIR/results.tgz (JSON reports,
# matrix_summary.json, logs). Run from the repository root.
set -uo pipefail
out=${1:?usage: gpu_tests/runner/h200.sh OUT_DIR [run_matrix options]}; shift
[ -d /tmp/site/vllm ] || bash gpu_tests/runner/device_setup.sh
export PYTHONPATH=$PWD:/tmp/site HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
# flashinfer is not in the payload: without this the sampler imports it and the engine dies.
export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_DEVCLIENT_TINY_DIR=/tmp/tiny VLLM_DEVCLIENT_GSM8K_DIR=/tmp/gsm8k
export VLLM_DEVCLIENT_SMALL_MODEL=/tmp/models/smollm2
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
mkdir -p "$out"
# 15 servers at a time fill the 16 cores; the deadline keeps the call (with the ~75 s setup) inside the device
# tool's 10 minutes, and the last wave (llama, ~80 s a case) still starts after the slow hybrid families.
python3 -m gpu_tests.runner.run_matrix --out /tmp/matrix --parallel 15 --deadline-s 510 --expected-case-s 100 "$@"; status=$?
tar czf "$out/results.tgz" -C /tmp matrix
exit $status
