#!/usr/bin/env bash
# `make fuzz`: a longer schemathesis run over every API operation (tests/security/test_api_fuzz.py).
#   FP_FUZZ_EXAMPLES  examples per operation (default 200 → ~14,000 requests, ~8 min on 2 cores / PostgreSQL)
#   FP_FUZZ_SEED      integer seed to replay a run (default: a fresh random seed, printed below)
#   DATABASE_URL / REDIS_URL as for `make test` (PostgreSQL is the interesting target: NUL bytes, jsonb).
set -euo pipefail
cd "$(dirname "$0")/.."
export FP_FUZZ_EXAMPLES="${FP_FUZZ_EXAMPLES:-200}"
export FP_FUZZ_SEED="${FP_FUZZ_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"
echo "fuzz: ${FP_FUZZ_EXAMPLES} examples per operation, seed ${FP_FUZZ_SEED} (replay with FP_FUZZ_SEED=${FP_FUZZ_SEED})"
# the importers' and forms' property tests with fresh random examples (CI runs them derandomized)
HYPOTHESIS_PROFILE=fuzz .venv/bin/python -m pytest -p no:cacheprovider -q -m "not integration and not browser" \
  tests/engine/calibration/test_calibration_import.py tests/security/test_portal_fuzz.py
exec .venv/bin/python -m pytest -p no:cacheprovider tests/security/test_api_fuzz.py -s -q --timeout 3600 "$@"
