"""Parsers for real tool outputs (perfdoctor.symptoms.artifacts and its modules).

Real outputs: ../shared/fixtures/real/ (see its SOURCES.md). The Kineto traces built by `make_trace` below
are SYNTHETIC (hand-built to a known timeline); the one real Kineto excerpt is tests/fixtures/ (SOURCES.md).
"""
import gzip
import json
import re
from pathlib import Path

import pytest

from perfdoctor.errors import InputError
from perfdoctor.symptoms.artifacts import KINDS, PARSERS, Artifact, detect_kind, load_artifact

REAL = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "real"
LOCAL = Path(__file__).resolve().parent / "fixtures"
HTA_TRACE = LOCAL / "hta_call_stack_backward_thread.json"

KIND_OF = {
    "nvidia-smi_q_8xH100_sxm_idle.txt": "nvidia_smi_q",
    "nvidia-smi_q_10xA40_sw_power_cap.txt": "nvidia_smi_q",
    "nvidia-smi_q_x_A100_sxm4_80gb_mig.xml": "nvidia_smi_xml",
    "nvidia-smi_dmon_1gpu_idle_to_load_ramp.txt": "nvidia_smi_dmon",
    "nvidia-smi_dmon_s_mutc_o_TD_pcie.txt": "nvidia_smi_dmon",
    "nvidia-smi_topo_m_8xA100_nv12_17nics.txt": "nvidia_smi_topo",
    "nvidia-smi_topo_m_2x2080ti_pix_p2p_not_supported.txt": "nvidia_smi_topo",
    "nccl-tests_allreduce_8xA100_healthy.txt": "nccl_tests",
    "nccl-tests_allreduce_4xA100_nccl_debug_info_p2p.txt": "nccl_tests",
    "nccl-tests_allreduce_2x2080ti_pcie_no_p2p_low_busbw.txt": "nccl_tests",
    "nccl-tests_allreduce_socket_fallback_eks.txt": "nccl_tests",
    "nccl-tests_allreduce_efa_libfabric_eks.txt": "nccl_tests",
    "ib_write_bw_ib_hdr_loopback_8M.txt": "ib_write_bw",
    "ib_write_bw_ib_loopback_all_sizes_interleaved.txt": "ib_write_bw",
    "iostat-x_ALL_busy_sda.txt": "iostat",
    "dcgm-exporter_metrics_L4_idle_full_exposition.txt": "metrics_dump",
    "dcgm-exporter_metrics_A100_MIG_loaded_docs.txt": "metrics_dump",
    "vllm_metrics_idle_v1_qwen0.5b_full.txt": "metrics_dump",
}
# real files in the fixture dir that no parser here handles
NOT_OURS = ["SOURCES.md"]


def load(name: str, kind: str | None = None) -> Artifact:
    return load_artifact(str(REAL / name), kind)


def assert_points_at(err: InputError, path):
    """The message names the file and a line: "<path>:<line>: ..."."""
    assert re.match(re.escape(str(path)) + r":\d+: ", str(err)), str(err)
    assert int(str(err)[len(str(path)) + 1:].split(":")[0]) >= 1


# ---------------------------------------------------------------- registry / detection

def test_registry_is_explicit_and_complete():
    assert KINDS == ["nvidia_smi_q", "nvidia_smi_xml", "nvidia_smi_table", "nvidia_smi_dmon", "nvidia_smi_topo",
                     "nccl_tests", "ib_write_bw", "iostat", "kineto", "engine_log", "bench_serving", "metrics_dump",
                     "nccl_log"]
    assert all(callable(d) and callable(p) for _, d, p in PARSERS)


@pytest.mark.parametrize("name", sorted(KIND_OF))
def test_detect_picks_exactly_the_right_parser(name):
    text = (REAL / name).read_text()
    assert [k for k, det, _ in PARSERS if det(text)] == [KIND_OF[name]]
    art = load(name)
    assert art.kind == KIND_OF[name]
    assert art.notes and isinstance(art.context, dict)


# real `nvidia-smi` summary tables kept in tests/fixtures/ (sources in its SOURCES.md)
TABLES = ["nvidia-smi_8x2080ti_418_processes.txt", "nvidia-smi_1xT4_515_time_slicing_5_processes.txt",
          "nvidia-smi_4x4090_535_four_jobs_on_every_gpu.txt", "nvidia-smi_1xA10_550_no_processes.txt"]


@pytest.mark.parametrize("name", TABLES)
def test_detect_summary_table(name):
    text = (LOCAL / name).read_text()
    assert [k for k, det, _ in PARSERS if det(text)] == ["nvidia_smi_table"]


def test_detect_kineto_real_trace():
    assert detect_kind(HTA_TRACE.read_text()) == "kineto"


@pytest.mark.parametrize("name", NOT_OURS)
def test_other_real_files_are_not_claimed(name):
    assert detect_kind((REAL / name).read_text()) is None
    with pytest.raises(InputError) as e:
        load(name)
    assert_points_at(e.value, REAL / name)


# ---------------------------------------------------------------- nvidia-smi -q / -q -x

def test_nvidia_smi_q_8xh100_idle():
    a = load("nvidia-smi_q_8xH100_sxm_idle.txt")
    gpus = [f"gpu{i}" for i in range(8)]
    assert a.context["gpu_count"] == 8 and a.signals["gpus_visible"] == {"node": 8}
    assert a.context["gpu"] == "NVIDIA H100 80GB HBM3"
    assert a.context["driver"] == "565.57.01" and a.context["cuda"] == "12.7"
    assert a.context["bus_ids"]["gpu0"] == "00000000:18:00.0"
    assert a.context["bus_ids"]["gpu7"] == "00000000:DB:00.0"
    assert a.signals["power_limit_w"] == {g: 700.0 for g in gpus}
    assert a.signals["power_w"]["gpu0"] == 100.89
    assert a.signals["sm_clock_mhz"] == {g: 345.0 for g in gpus}
    assert a.signals["temp_c"]["gpu0"] == 30.0
    assert a.signals["gpu_util"] == {g: 0.0 for g in gpus}
    assert a.signals["throttle_reasons"] == {g: [] for g in gpus}   # only "Idle : Active"
    assert a.signals["pcie_link_gen"]["gpu3"] == 5 and a.signals["pcie_link_width"]["gpu3"] == 16
    assert a.signals["ecc_dbe_errors"] == {g: 0 for g in gpus}
    assert a.signals["row_remap_failures"] == {g: 0 for g in gpus}
    assert a.signals["fb_used_frac"]["gpu0"] == pytest.approx(1 / 81559)
    assert "gpu0=00000000:18:00.0" in a.notes[0]
    assert not any("PCIe link" in n for n in a.notes)


def test_nvidia_smi_q_a40_sw_power_cap_at_idle():
    a = load("nvidia-smi_q_10xA40_sw_power_cap.txt")
    assert a.context["gpu_count"] == 10 and a.context["gpu"] == "NVIDIA A40"
    assert a.context["driver"] == "550.127.05" and a.context["cuda"] == "12.4"
    capped = {g for g, r in a.signals["throttle_reasons"].items() if r}
    assert capped == {"gpu0", "gpu3"}
    assert a.signals["throttle_reasons"]["gpu0"] == ["sw_power_cap"]
    assert a.context["bus_ids"]["gpu0"] == "00000000:4F:00.0"
    assert a.context["bus_ids"]["gpu3"] == "00000000:56:00.0"
    assert a.signals["power_limit_w"]["gpu3"] == 300.0
    assert a.signals["power_w"]["gpu0"] == 29.7 and a.signals["power_w"]["gpu3"] == 24.94
    idle_cap = [n for n in a.notes if n.startswith("SW power cap active at idle on")]
    assert len(idle_cap) == 2
    assert "00000000:4F:00.0" in idle_cap[0] and "not a load throttle" in idle_cap[0]
    assert "00000000:56:00.0" in idle_cap[1]
    # idle A40s sit at PCIe gen 1 of max 4: current reported, downshift noted as an idle effect
    assert set(a.signals["pcie_link_gen"].values()) == {1.0}
    assert any("PCIe link gen 1 < max 4" in n and "at idle" in n for n in a.notes)


def test_nvidia_smi_xml_a100_mig():
    a = load("nvidia-smi_q_x_A100_sxm4_80gb_mig.xml")
    assert a.kind == "nvidia_smi_xml"
    assert a.context["gpu"] == "NVIDIA A100-SXM4-80GB"
    assert a.context["driver"] == "535.54.03" and a.context["cuda"] == "12.2"
    assert a.context["bus_ids"] == {"gpu0": "00000000:01:00.0"}
    s = a.signals
    assert s["sm_clock_mhz"] == {"gpu0": 1275.0}
    assert s["power_w"] == {"gpu0": 67.03} and s["power_limit_w"] == {"gpu0": 500.0}
    assert s["temp_c"] == {"gpu0": 27.0}
    assert s["throttle_reasons"] == {"gpu0": []}
    assert s["fb_used_frac"]["gpu0"] == pytest.approx(50 / 81920)
    assert s["pcie_link_gen"] == {"gpu0": 4.0} and s["pcie_link_width"] == {"gpu0": 16.0}
    assert "gpu_util" not in s                 # N/A under MIG
    assert "row_remap_failures" not in s       # <remapped_rows>N/A</remapped_rows>
    assert any("MIG enabled on gpu0" in n for n in a.notes)
    assert any("4 attached GPUs but the file has 1" in n for n in a.notes)


# ---------------------------------------------------------------- processes per GPU

def test_table_pre450_one_process_per_gpu():
    a = load_artifact(str(LOCAL / "nvidia-smi_8x2080ti_418_processes.txt"))
    s = a.signals
    assert a.kind == "nvidia_smi_table" and a.context["gpu_count"] == 8 and s["gpus_visible"] == {"node": 8}
    assert a.context["driver"] == "418.87.01" and a.context["cuda"] == "10.1"
    assert a.context["bus_ids"]["gpu5"] == "00000000:0C:00.0"
    assert s["gpu_compute_procs"] == {"gpu0": 1, "gpu1": 0, "gpu2": 1, "gpu3": 0, "gpu4": 0, "gpu5": 0,
                                      "gpu6": 1, "gpu7": 1}
    assert s["gpu_util"]["gpu2"] == 0.39 and s["temp_c"]["gpu2"] == 87.0
    assert s["power_w"]["gpu2"] == 166.0 and s["power_limit_w"]["gpu2"] == 250.0
    assert s["fb_used_frac"]["gpu6"] == pytest.approx(8852 / 10989)
    assert s["temp_c"]["gpu7"] == 37.0                # the row whose fan reads "ERR%"
    assert "throttle_reasons" not in s and "sm_clock_mhz" not in s   # the table does not show them
    assert any("truncated" in n for n in a.notes)      # "GeForce RTX 208..."
    assert not any("shared by" in n for n in a.notes)


def test_table_time_sliced_t4_five_tenants():
    a = load_artifact(str(LOCAL / "nvidia-smi_1xT4_515_time_slicing_5_processes.txt"))
    assert a.signals["gpu_compute_procs"] == {"gpu0": 5}
    assert a.signals["gpu_util"] == {"gpu0": 1.0} and a.signals["power_w"] == {"gpu0": 70.0}
    assert "cuda" not in a.context                     # "CUDA Version: N/A" in the driver container
    shared = [n for n in a.notes if "shared by 5 compute processes" in n]
    assert len(shared) == 1 and "43108" in shared[0] and "44595" in shared[0]


def test_table_four_jobs_each_spread_over_all_gpus():
    a = load_artifact(str(LOCAL / "nvidia-smi_4x4090_535_four_jobs_on_every_gpu.txt"))
    # 1378307 holds 1132 MiB on gpu0 and 406-456 MiB elsewhere: over a quarter of its peak, so a tenant
    assert a.signals["gpu_compute_procs"] == {f"gpu{i}": 4 for i in range(4)}
    assert a.context["gpu"] == "NVIDIA GeForce RTX 4090"
    assert a.signals["fb_used_frac"]["gpu0"] == pytest.approx(17466 / 24564)


def test_table_no_running_processes():
    a = load_artifact(str(LOCAL / "nvidia-smi_1xA10_550_no_processes.txt"))
    assert a.signals["gpu_compute_procs"] == {"gpu0": 0}
    assert a.signals["power_limit_w"] == {"gpu0": 150.0}


def test_windows_desktop_apps_are_not_tenants(tmp_path):
    # EDITED from the real A10 table into the Windows (WDDM) layout seen in public logs: the driver model
    # column reads WDDM, memory per process is N/A, and desktop apps are listed as C+G
    text = (LOCAL / "nvidia-smi_1xA10_550_no_processes.txt").read_text()
    text = text.replace("NVIDIA A10                     On  |", "NVIDIA A10                   WDDM  |")
    rows = ["|    0   N/A  N/A            2628      C   ...da\\envs\\torch\\python.exe          N/A      |",
            "|    0   N/A  N/A           14808    C+G   C:\\Windows\\explorer.exe               N/A      |",
            "|    0   N/A  N/A           20316    C+G   ...t\\Edge\\Application\\msedge.exe      N/A      |"]
    text = re.sub(r"\|  No running processes found +\|", lambda _: "\n".join(rows), text)
    p = tmp_path / "win.txt"
    p.write_text(text)
    a = load_artifact(str(p))
    assert a.signals["gpu_compute_procs"] == {"gpu0": 1}


def test_ddp_stray_contexts_are_not_tenants(tmp_path):
    # EDITED from the real 4x4090 table: the pattern of pytorch/pytorch#64130, where every DDP rank
    # leaves a 0 MiB context on the other GPUs, and of #7320, a 306 MiB context beside the real one
    text = (LOCAL / "nvidia-smi_4x4090_535_four_jobs_on_every_gpu.txt").read_text()
    rows = [l for l in text.splitlines() if "N/A  N/A" in l and " C " in l]
    pids = {"1378307": 0, "1381232": 1, "1396404": 2, "1420290": 3}
    edited = []
    for row in rows:
        gpu, pid = int(row.split()[1]), row.split()[4]
        mib = "5000MiB" if pids[pid] == gpu else ("306MiB" if gpu == 0 else "0MiB")
        edited.append(row[: row.rindex("python") + 6] + mib.rjust(len(row) - row.rindex("python") - 8) + " |")
    p = tmp_path / "ddp.txt"
    p.write_text(text.replace("\n".join(rows), "\n".join(edited)))
    a = load_artifact(str(p))
    assert a.signals["gpu_compute_procs"] == {f"gpu{i}": 1 for i in range(4)}
    assert sum("stray CUDA context" in n for n in a.notes) == 12
    assert not any("shared by" in n for n in a.notes)


def test_q_processes_none_counts_zero_and_q_blocks_are_counted(tmp_path):
    a = load("nvidia-smi_q_8xH100_sxm_idle.txt")
    assert a.signals["gpu_compute_procs"] == {f"gpu{i}": 0 for i in range(8)}
    # EDITED from the real file: two compute processes and the MPS server listed under the first GPU
    text = (REAL / "nvidia-smi_q_8xH100_sxm_idle.txt").read_text()
    block = "".join(
        f"        GPU instance ID                   : N/A\n        Compute instance ID               : N/A\n"
        f"        Process ID                        : {pid}\n            Type                          : {t}\n"
        f"            Name                          : {name}\n            Used GPU Memory               : {mib} MiB\n"
        for pid, t, name, mib in [(25384, "C", "nvidia-cuda-mps-server", 26), (4101, "M+C", "python3", 30500),
                                  (4102, "M+C", "python3", 41000)])
    first = text.index("    Processes                             : None")
    text = text[:first] + "    Processes\n" + block + text[first + len("    Processes                             : None\n"):]
    p = tmp_path / "q.txt"
    p.write_text(text)
    a = load_artifact(str(p))
    assert a.signals["gpu_compute_procs"]["gpu0"] == 2 and a.signals["gpu_compute_procs"]["gpu1"] == 0
    assert any("MPS control server" in n for n in a.notes)


def test_xml_processes_and_mig(tmp_path):
    a = load("nvidia-smi_q_x_A100_sxm4_80gb_mig.xml")
    assert "gpu_compute_procs" not in a.signals       # MIG instances do not time-slice each other
    # EDITED from the real file: MIG off and two processes listed
    text = (REAL / "nvidia-smi_q_x_A100_sxm4_80gb_mig.xml").read_text()
    info = "".join(f"<process_info><pid>{pid}</pid><type>C</type><process_name>python</process_name>"
                   f"<used_memory>{mib} MiB</used_memory></process_info>" for pid, mib in [(11, 20000), (12, 9000)])
    text = re.sub(r"<current_mig>\s*Enabled\s*</current_mig>", "<current_mig>Disabled</current_mig>", text)
    p = tmp_path / "x.xml"
    p.write_text(text.replace("<processes />", f"<processes>{info}</processes>"))
    assert load_artifact(str(p)).signals["gpu_compute_procs"] == {"gpu0": 2}


def test_table_errors_point_at_the_line(tmp_path):
    text = (LOCAL / "nvidia-smi_1xT4_515_time_slicing_5_processes.txt").read_text()
    bad = tmp_path / "bad.txt"
    bad.write_text(text.replace("   1579MiB / 15360MiB ", "   1579MB / 15360MB   "))
    with pytest.raises(InputError, match="Fan Temp Perf") as e:
        load_artifact(str(bad))
    assert_points_at(e.value, bad)
    bad.write_text(text.replace("|    0   N/A  N/A     44595", "|    3   N/A  N/A     44595"))
    with pytest.raises(InputError, match="GPU index") as e:
        load_artifact(str(bad))
    assert_points_at(e.value, bad)
    cut = tmp_path / "cut.txt"
    cut.write_text(text[: text.index("| Processes:")])
    with pytest.raises(InputError, match="before the Processes table") as e:
        load_artifact(str(cut))
    assert_points_at(e.value, cut)


# ---------------------------------------------------------------- dmon

def test_dmon_default_columns_ramp():
    a = load("nvidia-smi_dmon_1gpu_idle_to_load_ramp.txt")
    s = a.signals
    assert s["gpu_util"]["gpu0"] == pytest.approx(460 / 900)
    assert s["sm_clock_mhz"]["gpu0"] == pytest.approx(1630.0)
    assert s["power_w"]["gpu0"] == pytest.approx(1866 / 9)
    assert s["temp_c"]["gpu0"] == pytest.approx(53.0)
    assert a.context["samples"] == {"gpu0": 9}
    assert any("3%-99%" in n for n in a.notes)


def test_dmon_mutc_time_date_columns():
    a = load("nvidia-smi_dmon_s_mutc_o_TD_pcie.txt")
    assert a.context["samples"] == {"gpu0": 6}          # the stray blank line is skipped
    assert a.signals["gpu_util"]["gpu0"] == pytest.approx(25 / 600)
    assert a.signals["sm_clock_mhz"]["gpu0"] == 1695.0
    assert "power_w" not in a.signals and "temp_c" not in a.signals
    assert a.context["columns"][:3] == ["Date", "Time", "gpu"]


# ---------------------------------------------------------------- topo

def test_topo_8xa100_nvswitch_and_nics():
    a = load("nvidia-smi_topo_m_8xA100_nv12_17nics.txt")
    c = a.context
    assert a.signals == {"gpu_pair_paths": ["NVLINK"]}
    assert c["gpu_count"] == 8 and c["nic_count"] == 17
    assert len(c["gpu_links"]) == 28 and set(c["gpu_links"].values()) == {"NV12"}
    assert c["nearest_nic"]["gpu0"] == {"link": "PXB", "nics": ["mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5"]}
    assert c["nearest_nic"]["gpu7"]["nics"] == ["mlx5_14", "mlx5_15", "mlx5_16", "mlx5_17"]
    assert c["nic_names"]["NIC16"] == "mlx5_bond_0"
    assert c["cpu_affinity"]["gpu5"] == "0-103" and c["numa_affinity"]["gpu5"] == "0"
    assert "all 28 GPU pairs NV12" in a.notes


def test_topo_2x2080ti_pix_p2p_not_supported():
    a = load("nvidia-smi_topo_m_2x2080ti_pix_p2p_not_supported.txt")
    c = a.context
    assert c["gpu_links"] == {"gpu0-gpu1": "PIX"}
    assert c["p2p"] == {"gpu0-gpu1": "NS"}
    assert c["cpu_affinity"] == {"gpu0": "24-47,72-95", "gpu1": "24-47,72-95"}
    assert c["numa_affinity"] == {"gpu0": "1", "gpu1": "1"}
    assert "gpu0-gpu1 PIX; P2P not supported (NS)" in a.notes
    assert a.signals == {"gpu_p2p_ok": False, "gpu_pair_paths": ["PIX"]}


def test_topo_p2p_ok_everywhere_and_nvlink_matrix_ignored(tmp_path):
    """All-OK P2P matrix -> gpu_p2p_ok true; the NVLink capability matrix (-p2p n) says nothing about PCIe P2P."""
    text = (REAL / "nvidia-smi_topo_m_2x2080ti_pix_p2p_not_supported.txt").read_text()
    ok = tmp_path / "ok.txt"
    ok.write_text(text.replace("X       NS", "X       OK").replace("NS      X", "OK      X"))
    assert load_artifact(str(ok)).signals == {"gpu_p2p_ok": True, "gpu_pair_paths": ["PIX"]}
    nvlink = tmp_path / "nvlink.txt"
    nvlink.write_text(text.replace("topo -p2p p", "topo -p2p n"))
    a = load_artifact(str(nvlink))
    assert a.signals == {"gpu_pair_paths": ["PIX"]} and "p2p" not in a.context


def test_topo_2x5090_through_the_host_bridge():
    """Two GeForce cards whose only path is PHB: the pair talks through the CPU's PCIe root."""
    a = load_artifact(str(LOCAL / "nvidia-smi_topo_m_2x5090_phb.txt"))
    assert a.kind == "nvidia_smi_topo"
    assert a.context["gpu_links"] == {"gpu0-gpu1": "PHB"}
    assert a.signals == {"gpu_pair_paths": ["PHB"]}


# ---------------------------------------------------------------- nccl-tests

def test_nccl_healthy_8xa100_plateau():
    a = load("nccl-tests_allreduce_8xA100_healthy.txt")
    assert a.signals["nccl_busbw_gb_per_s"] == pytest.approx(235, rel=0.01)       # 231.76, 234.37, 235.26
    assert a.signals["nccl_busbw_gb_per_s"] == pytest.approx((231.76 + 234.37 + 235.26) / 3)
    assert "nccl_transport" not in a.signals                                       # no NCCL_DEBUG=INFO
    assert a.context["avg_busbw_all_sizes"] == 68.4048
    assert a.context["largest_size_bytes"] == 8589934592
    assert a.context["ranks"] == 8 and a.context["gpu"] == "A100-SXM4-40GB"


def test_nccl_socket_fallback_mpi_prefixes():
    a = load("nccl-tests_allreduce_socket_fallback_eks.txt")
    assert a.signals["nccl_busbw_gb_per_s"] == pytest.approx(2.0, abs=0.05)
    assert a.signals["nccl_transport"] == "NET/Socket"
    assert a.context["avg_busbw_all_sizes"] == 0.733914


def test_nccl_efa_ofi():
    a = load("nccl-tests_allreduce_efa_libfabric_eks.txt")
    assert a.signals["nccl_transport"] == "NET/OFI"
    assert a.signals["nccl_busbw_gb_per_s"] == pytest.approx(2.83, abs=0.01)


def test_nccl_debug_info_socket_chosen_but_p2p_used():
    a = load("nccl-tests_allreduce_4xA100_nccl_debug_info_p2p.txt")
    assert a.signals["nccl_transport"].startswith("P2P")
    assert a.signals["nccl_transport"] != "NET/Socket"
    assert "gdr_enabled" not in a.signals
    assert a.context["nccl"] == "2.20.5" and a.context["nccl_cuda"] == "12.4"
    assert a.context["nccl_intra_transport"] == "P2P/direct pointer"
    assert a.context["nodes"] == 1 and a.context["ranks"] == 4
    assert a.signals["nccl_busbw_gb_per_s"] == pytest.approx((175.93 + 186.67 + 193.70) / 3)
    assert any("Using network Socket" in n and "unused" in n for n in a.notes)


def test_nccl_env_lines_say_what_the_environment_set():
    """The log's one 'set by environment' line (NCCL_WORK_FIFO_DEPTH) proves the ENV lines are printed and none of
    the P2P, SHM, IB, NIC or tuning variables was set: an empty list, with the unclassed variable named. A log
    without such lines (the healthy 8xA100 run) says nothing about the environment."""
    a = load("nccl-tests_allreduce_4xA100_nccl_debug_info_p2p.txt")
    assert a.signals["nccl_env_overrides"] == []
    assert any("NCCL_WORK_FIFO_DEPTH=4194304" in n for n in a.notes)
    assert "nccl_env_overrides" not in load("nccl-tests_allreduce_8xA100_healthy.txt").signals


def test_nccl_2080ti_low_busbw():
    a = load("nccl-tests_allreduce_2x2080ti_pcie_no_p2p_low_busbw.txt")
    assert a.signals["nccl_busbw_gb_per_s"] == pytest.approx(4.0)
    assert a.context["gpu"] == "NVIDIA GeForce RTX 2080 Ti"


def test_nccl_inter_node_ib_gdr_synthetic():
    """SYNTHETIC log lines in the NCCL 2.x format (no real multi-node INFO log was found)."""
    table = (REAL / "nccl-tests_allreduce_2x2080ti_pcie_no_p2p_low_busbw.txt").read_text()
    info = ("node1:11:22 [0] NCCL INFO Using network IB\n"
            "node1:11:22 [0] NCCL INFO Channel 00/0 : 1[0] -> 0[0] [receive] via NET/IB/0/GDRDMA\n"
            "node1:11:22 [0] NCCL INFO Channel 00/0 : 0[0] -> 1[0] [send] via NET/IB/0/GDRDMA\n"
            "node1:11:22 [0] NCCL INFO Channel 01/0 : 0[0] -> 2[1] via P2P/IPC/read\n")
    from perfdoctor.symptoms import nccl_tests
    a = nccl_tests.parse(info + table, "synthetic.log")
    assert a.signals["nccl_transport"] == "NET/IB" and a.signals["gdr_enabled"] is True
    a = nccl_tests.parse(info.replace("/GDRDMA", "") + table, "synthetic.log")
    assert a.signals["gdr_enabled"] is False


# ---------------------------------------------------------------- ib_write_bw

def test_ib_write_bw_8m_mib_to_gbit():
    a = load("ib_write_bw_ib_hdr_loopback_8M.txt")
    assert a.signals["ib_write_bw_gbit_per_s"] == pytest.approx(24056.72 * 1048576 * 8 / 1e9)
    assert a.signals["ib_write_bw_gbit_per_s"] == pytest.approx(201.8, abs=0.05)
    assert a.context["device"] == "ib0" and a.context["link_type"] == "IB"
    assert a.context["message_bytes"] == 8388608
    assert any("loopback" in n for n in a.notes)


def test_ib_write_bw_interleaved_sweep_uses_largest_size():
    a = load("ib_write_bw_ib_loopback_all_sizes_interleaved.txt")
    assert a.context["message_bytes"] == 8388608 and a.context["sizes"] == 23
    assert a.signals["ib_write_bw_gbit_per_s"] == pytest.approx(23240.68 * 1048576 * 8 / 1e9)


def test_ib_write_bw_report_gbits():
    text = (REAL / "ib_write_bw_ib_hdr_loopback_8M.txt").read_text().replace("[MB/sec]", "[Gb/sec]")
    text = text.replace("24056.72", "196.50")
    from perfdoctor.symptoms import ib_write_bw
    assert ib_write_bw.parse(text, "x.txt").signals["ib_write_bw_gbit_per_s"] == pytest.approx(196.5)


# ---------------------------------------------------------------- iostat

def test_iostat_busy_sda():
    a = load("iostat-x_ALL_busy_sda.txt")
    s = a.signals
    assert s["disk_read_latency_ms"]["sda"] == 12.58                 # report 2, not the since-boot 12.56
    assert a.context["disk_util_pct"]["sda"] == 85.36
    assert max(s["disk_read_latency_ms"], key=s["disk_read_latency_ms"].get) == "sda"
    assert "sdf" not in s["disk_read_latency_ms"]                    # 62.51 ms at 0.09 % util: noise
    assert s["storage_read_mb_per_s"]["sda"] == pytest.approx(41499.97 / 1024)
    assert s["cpu_iowait_frac"] == pytest.approx(0.0027)
    assert s["cpu_steal_frac"] == pytest.approx(0.005)
    assert a.context["reports"] == 3 and a.context["cpus"] == 9
    assert any(n.startswith("sda 85.36% util") for n in a.notes)


# ---------------------------------------------------------------- kineto

def make_trace(rank=None, steps=3, step_us=100_000):
    """SYNTHETIC Kineto-style trace. Each step: DataLoader wait 0-20 %, compute kernel 20-70 %,
    NCCL all-reduce 60-90 % (overlapping compute by 10 %), GPU idle 0-20 % and 90-100 %."""
    ev = []
    for i in range(steps):
        t0 = 1_700_000_000_000 + i * step_us
        pct = lambda p: t0 + p * step_us // 100
        ev += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{i + 10}", "pid": 7, "tid": 7,
             "ts": t0, "dur": step_us},
            {"ph": "X", "cat": "user_annotation", "pid": 7, "tid": 7, "ts": pct(0), "dur": pct(20) - pct(0),
             "name": "enumerate(DataLoader)#_MultiProcessingDataLoaderIter.__next__"},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 7, "tid": 7,
             "ts": pct(20), "dur": 5},
            {"ph": "X", "cat": "kernel", "pid": 0, "tid": 7, "ts": pct(20), "dur": pct(70) - pct(20),
             "name": "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", "args": {"device": 0}},
            {"ph": "X", "cat": "kernel", "pid": 0, "tid": 20, "ts": pct(60), "dur": pct(90) - pct(60),
             "name": "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevComm*, unsigned long, ncclWork*)",
             "args": {"device": 0}},
        ]
    doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": ev}
    if rank is not None:
        doc["distributedInfo"] = {"backend": "nccl", "rank": rank, "world_size": 2}
    return doc


def test_kineto_synthetic_breakdown(tmp_path):
    p = tmp_path / "trace.json"
    p.write_text(json.dumps(make_trace(rank=1)))
    a = load_artifact(str(p))
    assert a.kind == "kineto"
    assert a.signals["step_time_s"] == {"rank1": pytest.approx(0.1)}
    # NCCL runs 60-90 %, 60-70 % of it under the GEMM: only 70-90 % is exposed
    assert a.signals["comm_time_frac"] == {"rank1": pytest.approx(0.20)}
    assert "NCCL kernels cover 30% of the step, 33% of that hidden under compute kernels" in " ".join(a.notes)
    assert a.signals["gpu_idle_frac"] == {"rank1": pytest.approx(0.30)}
    assert a.signals["dataloader_wait_frac"] == {"rank1": pytest.approx(0.20)}
    assert a.context["world_size"] == 2 and a.context["gpu"] == "NVIDIA H100 80GB HBM3"


def test_kineto_exposed_comm_counts_nccl_time_no_compute_kernel_covers(tmp_path):
    """SYNTHETIC: two NCCL kernels on two streams overlapping each other (10-40 % and 30-60 %) and two compute
    kernels (0-20 %, 50-55 %): NCCL covers 50 %, compute hides 10-20 % and 50-55 %, so 35 % is exposed."""
    t0, step = 1_700_000_000_000, 100_000
    at = lambda p: t0 + p * step // 100  # noqa: E731
    kernel = lambda name, a, b, tid: {"ph": "X", "cat": "kernel", "name": name, "pid": 0, "tid": tid,  # noqa: E731
                                      "ts": at(a), "dur": at(b) - at(a), "args": {"device": 0}}
    events = [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#3", "pid": 7, "tid": 7, "ts": t0, "dur": step},
              kernel("ncclDevKernel_AllGather_RING_LL", 10, 40, 20), kernel("ncclDevKernel_ReduceScatter_RING_LL", 30, 60, 21),
              kernel("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn", 0, 20, 7), kernel("vectorized_elementwise_kernel", 50, 55, 7)]
    p = tmp_path / "rank0.json"
    p.write_text(json.dumps({"traceEvents": events}))
    a = load_artifact(str(p))
    assert a.signals["comm_time_frac"] == {"rank0": pytest.approx(0.35)}
    assert a.signals["gpu_idle_frac"] == {"rank0": pytest.approx(0.40)}   # 0-60 % busy


def test_kineto_rank_from_file_name_and_gzip(tmp_path):
    p = tmp_path / "rank-3.Jul_15_10_52_41.1074.pt.trace.json.gz"
    p.write_bytes(gzip.compress(json.dumps(make_trace(rank=None)).encode()))
    a = load_artifact(str(p))
    assert set(a.signals["step_time_s"]) == {"rank3"}


def test_kineto_real_hta_excerpt():
    a = load_artifact(str(HTA_TRACE))
    assert a.signals["step_time_s"] == {"rank0": pytest.approx(0.413451)}
    assert a.signals["gpu_idle_frac"]["rank0"] == pytest.approx(1 - 45 / 413451)
    assert a.signals["comm_time_frac"] == {"rank0": 0.0}
    assert a.signals["dataloader_wait_frac"] == {"rank0": 0.0}


H200_TRACE = Path(__file__).resolve().parent / "fixtures" / "h200" / "kineto_1xH200_slow_dataloader_nccl_rank0.json.gz"


def _slowed_copy(tmp_path, name, slower):
    """The real H200 trace with each GPU kernel's duration multiplied by slower(kernel name) (the 'after' side)."""
    doc = json.loads(gzip.decompress(H200_TRACE.read_bytes()))
    for e in doc["traceEvents"]:
        if isinstance(e, dict) and str(e.get("cat", "")).lower() == "kernel" and "dur" in e:
            e["dur"] = e["dur"] * slower(str(e.get("name", "")))
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("slower, spread", [
    (lambda name: 3.0 if "sgemm_largek" in name else 1.0, "few_ops"),   # one GEMM kernel three times slower
    (lambda name: 1.3, "all_ops"),                                       # every kernel 30% slower (lower clocks)
    (lambda name: 1.01, None),                                           # kernels unchanged: no reading
])
def test_a_trace_of_the_good_state_tells_one_slow_kernel_from_a_slow_gpu(tmp_path, slower, spread):
    """Kernel GPU time per step in the real H200 trace (baseline) against a copy whose kernels were slowed."""
    from perfdoctor.engine.rank import Engine
    from perfdoctor.symptoms.evidence import gather
    slow = _slowed_copy(tmp_path, "after.json", slower)
    snap = gather(Engine.load().kb, artifacts=(str(slow),), baseline_artifacts=(str(H200_TRACE),))
    assert snap.current.get("op_slowdown_spread") == spread
    if spread:
        assert any(w.startswith(f"op_slowdown_spread {spread}:") for w in snap.warnings)


# ---------------------------------------------------------------- truncated and foreign input

# fraction kept: 30 % everywhere, except the 2-GPU topo file whose first 30 % still holds the whole matrix
TRUNCATE = {name: 0.3 for name in KIND_OF} | {"nvidia-smi_topo_m_2x2080ti_pix_p2p_not_supported.txt": 0.2}


@pytest.mark.parametrize("name", sorted(TRUNCATE))
def test_truncated_fixture_raises_with_file_and_line(name, tmp_path):
    text = (REAL / name).read_text()
    p = tmp_path / name
    p.write_text(text[: int(len(text) * TRUNCATE[name])])
    with pytest.raises(InputError) as e:
        load_artifact(str(p), KIND_OF[name])
    assert_points_at(e.value, p)


def test_truncated_kineto_raises(tmp_path):
    text = HTA_TRACE.read_text()
    p = tmp_path / "rank0.json"
    p.write_text(text[: int(len(text) * 0.3)])
    with pytest.raises(InputError) as e:
        load_artifact(str(p), "kineto")
    assert_points_at(e.value, p)


@pytest.mark.parametrize("kind,name", [
    ("nccl_tests", "iostat-x_ALL_busy_sda.txt"),
    ("iostat", "nccl-tests_allreduce_8xA100_healthy.txt"),
    ("ib_write_bw", "nvidia-smi_dmon_1gpu_idle_to_load_ramp.txt"),
    ("nvidia_smi_q", "nvidia-smi_topo_m_8xA100_nv12_17nics.txt"),
    ("nvidia_smi_xml", "nvidia-smi_q_8xH100_sxm_idle.txt"),
    ("nvidia_smi_table", "nvidia-smi_q_8xH100_sxm_idle.txt"),
    ("nvidia_smi_dmon", "iostat-x_ALL_busy_sda.txt"),
    ("nvidia_smi_topo", "ib_write_bw_ib_hdr_loopback_8M.txt"),
    ("kineto", "nvidia-smi_q_x_A100_sxm4_80gb_mig.xml"),
])
def test_foreign_file_for_kind_raises(kind, name):
    with pytest.raises(InputError) as e:
        load(name, kind)
    assert_points_at(e.value, REAL / name)


def test_random_json(tmp_path):
    p = tmp_path / "random.json"
    p.write_text(json.dumps({"model": "llama", "batch": [1, 2, 3]}, indent=2))
    with pytest.raises(InputError) as e:
        load_artifact(str(p))
    assert_points_at(e.value, p)
    with pytest.raises(InputError) as e:
        load_artifact(str(p), "kineto")
    assert_points_at(e.value, p)
    p.write_text(json.dumps({"traceEvents": []}))
    with pytest.raises(InputError, match="ProfilerStep"):
        load_artifact(str(p), "kineto")


def test_unknown_kind_and_missing_file(tmp_path):
    with pytest.raises(InputError, match="unknown kind"):
        load("iostat-x_ALL_busy_sda.txt", "sar")
    with pytest.raises(InputError, match="cannot read"):
        load_artifact(str(tmp_path / "nope.txt"))


# ---------------------------------------------------------------- real captures on a lent H200 (tests/fixtures/h200)

H200 = LOCAL / "h200"
DMON_GPM = H200 / "nvidia-smi_dmon_gpm_1xH200_copy_gemm_gemv.txt"


def dmon_phase(tmp_path, start: str, end: str) -> Path:
    """The real H200 dmon capture cut to the rows sampled from start to end (HH:MM:SS), headers kept."""
    lines = DMON_GPM.read_text().splitlines()
    rows = [l for l in lines if not l.startswith("#") and start <= l.split()[0] <= end]
    p = tmp_path / f"dmon_{start.replace(':', '')}.txt"
    p.write_text("\n".join([l for l in lines if l.startswith("#")] + rows) + "\n")
    return p


@pytest.mark.parametrize("name,kind", [("nvidia-smi_q_1xH200_idle.txt", "nvidia_smi_q"),
                                       ("nvidia-smi_q_x_1xH200_idle.xml", "nvidia_smi_xml"),
                                       ("nvidia-smi_1xH200_idle.txt", "nvidia_smi_table"),
                                       ("nvidia-smi_q_perf_1xH200_under_bf16_gemm.txt", "nvidia_smi_q"),
                                       ("nvidia-smi_dmon_gpm_1xH200_copy_gemm_gemv.txt", "nvidia_smi_dmon"),
                                       ("nvidia-smi_topo_m_1xH200.txt", "nvidia_smi_topo"),
                                       ("kineto_1xH200_slow_dataloader_nccl_rank0.json.gz", "kineto")])
def test_h200_captures_are_detected(name, kind):
    assert load_artifact(str(H200 / name)).kind == kind


def test_h200_idle_q_and_xml_agree():
    q, x = load_artifact(str(H200 / "nvidia-smi_q_1xH200_idle.txt")), load_artifact(str(H200 / "nvidia-smi_q_x_1xH200_idle.xml"))
    for a in (q, x):
        assert a.context["gpu"] == "NVIDIA H200" and a.context["driver"] == "580.159.04"
        assert a.signals["power_limit_w"] == {"gpu0": 700.0}
        assert a.signals["sm_clock_mhz"] == {"gpu0": 345.0}
        assert a.signals["throttle_reasons"] == {"gpu0": []}
        assert a.signals["pcie_link_gen"] == {"gpu0": 5.0}


def test_h200_under_gemm_is_power_capped():
    """bf16 GEMMs draw the H200 to its 700 W cap; the SM clock falls from 1980 to 1425 MHz."""
    a = load_artifact(str(H200 / "nvidia-smi_q_perf_1xH200_under_bf16_gemm.txt"))
    assert a.signals["throttle_reasons"] == {"gpu0": ["sw_power_cap"]}
    assert a.signals["sm_clock_mhz"] == {"gpu0": 1425.0}
    assert a.signals["power_w"]["gpu0"] == pytest.approx(647.7)


def test_h200_topo_single_gpu_underlined_header():
    """nvidia-smi underlines the topo header with terminal escape codes even into a file."""
    assert "\x1b[4m" in (H200 / "nvidia-smi_topo_m_1xH200.txt").read_text()
    a = load_artifact(str(H200 / "nvidia-smi_topo_m_1xH200.txt"))
    assert a.context["gpu_count"] == 1 and "gpu_pair_paths" not in a.signals
    assert a.context["cpu_affinity"] == {"gpu0": "0-15"}


def test_dmon_gpm_whole_capture():
    a = load_artifact(str(DMON_GPM))
    assert a.context["samples"] == {"gpu0": 39}
    assert set(a.signals) >= {"gpu_util", "sm_active", "tensor_active", "dram_active", "throttle_reasons"}
    assert a.signals["throttle_reasons"] == {"gpu0": ["sw_power_cap"]}   # 7 of 39 intervals at pviol 100
    assert any("power-capped for 18%" in n for n in a.notes)


def test_dmon_gpm_gemv_is_hbm_bound_with_idle_tensor_cores(tmp_path, kb):
    """Batch-1 GEMV (what decode does): 'GPU util' 99% while tensor pipes are 3% busy and DRAM 88%."""
    a = load_artifact(str(dmon_phase(tmp_path, "17:56:55", "17:57:00")))
    s = {k: v["gpu0"] for k, v in a.signals.items() if k != "throttle_reasons"}
    assert s["gpu_util"] >= 0.97
    assert s["tensor_active"] == pytest.approx(0.03)
    assert s["dram_active"] == pytest.approx(0.88)
    assert a.signals["throttle_reasons"] == {"gpu0": []}
    from perfdoctor.engine.findings import evaluate
    from perfdoctor.symptoms.snapshot import Snapshot
    obs = evaluate(kb, Snapshot(source="h200 dmon", current=a.signals))
    assert obs["tensor_active_low"].present and obs["dram_active_high"].present
    assert not obs["tensor_active_high"].present


def test_dmon_gpm_gemm_is_tensor_bound_and_power_capped(tmp_path):
    a = load_artifact(str(dmon_phase(tmp_path, "17:56:46", "17:56:50")))
    assert a.signals["tensor_active"]["gpu0"] == pytest.approx((93 + 92 + 92 + 87 + 92) / 500)
    assert a.signals["dram_active"]["gpu0"] < 0.2
    assert a.signals["sm_clock_mhz"]["gpu0"] < 1500
    assert a.signals["throttle_reasons"] == {"gpu0": ["sw_power_cap"]}


def test_kineto_real_h200_slow_dataloader():
    """A real trace: 32 samples x 2 ms of CPU work per step, NCCL all_reduce at world size 1 (no NCCL kernels).
    The GPU-row copies of ProfilerStep (gpu_user_annotation) are not steps."""
    a = load_artifact(str(H200 / "kineto_1xH200_slow_dataloader_nccl_rank0.json.gz"))
    assert a.context["steps"] == 3 and a.context["world_size"] == 1 and a.context["gpu"] == "NVIDIA H200"
    assert a.signals["step_time_s"]["rank0"] == pytest.approx((73891.607 + 74293.87 + 76015.747) / 3e6)
    assert a.signals["dataloader_wait_frac"]["rank0"] > 0.9
    assert a.signals["gpu_idle_frac"]["rank0"] > 0.95
    assert a.signals["comm_time_frac"] == {"rank0": 0.0}
    assert any("no NCCL kernels" in n for n in a.notes)


# ---------------------------------------------------------------- a saved /metrics page

def test_metrics_page_vllm_v1_gauges_and_cache_config():
    art = load("vllm_metrics_idle_v1_qwen0.5b_full.txt")
    assert art.signals["requests_running"] == 0 and art.signals["requests_waiting"] == 0
    assert art.signals["kv_cache_usage"] == 0
    assert art.signals["prefix_caching"] is True
    assert art.signals["kv_cache_capacity_tokens"] == 101625 * 16   # num_gpu_blocks x block_size
    assert art.context["engine"] == "vllm"
    assert "ttft_p99_s" not in art.signals   # a lifetime histogram mixes the good and the slow period
    assert any("ttft_p99_s" in n and "--scrape" in n for n in art.notes)


def test_metrics_page_dcgm_names_gpu_driver_and_entities():
    art = load("dcgm-exporter_metrics_L4_idle_full_exposition.txt")
    assert art.context["gpu"] == "NVIDIA L4" and art.context["driver"] == "580.105.08"
    assert art.signals["sm_clock_mhz"] == {"i-030791dc5a37cd257/gpu0": 210}
    assert art.signals["gpu_util"] == {"i-030791dc5a37cd257/gpu0": 0}   # 0-100 in the exporter, 0-1 here
    loaded = load("dcgm-exporter_metrics_A100_MIG_loaded_docs.txt")   # no HELP/TYPE lines
    assert loaded.signals["power_w"]["ub20-a100-k8s/gpu0"] == pytest.approx(409.692)


def test_metrics_page_of_node_exporter_gives_port_rates_and_names_the_counters():
    name = "node_exporter_e2e_cpu_psi_disk_net_infiniband_excerpt.txt"
    assert detect_kind((REAL / name).read_text()) == "metrics_dump"
    art = load(name)
    # node_infiniband_rate_bytes_per_second 1.25e9 and 5e9 bytes/s: 10 and 40 Gb/s
    assert art.signals["ib_port_rate_gbit_per_s"] == {"i40iw0/port1": pytest.approx(10), "mlx4_0/port1": pytest.approx(40),
                                                      "mlx4_0/port2": pytest.approx(40)}
    assert any("host_cpu_util" in n and "scrape twice (--scrape URL)" in n for n in art.notes)


def test_metrics_page_of_node_exporter_reads_available_memory_from_one_page(tmp_path):
    text = (REAL / "node_exporter_e2e_cpu_psi_disk_net_infiniband_excerpt.txt").read_text()
    meminfo = ("# HELP node_memory_MemAvailable_bytes Memory information field MemAvailable_bytes.\n"
               "# TYPE node_memory_MemAvailable_bytes gauge\nnode_memory_MemAvailable_bytes 1.2884901888e+10\n"
               "# HELP node_memory_MemTotal_bytes Memory information field MemTotal_bytes.\n"
               "# TYPE node_memory_MemTotal_bytes gauge\nnode_memory_MemTotal_bytes 2.68435456e+11\n")
    p = tmp_path / "node.txt"
    p.write_text(text + meminfo)
    art = load_artifact(str(p), "metrics_dump")
    assert art.signals["memory_available_frac"] == pytest.approx(12 / 250, abs=1e-3)   # 12 GiB of 250 GiB
    assert any("memory_stall_frac" in n and "scrape twice" in n for n in art.notes)    # PSI is a counter: a rate


def test_metrics_page_of_counters_only_says_to_scrape_twice(tmp_path):
    text = (REAL / "node_exporter_e2e_cpu_psi_disk_net_infiniband_excerpt.txt").read_text()
    counters = "\n".join(line for line in text.splitlines() if "node_infiniband_rate" not in line) + "\n"
    p = tmp_path / "node.txt"
    p.write_text(counters)
    with pytest.raises(InputError, match=r"host_cpu_util.*scrape twice \(--scrape URL\)") as e:
        load_artifact(str(p), "metrics_dump")
    assert_points_at(e.value, p)


def test_metrics_page_cut_mid_histogram_points_at_the_line():
    name = "vllm_metrics_v0_qwen1.5b_old_names_excerpt.txt"
    with pytest.raises(InputError, match="looks truncated") as e:
        load(name, "metrics_dump")
    assert_points_at(e.value, REAL / name)
