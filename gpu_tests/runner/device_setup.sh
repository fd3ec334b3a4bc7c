#!/bin/bash
# Runs on the GPU machine once the payload parts p0..pN and payload.sha256 are in STAGE (default /tmp/stage):
# unpacks vLLM (with the MoE extension) to /tmp/site, vllm-rs beside it, converts SmolLM2-135M-Instruct to
# /tmp/models/smollm2, GSM8K to /tmp/gsm8k/{train,test}.jsonl, registers the tiny-model dummy initialiser
# (gpu_tests/runner/tiny_init.py) as a vLLM plugin, builds the tiny models into /tmp/tiny and the real-size
# folders (committed configs made offline, SmolLM2 tokenizer) into /tmp/real.
# Run from the repository root (the package and gpu_tests must be importable from here). About 60 s.
set -euo pipefail
S=${STAGE:-/tmp/stage}; SITE=/tmp/site; M=/tmp/models; ROOT=$PWD
cd "$S"
cat $(ls p[0-9]* | sort -V) > payload.tar
sha256sum -c payload.sha256
mkdir -p pl && tar -xf payload.tar -C pl && (cd pl && sha256sum -c --quiet SHA256SUMS)
mkdir -p $SITE && xz -dc pl/core.tar.xz | tar -x -C $SITE
xz -dc pl/vllm-rs.xz > $SITE/vllm/vllm-rs && chmod 755 $SITE/vllm/vllm-rs
python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE pl/gguf-0.19.0-py3-none-any.whl
# Wheels staged beside the parts (STAGE/whl) top up a payload built before minimal_reqs.txt grew.
if ls whl/*.whl >/dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE whl/*.whl; fi
mkdir -p $M/gguf /tmp/gsm8k && xz -dc pl/gguf.xz > $M/gguf/SmolLM2-135M-Instruct.Q4_1.gguf
gzip -dc pl/gsm8k_test.jsonl.gz > /tmp/gsm8k/test.jsonl
gzip -dc pl/gsm8k_train.jsonl.gz > /tmp/gsm8k/train.jsonl
# The seeded dummy initialiser, loaded by every vLLM process through its plugin entry point.
d=$SITE/vllm_devclient_tiny_init-0.1.dist-info && mkdir -p $d
printf 'Metadata-Version: 2.1\nName: vllm-devclient-tiny-init\nVersion: 0.1\n' > $d/METADATA
printf '[vllm.general_plugins]\ntiny_init = gpu_tests.runner.tiny_init:register\n' > $d/entry_points.txt
cd "$ROOT"
export PYTHONPATH=$ROOT:$SITE HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
python3 "$S/pl/convert_gguf.py" $M/gguf SmolLM2-135M-Instruct.Q4_1.gguf $M/smollm2 2>&1 | tail -1
python3 -m gpu_tests.runner.build_tiny_models --out /tmp/tiny --tokenizer $M/smollm2 --families "${TINY_FAMILIES:-all}" 2>&1 \
  | grep -v Warning || true
python3 -m gpu_tests.runner.real_models --out /tmp/real --tokenizer $M/smollm2
python3 -c "import vllm, vllm._C_stable_libtorch, vllm._moe_C_stable_libtorch, vllm.vllm_flash_attn as f; \
print('vllm', vllm.__version__, 'FA3', f.FA3_AVAILABLE, 'MoE ok')"
