#!/usr/bin/env bash
# Does jaxassoc work on this machine's GPU or TPU? Three checks on JAX's default device, one summary:
#   1. parity: tiny random Llama and GPT-2 checkpoints written by transformers (tests/family_specs, as the
#      tests write them), loaded by jaxassoc onto the device in float32 and in mixed precision; their logits
#      against transformers' (PyTorch, CPU, float32)
#   2. the default audit's RPAM and UnStereoEval parts (conf/audit/default.yaml), run by `jaxassoc metric=audit`
#      with a fresh cache, so every model output is computed on the device
#   3. throughput and precision: SmolLM2-135M sentence scoring (UnStereoEval's path) under model.precision=
#      float32, mixed and bfloat16: sentences/s, tokens/s, useful TFLOP/s against the matmul rate of each
#      policy's products on the same device (f32 at HIGHEST; bf16 x bf16 -> f32), and how far mixed and
#      bfloat16 move the sentence log-likelihoods and UnStereoEval's per-pair decisions from float32's
# It runs on a CPU too (no accelerator found: the quick sizes, a few minutes).
#
# Usage: benchmarks/device_check.sh [--quick|--full] [--out DIR]
#   --quick / --full  the sizes (default: --full on a GPU or TPU, --quick on a CPU)
#   --out DIR         where the audit's results and the logs go (default: a new folder under ${TMPDIR:-/tmp})
# Needs: jaxassoc with the embedded models (README, "Installing the package"), JAX for the device
# (pip install -U "jax[cuda12]" or "jax[tpu]"), and PyTorch for the parity reference (a CPU build is enough).
# Environment: PYTHON (default: .venv/bin/python if present, else python3).
set -uo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-}
if [ -z "$python" ]; then
  if [ -x .venv/bin/python ]; then python=.venv/bin/python; else python=python3; fi
fi
size=auto
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) size=quick ;;
    --full) size=full ;;
    --out) out=$2; shift ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "device_check.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
  esac
  shift
done
out=${out:-$(mktemp -d "${TMPDIR:-/tmp}/jaxassoc-device-check-XXXXXX")}
mkdir -p "$out"
check="$python benchmarks/_device_check.py"
failed=()
start=$(date +%s)

echo "== device"
$check env || { echo "device_check.sh: JAX does not start: $python -c 'import jax; print(jax.devices())'" >&2; exit 1; }
if [ "$size" = auto ]; then
  backend=$("$python" -c "import jax; print(jax.default_backend())" 2>/dev/null)
  if [ "$backend" = cpu ]; then size=quick; else size=full; fi
fi
echo "sizes: $size; results and logs in $out"

echo "== 1. parity with transformers"
$check parity | grep -v '^$' || failed+=(parity)  # (the tiny tokenizers' trainer prints empty lines)

echo "== 2. the audit's RPAM and UnStereoEval parts"
parts=$($check audit-parts $([ "$size" = quick ] && echo --quick))
t=$(date +%s)
if "$python" -m jaxassoc metric=audit "$parts" "hydra.run.dir=$out/audit" "cache_dir=$out/cache" >"$out/audit.log" 2>&1; then
  $check audit "$out/audit" || failed+=(audit)
  echo "audit: $(( $(date +%s) - t )) s with model loading and compilation; tables in $out/audit.log, report in $out/audit/report"
else
  failed+=(audit)
  echo "audit: FAIL, jaxassoc exited with an error; the end of $out/audit.log:"
  tail -n 20 "$out/audit.log"
fi

echo "== 3. scoring throughput and deviation from float32, per precision policy"
if [ "$size" = quick ]; then
  $check throughput --sentences 128 --tokens-per-batch 1024 --repeats 1 --matmul-n 1024 || failed+=(throughput)
else
  $check throughput || failed+=(throughput)
fi

echo "== summary ($(( $(date +%s) - start )) s)"
if [ ${#failed[@]} -eq 0 ]; then
  echo "device check passed: parity, audit parts, throughput and precision (sizes: $size)"
else
  echo "device check FAILED: ${failed[*]} (see above; logs in $out)"
  exit 1
fi
