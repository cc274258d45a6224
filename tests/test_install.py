"""`pip install .` into a fresh venv works from another folder: the KB ships as package data."""
import os
import subprocess
import sys

import pytest

from conftest import REPO


@pytest.mark.skipif(os.environ.get("PERFDOCTOR_SKIP_INSTALL_TEST") == "1", reason="PERFDOCTOR_SKIP_INSTALL_TEST=1")
def test_installed_cli_runs_outside_the_source_tree(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    subprocess.run([str(py), "-m", "pip", "install", "-q", str(REPO)],
                   check=True, cwd=tmp_path)
    example = tmp_path / "example.yaml"
    example.write_text((REPO / "examples" / "code_completion_13b.yaml").read_text())
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    out = subprocess.run([str(venv / "bin" / "perfdoctor"), "diagnose", "example.yaml", "--format", "json"],
                         cwd=tmp_path, env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert '"id": "prompt_length_growth"' in out.stdout
    where = subprocess.run([str(py), "-c", "import perfdoctor.kb.loader as l; print(l.KB_DIR)"],
                           cwd=tmp_path, env=env, capture_output=True, text=True).stdout
    assert str(venv) in where, f"KB loaded from {where!r}, not the installed package"
    check = subprocess.run([str(venv / "bin" / "perfdoctor"), "kb", "check"], cwd=tmp_path, env=env,
                           capture_output=True, text=True)
    assert check.returncode == 0 and "0 errors" in check.stdout
