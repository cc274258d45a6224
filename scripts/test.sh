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
