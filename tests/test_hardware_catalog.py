"""GPU catalog additions: nvidia-smi names and typed aliases resolve to the right entry, figures stay dense."""
import pytest

from perfdoctor.kb.hardware_schema import load_hardware, match_gpu


@pytest.mark.parametrize("name, gpu_id", [
    ("NVIDIA B300 SXM6 AC", "b300"),
    ("HGX-B300", "b300"),
    ("NVIDIA GB300", "gb300"),
    ("NVIDIA L40", "l40"),
    ("NVIDIA L20", "l20"),
    ("NVIDIA A40", "a40"),
    ("Tesla T4", "t4"),
    ("T4", "t4"),
    ("Tesla V100-SXM2-16GB", "v100_sxm2_16gb"),
    ("Tesla V100-PCIE-16GB", "v100_pcie_16gb"),
    ("Tesla V100-PCIE-32GB", "v100_pcie_32gb"),
    ("V100-PCIe", "v100_pcie_16gb"),
    ("Quadro RTX 8000", "quadro_rtx_8000"),
    ("NVIDIA GeForce RTX 3060", "rtx_3060"),
    ("NVIDIA GeForce RTX 5080", "rtx_5080"),
    ("NVIDIA GeForce RTX 5060 Ti", "rtx_5060_ti_16gb"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "rtx_pro_6000_blackwell_maxq"),
    ("AMD Instinct MI250X", "mi250x"),
    ("AMD Instinct MI325X", "mi325x"),
    ("AMD Instinct MI355X", "mi355x"),
    # ambiguous bare names resolve to the commonest part
    ("A800", "a800_sxm4_80gb"),
    # size-suffixed spellings
    ("RTX-3090-24GB", "rtx_3090"),
    ("RTX-4090-24GB", "rtx_4090"),
    ("L40S-48GB", "l40s"),
    ("MI300X-192GB", "mi300x"),
])
def test_new_gpu_names_resolve(name, gpu_id):
    assert match_gpu(name).id == gpu_id


def test_new_entries_dense_and_consistent():
    hw = load_hardware()
    by_id = {g.id: g for g in hw.gpus}
    assert by_id["b300"].bf16_dense_tflops == 2250 and by_id["b300"].fp8_dense_tflops == 4500
    assert by_id["l40"].bf16_dense_tflops == 181.05                  # datasheet 362.1 is with sparsity
    assert by_id["t4"].bf16_dense_tflops is None and by_id["t4"].tensor_tflops == 65   # Turing: FP16 only
    assert by_id["mi250x"].hbm_gb == 64                              # per GCD, half the 128 GB module
    for g in hw.gpus:
        if g.fp8_dense_tflops and g.tensor_tflops:
            assert g.fp8_dense_tflops >= g.tensor_tflops, g.id
