#!/usr/bin/env bash
# Set up a virtual environment with the test extras and run the whole test suite.
# Used by the README's second command and by CI (.ci/run).
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e '.[test]'
.venv/bin/perfdoctor kb check
.venv/bin/python -m pytest -q
# Diagnosis must not regress: the labeled incident library gates CI (AC@3 over all cases >= 0.9).
.venv/bin/perfdoctor eval cases --no-probes --min-ac3 0.9
