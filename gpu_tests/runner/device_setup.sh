#!/bin/bash
# Runs on the GPU machine once the payload parts p0..pN and payload.sha256 are in STAGE (default /tmp/stage):
# unpacks vLLM (with the MoE extension) to /tmp/site, vllm-rs beside it, converts SmolLM2-135M-Instruct to
# /tmp/models/smollm2, GSM8K to /tmp/gsm8k/{train,test}.jsonl, registers the tiny-model dummy initialiser
# (gpu_tests/runner/tiny_init.py) as a vLLM plugin, builds the tiny models into /tmp/tiny and the real-size
# folders (committed configs made offline, SmolLM2 tokenizer) into /tmp/real.
# Run from the repository root (the package and gpu_tests must be importable from here). About 60 s.
# A second release on the same machine (issue 35): VLLM_SITE=/tmp/site-X STAGE=/tmp/stage-X SITE_ONLY=1 unpacks
# only that release's vLLM, beside the first; the model, GSM8K and the tiny and real-size folders are shared.
set -euo pipefail
S=${STAGE:-/tmp/stage}; SITE=${VLLM_SITE:-/tmp/site}; M=/tmp/models; ROOT=$PWD
cd "$S"
cat $(ls p[0-9]* | sort -V) > payload.tar
sha256sum -c payload.sha256
mkdir -p pl && tar -xf payload.tar -C pl && (cd pl && sha256sum -c --quiet SHA256SUMS)
mkdir -p $SITE && xz -dc pl/core.tar.xz | tar -x -C $SITE
# vLLM 0.20.2 ships no vllm-rs: its payload has none, and its rust cases cannot run.
if [ -f pl/vllm-rs.xz ]; then xz -dc pl/vllm-rs.xz > $SITE/vllm/vllm-rs && chmod 755 $SITE/vllm/vllm-rs; fi
# ray for vLLM's IPC weight-transfer engine (payloads built since issue 26); its requirements only where the
# device's python3 lacks them, so that its own versions (torch's, transformers') stay in front.
if [ -f pl/ray.tar.xz ]; then
  xz -dc pl/ray.tar.xz | tar -x -C $SITE
  rm -rf ray_deps && mkdir ray_deps && tar -xf pl/ray_deps.tar -C ray_deps
  missing=$(python3 -c "import sys, importlib.metadata as m
for w in sys.argv[1:]:
    try: m.version(w.rsplit('/', 1)[-1].split('-')[0])
    except m.PackageNotFoundError: print(w)" ray_deps/*.whl)
  echo "ray's requirements installed from the payload: ${missing:-none}"
  [ -z "$missing" ] || python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE $missing
fi
python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE pl/gguf-0.19.0-py3-none-any.whl
# Wheels staged beside the parts (STAGE/whl) top up a payload built before minimal_reqs.txt grew.
if ls whl/*.whl >/dev/null 2>&1; then python3 -m pip install -q --no-index --no-deps --no-compile --target $SITE whl/*.whl; fi
if [ "${SITE_ONLY:-0}" != 1 ]; then
mkdir -p $M/gguf /tmp/gsm8k && xz -dc pl/gguf.xz > $M/gguf/SmolLM2-135M-Instruct.Q4_1.gguf
gzip -dc pl/gsm8k_test.jsonl.gz > /tmp/gsm8k/test.jsonl
gzip -dc pl/gsm8k_train.jsonl.gz > /tmp/gsm8k/train.jsonl
fi
# The seeded dummy initialiser and the defect catalogue (armed only by the check), loaded by every vLLM process
# through their plugin entry points.
d=$SITE/vllm_devclient_tiny_init-0.1.dist-info && mkdir -p $d
printf 'Metadata-Version: 2.1\nName: vllm-devclient-tiny-init\nVersion: 0.1\n' > $d/METADATA
printf '[vllm.general_plugins]\ntiny_init = gpu_tests.runner.tiny_init:register\nkv_defects = gpu_tests.kv_proof.defects:register\n' > $d/entry_points.txt
cd "$ROOT"
export PYTHONPATH=$ROOT:$SITE HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1
if [ "${SITE_ONLY:-0}" != 1 ]; then
python3 "$S/pl/convert_gguf.py" $M/gguf SmolLM2-135M-Instruct.Q4_1.gguf $M/smollm2 2>&1 | tail -1
# TINY_FAMILIES=none (the real-size matrix) builds no tiny model.
if [ "${TINY_FAMILIES:-all}" != none ]; then
  python3 -m gpu_tests.runner.build_tiny_models --out /tmp/tiny --tokenizer $M/smollm2 --families "${TINY_FAMILIES:-all}" 2>&1 \
    | grep -v Warning || true
fi
python3 -m gpu_tests.runner.real_models --out /tmp/real --tokenizer $M/smollm2
fi
# The MoE extension's name changed after vLLM 0.23.0 (_moe_C -> _moe_C_stable_libtorch).
python3 -c "import importlib, importlib.util as u, vllm, vllm._C_stable_libtorch, vllm.vllm_flash_attn as f; \
importlib.import_module('vllm._moe_C_stable_libtorch' if u.find_spec('vllm._moe_C_stable_libtorch') else 'vllm._moe_C'); \
print('vllm', vllm.__version__, 'FA3', f.FA3_AVAILABLE, 'MoE ok')"
# What `vllm serve` imports first: a release missing a package fails here, once, not in every server
# (0.23.0 needs ijson, mistral_common and theirs: release_extras.py).
python3 -c "import vllm.entrypoints.openai.api_server, vllm.v1.engine.core, gpu_tests.kv_proof.instruments; print('serve imports ok')"
# The RL runner's import (gpu_tests/rl): with the device's own requirements first, else with the payload's.
ipc="import ray, vllm.distributed.weight_transfer.ipc_engine; print('ray', ray.__version__, 'ipc_engine ok')"
if [ -f "$S/pl/ray_deps.tar" ] && ! python3 -c "$ipc"; then
  echo "retrying with every requirement of ray from the payload"
  python3 -m pip install -q --upgrade --no-index --no-deps --no-compile --target $SITE "$S"/ray_deps/*.whl
  python3 -c "$ipc"
elif [ ! -f "$S/pl/ray_deps.tar" ]; then
  python3 -c "$ipc"
fi
