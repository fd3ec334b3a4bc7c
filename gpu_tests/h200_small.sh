#!/bin/bash
# The acceptance run on the project's offline H200 machine: the `small` profile (SmolLM2-135M) with both
# connectors and both frontends, plus the mutation test, as five pytest processes sharing the one GPU.
# Needs the payload of shared/gpu/build_payload.sh unpacked by device_setup.sh (vllm 0.26.0 in /tmp/site,
# the model in /tmp/models/smollm2, GSM8K in /tmp/models). Run from the repository root.
# usage: gpu_tests/h200_small.sh OUT_DIR        (writes OUT_DIR/reports.tgz: JSON reports, server logs)
set -u
out=${1:?usage: gpu_tests/h200_small.sh OUT_DIR}
reports=/tmp/gpu_reports
mkdir -p "$out" /tmp/gsm8k "$reports"
cp /tmp/models/gsm8k_test.jsonl /tmp/gsm8k/test.jsonl
cp /tmp/models/gsm8k_train.jsonl /tmp/gsm8k/train.jsonl

export PYTHONPATH=/tmp/site:$PWD HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PYTHONUNBUFFERED=1
# flashinfer is not in the payload: without this the sampler imports it and the engine dies.
export VLLM_USE_FLASHINFER_SAMPLER=0
export VLLM_DEVCLIENT_GSM8K_DIR=/tmp/gsm8k VLLM_DEVCLIENT_SMALL_MODEL=/tmp/models/smollm2
export VLLM_DEVCLIENT_GPU_PROFILES=small VLLM_DEVCLIENT_REPORT_DIR=$reports
# A fixed KV-cache size skips vLLM's memory profiling, which other servers starting on the same GPU
# would disturb; 0.1 keeps the startup free-memory check satisfied with five servers.
export VLLM_DEVCLIENT_SERVER_ARGS="--attention-backend FLASH_ATTN --gpu-memory-utilization 0.1 \
--kv-cache-memory-bytes 2147483648"

t=gpu_tests/test_offload_gsm8k.py
nodes=(
  "$t::test_offload_reload_gsm8k[small-offloading-python]"
  "$t::test_offload_reload_gsm8k[small-offloading-rust]"
  "$t::test_offload_reload_gsm8k[small-simple-python]"
  "$t::test_offload_reload_gsm8k[small-simple-rust]"
  "$t::test_mutation_corrupted_reload_is_caught[small-offloading-python-mutation]"
)
pids=()
for node in "${nodes[@]}"; do
  name=${node##*[}; name=${name%]}
  timeout -s INT -k 40 "${SUITE_TIMEOUT:-440}" python3 -m pytest -p no:cacheprovider -q -rA "$node" \
    > "$reports/$name.pytest.log" 2>&1 &
  pids+=($!)
  sleep 2
done
status=0
for i in "${!pids[@]}"; do
  wait "${pids[$i]}" || status=1
  echo "== ${nodes[$i]##*::}: $(tail -1 "$reports/$(n=${nodes[$i]##*[}; echo "${n%]}").pytest.log")"
done

python3 - "$reports" <<'EOF'
import json, pathlib, sys
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.json")):
    r = json.loads(path.read_text())
    w = r["windows"]["reload"]
    acc = " ".join(f"{k}={v['accuracy']:.3f}" for k, v in r["runs"].items())
    warm = r.get("reload_vs_warm") or {}
    print(
        f"{r['case_id']}: passed={r['passed']} vllm={r['vllm_version']} rust={r['rust_frontend_version']} "
        f"frontend={r['frontend_observed']} ext_hits+={w['external_prefix_cache_hits']} "
        f"load_bytes+={w['cpu_to_gpu_bytes']} cpu_blocks={r['cpu_blocks_stored']} "
        f"reload~cold={r['reload_vs_cold']['matches']}/{r['reload_vs_cold']['total']} "
        f"reload~warm={warm.get('matches')} floor={r['noise_floor']['matches']}/{r['noise_floor']['total']} "
        f"{acc} startup={r['timings'].get('server_startup_s', 0):.0f}s check={r['timings']['check_s']:.0f}s"
    )
    for a in r["assertions"]:
        print(f"   [{'ok' if a['passed'] else 'FAIL'}] {a['name']}: {a['message'][:230]}")
EOF
tar czf "$out/reports.tgz" -C /tmp gpu_reports
exit $status
