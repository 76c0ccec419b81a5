#!/usr/bin/env bash
# Regenerates every fixture and shipped small model (torch + transformers + tokenizers; the GPU machine):
# tokenizer goldens, the decision model and its references, the Qwen3 targets, the DFlash drafters.
# With OUT set, also packs them into $OUT/fixtures.tar.gz.
set -uo pipefail
cd "$(dirname "$0")/.."
export PYTHONUNBUFFERED=1
status=0
for s in make_tokenizer_fixture make_decision_fixture make_qwen3_fixture make_dflash_fixture; do
  echo "== $s"
  python3 "tools/$s.py" || { echo "!! $s failed"; status=1; }
done
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  tar czf "$OUT/fixtures.tar.gz" tests/fixtures/decision-tiny tests/fixtures/tokenizer tests/fixtures/decision \
    tests/fixtures/qwen3 tests/fixtures/dflash 2>/dev/null
  ls -la "$OUT"
fi
exit $status
