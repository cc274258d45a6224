"""Real tool outputs as evidence through the CLI: detection, merging with a snapshot, and snapshot round trips."""
import json

import pytest
from click.testing import CliRunner

from conftest import REPO
from perfdoctor.cli import cli

REAL = REPO.parent / "shared" / "fixtures" / "real"


def run(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def ranking(output):
    return [h["id"] for h in json.loads(output)["hypotheses"]]


def test_socket_fallback_log_points_at_rdma_not_in_use():
    r = run("diagnose", "--artifact", REAL / "nccl-tests_allreduce_socket_fallback_eks.txt", "--format", "json")
    assert r.exit_code == 0, r.output
    assert ranking(r.output)[0] == "gpudirect_rdma_disabled"


def test_gpu_pairs_through_the_cpu_point_at_the_pcie_path(tmp_path):
    """Tensor-parallel decode got slower on two GPUs; the real topo -m shows their only path crosses the CPU's
    PCIe host bridge (PHB), which moves the PCIe path and TP communication up against an NVLink topology."""
    snap = tmp_path / "s.yaml"
    snap.write_text("context: {workload: inference, nodes: 1, gpus_per_node: 2, tp: 2}\n"
                    "baseline: {itl_p50_s: 0.020}\ncurrent: {itl_p50_s: 0.034}\n")
    phb = json.loads(run("diagnose", snap, "--artifact", REPO / "tests" / "fixtures" / "nvidia-smi_topo_m_2x5090_phb.txt",
                         "--format", "json").output)
    nvlink = json.loads(run("diagnose", snap, "--artifact", REAL / "nvidia-smi_topo_m_8xA100_nv12_17nics.txt",
                            "--format", "json").output)
    assert phb["observations"]["gpu_pairs_via_cpu"]["present"]
    assert nvlink["observations"]["gpu_pairs_via_cpu"]["present"] is False
    p = lambda out, rc: next(h["probability"] for h in out["hypotheses"] if h["id"] == rc)
    for rc in ("pcie_link_degradation", "tensor_parallel_comm"):
        assert p(phb, rc) > 2 * p(nvlink, rc)


def test_power_cap_at_idle_is_not_a_throttle():
    """Two A40s report SW power cap while idle at 25-30 W: the parser notes it, the ranking must not blame clocks."""
    r = run("diagnose", "--artifact", REAL / "nvidia-smi_q_10xA40_sw_power_cap.txt", "--format", "json")
    out = json.loads(r.output)
    assert any("not a load throttle" in w for w in out["warnings"])
    assert ranking(r.output).index("gpu_throttling") > 2


def test_time_sliced_gpu_points_at_the_neighbours(tmp_path):
    """Five processes time-slice one T4 (real table): latency doubled, and the co-tenants are the suspects."""
    table = REPO / "tests" / "fixtures" / "nvidia-smi_1xT4_515_time_slicing_5_processes.txt"
    snap = tmp_path / "s.yaml"
    snap.write_text("context: {workload: inference, nodes: 1, gpus: 1}\n"
                    "baseline: {e2e_p50_s: 0.020, gpu_compute_procs: 1}\ncurrent: {e2e_p50_s: 0.034}\n")
    shared = json.loads(run("diagnose", snap, "--artifact", table, "--format", "json").output)
    assert shared["observations"]["gpu_shared_by_processes"]["present"]
    assert any("shared by 5 compute processes" in w for w in shared["warnings"])
    alone = tmp_path / "alone.yaml"
    alone.write_text(snap.read_text().replace("current: {", "current: {gpu_compute_procs: 1, "))
    single = json.loads(run("diagnose", alone, "--artifact", table, "--format", "json").output)
    assert single["observations"]["gpu_shared_by_processes"]["present"] is False
    p = lambda out: next(h["probability"] for h in out["hypotheses"] if h["id"] == "noisy_neighbor")
    assert "noisy_neighbor" in ranking(json.dumps(shared))[:3]
    assert p(shared) > 3 * p(single)


def test_snapshot_file_round_trip_gives_the_same_ranking(tmp_path):
    args = ["--artifact", REAL / "nccl-tests_allreduce_8xA100_healthy.txt",
            "--artifact", f"node1:{REAL / 'nvidia-smi_q_8xH100_sxm_idle.txt'}"]
    out = tmp_path / "snap.yaml"
    r = run("snapshot", *args, "-o", out)
    assert r.exit_code == 0, r.output
    text = out.read_text()
    assert "node1/gpu7" in text and "nccl_busbw_gb_per_s: 233.79" in text
    direct = run("diagnose", *args, "--format", "json").output
    replay = run("diagnose", out, "--format", "json").output
    assert ranking(direct) == ranking(replay)


def test_snapshot_values_win_over_artifacts_with_a_warning(tmp_path):
    snap = tmp_path / "s.yaml"
    snap.write_text("current: {nccl_busbw_gb_per_s: 50}\nbaseline: {nccl_busbw_gb_per_s: 230}\n")
    r = run("diagnose", snap, "--artifact", REAL / "nccl-tests_allreduce_8xA100_healthy.txt", "--format", "json")
    out = json.loads(r.output)
    assert out["observations"]["busbw_down"]["present"]
    assert any("nccl_busbw_gb_per_s: already given; kept the earlier value" in w for w in out["warnings"])


@pytest.mark.parametrize("spec, fragment", [
    ("kineto={}", "not valid JSON"),
    ("{}", "not a recognised tool output"),
])
def test_foreign_file_is_a_one_line_error(tmp_path, spec, fragment):
    junk = tmp_path / "junk.txt"
    junk.write_text("hello\nworld\n")
    r = run("diagnose", "--artifact", spec.format(junk))
    assert r.exit_code == 2 and str(junk) in r.output and len(r.output.strip().splitlines()) == 1
    assert fragment in r.output


def test_no_evidence_at_all():
    r = run("diagnose")
    assert r.exit_code == 2 and "no evidence" in r.output


def test_real_h200_decode_like_gemv_is_memory_bound_not_compute(tmp_path):
    """The batch-1 GEMV rows of a real H200 dmon capture: util 99% and SM active 86%, but DRAM 88% and
    tensor pipes 3%. Utilization is a symptom: the ranking must say HBM-bound decode, not compute."""
    dmon = REPO / "tests" / "fixtures" / "h200" / "nvidia-smi_dmon_gpm_1xH200_copy_gemm_gemv.txt"
    lines = dmon.read_text().splitlines()
    rows = [l for l in lines if not l.startswith("#") and "17:56:55" <= l.split()[0] <= "17:57:00"]
    excerpt = tmp_path / "dmon_gemv.txt"
    excerpt.write_text("\n".join([l for l in lines if l.startswith("#")] + rows) + "\n")
    r = run("diagnose", "--artifact", excerpt, "--format", "json")
    assert r.exit_code == 0, r.output
    ids = ranking(r.output)
    assert ids[0] == "decode_memory_bound"
    assert ids.index("prefill_compute_bound") > 0


def test_a_node_short_of_gpus_next_to_a_full_one_points_at_a_hardware_fault(tmp_path):
    """The real nvidia-smi -q of a healthy node lists its 8 H100s; the user's count on the other node says 7."""
    full = REAL / "nvidia-smi_q_8xH100_sxm_idle.txt"
    snap = tmp_path / "s.yaml"
    snap.write_text("context: {workload: training, gpu: H100, nodes: 2, gpus_per_node: 8}\nchanges: []\n"
                    "baseline: {step_time_s: 1.0}\ncurrent: {step_time_s: 1.6, gpus_visible: {node1: 7}}\n")
    short = json.loads(run("diagnose", snap, "--artifact", f"node0:{full}", "--format", "json").output)
    assert short["observations"]["gpu_missing_from_node"]["present"]
    assert ranking(json.dumps(short))[0] == "gpu_hardware_fault"
    snap.write_text(snap.read_text().replace("gpus_visible: {node1: 7}", "gpus_visible: {node1: 8}"))
    listed = json.loads(run("diagnose", snap, "--artifact", f"node0:{full}", "--format", "json").output)
    assert listed["observations"]["gpu_missing_from_node"]["present"] is False
