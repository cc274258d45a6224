"""Shared fixtures: the real KB and engine (loaded once), the tiny oracle KB, and scenario files."""
import subprocess
from pathlib import Path

import pytest

from perfdoctor.engine.rank import Engine
from perfdoctor.kb.loader import load_kb

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
SCENARIOS = sorted((TESTS / "scenarios").glob("*.yaml"))
TINY_KB = TESTS / "tiny_kb"


@pytest.fixture(scope="session")
def kb():
    return load_kb()


@pytest.fixture(scope="session")
def engine(kb):
    return Engine(kb)


def stop_process(proc, timeout=15):
    """Terminate a server a test started, killing it if it will not stop."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(timeout=timeout)
