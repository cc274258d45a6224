"""Hardware ceilings checked against hand computations (written out in the comments), and GPU name matching."""
import json
from pathlib import Path

import pytest

from perfdoctor.engine.ceilings import compute_ceilings, facts_from_config, read_hf_config
from perfdoctor.errors import InputError
from perfdoctor.kb.hardware_schema import HARDWARE_DIR, load_hardware, match_gpu, match_interconnect, match_model

H100 = "NVIDIA H100 80GB HBM3"
GIB = 2**30

# 13B dense MHA (Llama-2-13B shape), fp16.
MODEL_13B = {"params_b": 13, "layers": 40, "hidden_size": 5120, "attention_heads": 40, "head_dim": 128,
             "weight_dtype": "fp16", "kv_dtype": "fp16"}
# 70B GQA (Llama-2-70B shape): 64 query heads share 8 KV heads.
MODEL_70B = {"params_b": 70, "layers": 80, "hidden_size": 8192, "attention_heads": 64, "kv_heads": 8,
             "head_dim": 128, "weight_dtype": "bf16"}


def by_id(ceilings):
    return {c.id: c for c in ceilings}


# ---------------------------------------------------------------- hardware data

def test_hardware_loads_with_sources_and_dense_numbers():
    hw = load_hardware()
    ids = {g.id for g in hw.gpus}
    assert {"a100_sxm4_40gb", "a100_sxm4_80gb", "a100_pcie_80gb", "h100_sxm", "h100_pcie", "h100_nvl", "h200_sxm",
            "h20", "l40s", "l4", "a10", "v100_sxm2_32gb", "b200", "gb200", "mi300x"} <= ids
    for g in hw.gpus:
        assert g.sources and all(s.startswith("https://") for s in g.sources), g.id
        if g.pcie_gb_s:
            assert g.pcie_datasheet_gb_s == 2 * g.pcie_gb_s, g.id   # datasheet figure is bidirectional
    h100 = match_gpu("H100-SXM")
    # The datasheet's 1,979 BF16 / 3,958 FP8 TFLOPS are with sparsity; dense is half.
    assert (h100.hbm_gb, h100.hbm_bw_tb_s, h100.bf16_dense_tflops, h100.fp8_dense_tflops) == (80, 3.35, 989, 1979)
    assert (h100.nvlink_gb_s, h100.pcie_gen, h100.tdp_w) == (900, 5, 700)
    assert (h100.pcie_datasheet_gb_s, h100.pcie_gb_s) == (128, 64)   # bidirectional as printed, per direction
    assert match_gpu("V100-SXM2-32GB").bf16_dense_tflops is None            # Volta: no BF16
    assert match_gpu("V100-SXM2-32GB").tensor_tflops == 125                 # falls back to FP16
    assert {i.id for i in hw.interconnects} >= {"ib_edr", "ib_hdr", "ib_ndr", "ib_ndr200", "roce_100g", "roce_200g",
                                                "roce_400g"}


@pytest.mark.parametrize("name, gpu_id", [
    ("NVIDIA H100 80GB HBM3", "h100_sxm"),
    ("nvidia h100 80gb hbm3", "h100_sxm"),
    ("H100-SXM", "h100_sxm"),
    ("H100", "h100_sxm"),
    ("NVIDIA H100 PCIe", "h100_pcie"),
    ("NVIDIA H100 NVL", "h100_nvl"),
    ("NVIDIA A100-SXM4-80GB", "a100_sxm4_80gb"),
    ("A100-SXM4-80GB", "a100_sxm4_80gb"),                 # older drivers print no "NVIDIA "
    ("a100-80gb", "a100_sxm4_80gb"),
    ("NVIDIA A100-SXM4-40GB", "a100_sxm4_40gb"),
    ("A100-40GB", "a100_sxm4_40gb"),
    ("NVIDIA A100 80GB PCIe", "a100_pcie_80gb"),
    ("NVIDIA A100-PCIE-40GB", "a100_pcie_40gb"),
    ("NVIDIA H200", "h200_sxm"),
    ("NVIDIA H20", "h20"),
    ("NVIDIA L40S", "l40s"),
    ("NVIDIA L4", "l4"),
    ("NVIDIA A10", "a10"),
    ("Tesla V100-SXM2-32GB", "v100_sxm2_32gb"),
    ("v100 sxm2 32gb", "v100_sxm2_32gb"),                  # normalized: no "Tesla", spaces for hyphens
    ("NVIDIA B200", "b200"),
    ("NVIDIA GB200", "gb200"),
    ("AMD Instinct MI300X", "mi300x"),
    ("mi300x", "mi300x"),
    ("NVIDIA B300 SXM6 AC", "b300"),
    ("HGX-B300", "b300"),
    ("NVIDIA GB300", "gb300"),
    ("NVIDIA L40", "l40"),
    ("NVIDIA L20", "l20"),
    ("NVIDIA A40", "a40"),
    ("Tesla T4", "t4"),
    ("Tesla V100-SXM2-16GB", "v100_sxm2_16gb"),
    ("Tesla V100-PCIE-32GB", "v100_pcie_32gb"),
    ("V100-PCIe", "v100_pcie_16gb"),                       # bare PCIe V100: the 16 GB card
    ("Quadro RTX 8000", "quadro_rtx_8000"),
    ("NVIDIA GeForce RTX 3060", "rtx_3060"),
    ("NVIDIA GeForce RTX 5080", "rtx_5080"),
    ("NVIDIA GeForce RTX 5060 Ti", "rtx_5060_ti_16gb"),
    ("NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition", "rtx_pro_6000_blackwell_maxq"),
    ("AMD Instinct MI250X", "mi250x"),
    ("AMD Instinct MI325X", "mi325x"),
    ("AMD Instinct MI355X", "mi355x"),
    ("A800", "a800_sxm4_80gb"),                            # the catalog's only A800
    ("RTX-3090-24GB", "rtx_3090"),                         # size-suffixed spellings
    ("L40S-48GB", "l40s"),
    ("MI300X-192GB", "mi300x"),
])
def test_match_gpu(name, gpu_id):
    assert match_gpu(name).id == gpu_id


def test_catalog_tensor_figures_are_dense():
    by_id = {g.id: g for g in load_hardware().gpus}
    assert by_id["b300"].bf16_dense_tflops == 2250 and by_id["b300"].fp8_dense_tflops == 4500
    assert by_id["l40"].bf16_dense_tflops == 181.05                  # datasheet 362.1 is with sparsity
    assert by_id["t4"].bf16_dense_tflops is None and by_id["t4"].tensor_tflops == 65   # Turing: FP16 only
    assert by_id["mi250x"].hbm_gb == 64                              # per GCD, half the 128 GB module
    for g in by_id.values():
        if g.fp8_dense_tflops and g.tensor_tflops:
            assert g.fp8_dense_tflops >= g.tensor_tflops, g.id


@pytest.mark.parametrize("name", ["XYZ", "", "NVIDIA GeForce GTX 1080 Ti", "A100"])   # bare A100: 40 or 80 GB?
def test_match_gpu_unknown(name):
    assert match_gpu(name) is None


@pytest.mark.parametrize("name, gpu_id", [
    ("GB10 (DGX Spark, 128 GB unified memory)", "gb10"),      # a remark in parentheses, its size agrees
    ("NVIDIA GeForce RTX 5060 Ti 16GB", "rtx_5060_ti_16gb"),  # nvidia-smi name plus the size people add
    ("RTX 3090 (24 GB)", "rtx_3090"),
    ("A100 (40GB)", "a100_sxm4_40gb"),                       # the size in the remark picks the variant
    ("A100 (80GB PCIe)", "a100_pcie_80gb"),
    ("V100 (PCIe, no NVLink)", "v100_pcie_16gb"),            # a form factor in the remark counts, not bare V100
    ("H100 (SXM5)", "h100_sxm"),
    # another card than the catalog's, or not enough to tell which: unknown rather than a wrong spec sheet
    ("NVIDIA GeForce RTX 3090 (48 GB modded)", None),
    ("RTX 3090 48GB", None),
    ("A100 (SXM)", None),
    ("V100 (16GB)", None),
])
def test_match_gpu_with_remarks(name, gpu_id):
    gpu = match_gpu(name)
    assert (gpu.id if gpu else None) == gpu_id


def test_match_interconnect():
    assert match_interconnect("NDR").gb_s == 50          # 400 Gb/s / 8
    assert match_interconnect("IB HDR").gb_s == 25       # 200 Gb/s / 8
    assert match_interconnect("ndr200").gbit_s == 200
    assert match_interconnect("RoCE 400G").kind == "roce"
    assert match_interconnect("token ring") is None


# ---------------------------------------------------------------- 13B MHA on one H100 SXM

def test_13b_mha_on_h100():
    ctx = {"gpu": H100, "model": MODEL_13B}
    sig = {"requests_running": 32, "prompt_tokens_mean": 1000, "output_tokens_mean": 200, "output_tokens_per_s": 1500}
    c, warnings = compute_ceilings(ctx, sig)
    c = by_id(c)
    assert warnings == []
    # weights: 13e9 params * 2 bytes = 26e9 bytes
    assert c["weight_bytes"].value == 26e9
    # KV per token: 2 * 40 layers * 40 kv_heads * 128 head_dim * 2 bytes = 819,200
    assert c["kv_bytes_per_token"].value == 819_200
    # decode: context per sequence = 1000 + 200/2 = 1100 tokens
    #   bytes/step = 26e9 + 32 * 1100 * 819,200 = 26e9 + 28,835,840,000 = 54,835,840,000
    #   step floor = 54,835,840,000 / 3.35e12 B/s = 0.0163689 s
    #   ceiling    = 32 / 0.0163689 = 1954.93 tokens/s; observed 1500 -> 0.767
    d = c["decode_tokens_per_s"]
    assert d.inputs["context_tokens"] == 1100
    assert d.inputs["step_floor_s"] == pytest.approx(54_835_840_000 / 3.35e12)
    assert d.value == pytest.approx(1954.93, abs=0.01)
    assert d.observed == 1500
    assert d.fraction_of_ceiling == pytest.approx(1500 / 1954.93, rel=1e-5)
    assert "3.35 TB/s" in d.formula and "1,955 tokens/s" in d.formula
    # prefill: 989e12 FLOPS / (2 * 13e9) = 38,038.46 tokens/s
    assert c["prefill_tokens_per_s"].value == pytest.approx(38_038.46, abs=0.01)
    # KV capacity: (80 GiB * 0.9 - 26e9) / 819,200 = (77,309,411,328 - 26e9) / 819,200 = 62,633.56 tokens
    #   in use: 32 seqs * 1100 tokens = 35,200 -> 0.562
    k = c["kv_capacity_tokens"]
    assert k.value == pytest.approx(62_633.56, abs=0.01)
    assert k.observed == 35_200
    assert k.fraction_of_ceiling == pytest.approx(35_200 / 62_633.56, rel=1e-6)


# ---------------------------------------------------------------- 70B GQA on 4 x H100 SXM (TP=4)

def test_70b_gqa_tp4_on_h100():
    ctx = {"gpu": "H100-SXM", "tp": 4, "model": MODEL_70B}
    sig = {"requests_running": 64, "prompt_tokens_mean": 2000, "output_tokens_mean": 500, "output_tokens_per_s": 3000}
    c, warnings = compute_ceilings(ctx, sig)
    c = by_id(c)
    assert warnings == []
    # KV per token with GQA counted: 2 * 80 layers * 8 kv_heads * 128 * 2 bytes = 327,680
    assert c["kv_bytes_per_token"].value == 327_680
    # weights: 70e9 * 2 = 140e9 bytes, 35e9 per GPU over TP=4
    assert c["weight_bytes"].value == 140e9
    assert c["weight_bytes"].inputs["weight_bytes_per_gpu"] == 35e9
    # decode: context = 2000 + 500/2 = 2250
    #   bytes/step = 140e9 + 64 * 2250 * 327,680 = 140e9 + 47,185,920,000 = 187,185,920,000
    #   step floor = 187,185,920,000 / (3.35e12 * 4) = 0.0139691 s
    #   ceiling    = 64 / 0.0139691 = 4581.54 tokens/s
    d = c["decode_tokens_per_s"]
    assert d.inputs["step_floor_s"] == pytest.approx(187_185_920_000 / 13.4e12)
    assert d.value == pytest.approx(4581.54, abs=0.01)
    assert d.fraction_of_ceiling == pytest.approx(3000 / 4581.54, rel=1e-5)
    # prefill: 989e12 * 4 / (2 * 70e9) = 28,257.14 tokens/s
    assert c["prefill_tokens_per_s"].value == pytest.approx(28_257.14, abs=0.01)
    # KV capacity: (4 * 80 GiB * 0.9 - 140e9) / 327,680 = (309,237,645,312 - 140e9) / 327,680 = 516,472.3
    assert c["kv_capacity_tokens"].value == pytest.approx(516_472.31, abs=0.01)


def test_70b_does_not_fit_one_gpu():
    # 140e9 bytes of weights > 80 GiB * 0.9 = 77.3e9 usable: no KV capacity, a warning instead
    c, warnings = compute_ceilings({"gpu": H100, "model": MODEL_70B},
                                   {"requests_running": 1, "prompt_tokens_mean": 10, "output_tokens_mean": 10})
    assert "kv_capacity_tokens" not in by_id(c)
    assert any(w.startswith("kv_capacity_tokens skipped: weights 140 GB exceed usable memory") for w in warnings)


def test_the_reported_kv_pool_replaces_the_estimate():
    """A pool the engine reports at start-up wins over the HBM estimate (which cannot see a hybrid model's state
    pages or another tenant's memory) and needs neither the GPU nor the model: 32 seqs * (1000 + 200/2) tokens
    = 35,200 tokens in a reported 40,000-token pool is 0.88 of it, against 0.56 of the 62,634 the 13B on an
    H100 would leave."""
    sig = {"requests_running": 32, "prompt_tokens_mean": 1000, "output_tokens_mean": 200, "kv_cache_capacity_tokens": 40_000}
    for ctx in ({"gpu": H100, "model": MODEL_13B}, {}):
        c, _ = compute_ceilings(ctx, sig)
        k = [x for x in c if x.id == "kv_capacity_tokens"]
        assert len(k) == 1 and k[0].value == 40_000 and k[0].observed == 35_200
        assert k[0].fraction_of_ceiling == pytest.approx(0.88)
        assert "start-up report" in k[0].formula


def test_scalars_are_per_replica_and_mappings_averaged():
    """A scalar serving signal is what one engine's /metrics shows; a {replica: value} mapping is averaged."""
    ctx = {"gpu": H100, "model": MODEL_13B, "replicas": 2}
    scalar = {"requests_running": 32, "prompt_tokens_mean": 1000, "output_tokens_mean": 200,
              "output_tokens_per_s": 1500}
    per_replica = {"requests_running": {"r0": 30, "r1": 34}, "prompt_tokens_mean": 1000, "output_tokens_mean": 200,
                   "output_tokens_per_s": {"r0": 1400, "r1": 1600}}
    a = by_id(compute_ceilings(ctx, scalar)[0])["decode_tokens_per_s"]
    b = by_id(compute_ceilings(ctx, per_replica)[0])["decode_tokens_per_s"]
    # both read as 32 running requests and 1500 tokens/s per replica: the 13B numbers above
    assert a.inputs["batch"] == b.inputs["batch"] == 32
    assert a.observed == b.observed == 1500
    assert a.value == pytest.approx(1954.93, abs=0.01)


# ---------------------------------------------------------------- training and all-reduce

def test_training_step_floor_and_mfu():
    ctx = {"gpu": H100, "model": MODEL_70B, "gpus": 64, "global_batch_size": 512, "seq_len": 4096}
    c, _ = compute_ceilings(ctx, {"step_time_s": {"0": 19.5, "1": 20.0}})
    t = by_id(c)["train_step_time_floor_s"]
    # tokens/step = 512 * 4096 = 2,097,152
    # floor = 6 * 70e9 * 2,097,152 / (64 * 989e12) = 8.80804e17 / 6.3296e16 = 13.9156 s
    # observed = slowest rank, 20 s -> MFU 0.6958
    assert t.inputs["tokens_per_step"] == 2_097_152
    assert t.value == pytest.approx(13.9156, abs=1e-4)
    assert t.observed == 20.0
    assert t.fraction_of_ceiling == pytest.approx(13.9156 / 20, abs=1e-5)


def test_allreduce_over_nvlink_in_one_node():
    ctx = {"gpu": H100, "model": MODEL_13B, "gpus": 8, "allreduce": {}}
    c = by_id(compute_ceilings(ctx, {"nccl_busbw_gb_per_s": 360})[0])
    # message = bf16 gradients of 13e9 params = 26e9 bytes; link = 900 GB/s bidirectional / 2 = 450 GB/s
    # floor = 2 * 7/8 * 26e9 / 450e9 = 1.75 * 0.057778 = 0.101111 s
    assert c["allreduce_time_floor_s"].value == pytest.approx(0.101111, abs=1e-6)
    # busbw 360 of 450 GB/s -> 0.8
    assert c["allreduce_busbw_gb_s"].value == 450
    assert c["allreduce_busbw_gb_s"].fraction_of_ceiling == pytest.approx(0.8)


def test_allreduce_across_nodes_uses_the_scale_out_link():
    ctx = {"gpu": H100, "gpus": 16, "interconnect": "NDR", "allreduce": {"message_bytes": 26e9}}
    c = by_id(compute_ceilings(ctx, {"nccl_busbw_gb_per_s": 40, "step_time_s": 10, "comm_time_frac": 0.2})[0])
    # 16 ranks > 8 per node: NDR 400 Gb/s = 50 GB/s per direction
    # floor = 2 * 15/16 * 26e9 / 50e9 = 1.875 * 0.52 = 0.975 s; observed comm 10 s * 0.2 = 2 s -> 0.4875
    f = c["allreduce_time_floor_s"]
    assert f.value == pytest.approx(0.975)
    assert f.observed == pytest.approx(2.0)
    assert f.fraction_of_ceiling == pytest.approx(0.4875)
    assert c["allreduce_busbw_gb_s"].fraction_of_ceiling == pytest.approx(40 / 50)


# ---------------------------------------------------------------- Hugging Face config.json

LLAMA2_13B = {"architectures": ["LlamaForCausalLM"], "hidden_size": 5120, "intermediate_size": 13824,
              "num_attention_heads": 40, "num_hidden_layers": 40, "num_key_value_heads": 40,
              "vocab_size": 32000, "tie_word_embeddings": False, "torch_dtype": "float16"}
LLAMA2_70B = {**LLAMA2_13B, "hidden_size": 8192, "intermediate_size": 28672, "num_attention_heads": 64,
              "num_hidden_layers": 80, "num_key_value_heads": 8, "torch_dtype": "bfloat16"}


def test_hf_config_13b(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA2_13B))
    c, warnings = compute_ceilings({"gpu": H100, "model_config": "config.json"}, base_dir=tmp_path)
    c = by_id(c)
    assert warnings == []
    # per layer: attention 4 * 5120 * 5120 = 104,857,600 (MHA) + MLP 3 * 5120 * 13824 = 212,336,640
    # 40 layers * 317,194,240 + embeddings 2 * 32000 * 5120 = 12,687,769,600 + 327,680,000 = 13,015,449,600
    # (Llama-2-13B has 13,015,864,320: the 414,720 norm weights are left out)
    assert c["weight_bytes"].inputs["params_b"] == pytest.approx(13.0154496)
    assert c["kv_bytes_per_token"].value == 819_200   # head_dim = 5120 / 40 = 128


def test_hf_config_70b_gqa(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(LLAMA2_70B))
    facts, notes = read_hf_config(str(tmp_path / "config.json"))
    # attention 8192*64*128*2 + 8192*8*128*2 = 150,994,944; MLP 3*8192*28672 = 704,643,072
    # 80 * 855,638,016 + 2 * 32000 * 8192 = 68,451,041,280 + 524,288,000 = 68,975,329,280
    assert facts["params_b"] == pytest.approx(68.97532928)
    assert (facts["kv_heads"], facts["weight_dtype"]) == (8, "bfloat16")
    c, _ = compute_ceilings({"gpu": H100, "model_config": str(tmp_path / "config.json")})
    assert by_id(c)["kv_bytes_per_token"].value == 327_680


CONFIGS = Path(__file__).parent / "fixtures" / "model_configs"


@pytest.mark.parametrize("name, total_b, active_b", [
    ("mixtral-8x7b-v0.1.json", 46.7, 12.9),   # Mistral's announcement: 46.7B total, 12.9B per token
    ("qwen3-30b-a3b.json", 30.5, 3.3),         # the Qwen3 model card: 30.5B total, 3.3B activated
    ("deepseek-v3.json", 671, 37),             # DeepSeek-V3 report: 671B total, 37B activated (MTP module apart)
    ("gpt-oss-120b.json", 116.8, 5.13 + 0.58), # model card: 116.8B total, 5.13B active without the 0.58B input embedding
])
def test_hf_moe_configs_count_total_and_active_params(name, total_b, active_b):
    facts, notes = read_hf_config(str(CONFIGS / name))
    assert notes == []
    assert facts["params_b"] == pytest.approx(total_b, rel=0.02)   # published figures are rounded
    assert facts["active_params_b"] == pytest.approx(active_b, rel=0.02)


@pytest.mark.parametrize("extra, windowed", [
    ({}, 18),                                                          # gpt_oss: local and global alternate
    ({"layer_types": ["sliding_attention", "full_attention", "full_attention"] * 12}, 12),   # layer_types win
    ({"model_type": "mistral"}, 36),                                   # a window and no pattern: every layer
    ({"sliding_window_pattern": 6}, 30),                               # Gemma 3: every 6th layer is global
    ({"use_sliding_window": False}, None),                             # Qwen2 sets a window it does not use
    ({"sliding_window": None}, None),
])
def test_sliding_window_layers_from_config(extra, windowed):
    cfg = {**json.loads((CONFIGS / "gpt-oss-120b.json").read_text()), **extra}   # 36 layers, 128-token window
    facts, _ = facts_from_config(cfg, "config.json")
    assert facts.get("window_layers") == windowed


def test_sliding_window_layers_cache_less_past_the_window():
    """gpt-oss-120b: 18 of 36 layers keep 128 tokens, so an 8k-token decode reads about half the full KV, while
    the capacity in tokens depends on sequence length and is left to the engine's own report."""
    load = {"requests_running": 8, "prompt_tokens_mean": 8000, "output_tokens_mean": 384, "output_tokens_per_s": 400}
    c, warnings = compute_ceilings({"gpu": H100, "model_config": str(CONFIGS / "gpt-oss-120b.json")}, load)
    full = 2 * 36 * 8 * 64 * 2                                         # K and V, 36 layers, 8 kv heads, head_dim 64
    assert by_id(c)["kv_bytes_per_token"].value == full
    at_8k = by_id(c)["decode_tokens_per_s"].inputs["kv_bytes_per_token"]
    assert at_8k == pytest.approx(full * (18 + 18 * 128 / 8192) / 36)
    assert "kv_capacity_tokens" not in by_id(c)
    assert any(w.startswith("kv_capacity_tokens skipped: 18 of 36 layers keep only the last 128 tokens") for w in warnings)
    short = {**load, "prompt_tokens_mean": 64, "output_tokens_mean": 64}   # inside the window every layer counts
    assert by_id(compute_ceilings({"gpu": H100, "model_config": str(CONFIGS / "gpt-oss-120b.json")}, short)[0])[
        "decode_tokens_per_s"].inputs["kv_bytes_per_token"] == full
    reported = {**load, "kv_cache_capacity_tokens": 500_000}           # the engine's own figure is used as given
    assert by_id(compute_ceilings({"gpu": H100, "model_config": str(CONFIGS / "gpt-oss-120b.json")}, reported)[0])[
        "kv_capacity_tokens"].value == 500_000


def test_mla_kv_cache_is_the_latent_not_per_head_keys_and_values():
    facts, _ = read_hf_config(str(CONFIGS / "deepseek-v3.json"))
    assert facts["kv_latent_dim"] == 576   # kv_lora_rank 512 + qk_rope_head_dim 64
    c = by_id(compute_ceilings({"gpu": H100, "model_config": str(CONFIGS / "deepseek-v3.json")})[0])
    # 61 layers * 576 * 2 bytes (bf16 KV cache): 70,272 bytes/token; per-head K and V would be 128 x larger
    assert c["kv_bytes_per_token"].value == 61 * 576 * 2
    assert c["weight_bytes"].inputs["weight_bytes_per_param"] == 1   # fp8 checkpoint


def test_moe_decode_reads_the_experts_a_batch_touches():
    ctx = {"gpu": H100, "model_config": str(CONFIGS / "mixtral-8x7b-v0.1.json"), "tp": 2}
    one = by_id(compute_ceilings(ctx, {"requests_running": 1, "prompt_tokens_mean": 100, "output_tokens_mean": 0})[0])
    # one token reads its 2 of 8 experts: the active weights, 12.88e9 * 2 bytes
    assert one["decode_tokens_per_s"].inputs["weight_bytes_read"] == pytest.approx(12.88e9 * 2, rel=0.001)
    big = by_id(compute_ceilings(ctx, {"requests_running": 64, "prompt_tokens_mean": 100, "output_tokens_mean": 0})[0])
    # 64 tokens leave an expert unread with probability (6/8)^64 ~ 1e-8: every weight is read
    assert big["decode_tokens_per_s"].inputs["weight_bytes_read"] == pytest.approx(46.70e9 * 2, rel=0.001)
    assert "experts touched by 64 tokens" in big["decode_tokens_per_s"].formula


def test_moe_decode_from_given_totals():
    # DeepSeek-V3 in fp8 on 8 GPUs at batch 64: 1 - (248/256)^64 = 87% of the experts are read each step
    model = {"params_b": 671, "active_params_b": 37, "experts": 256, "experts_per_token": 8, "weight_dtype": "fp8",
             "layers": 61, "kv_latent_dim": 576}
    sig = {"requests_running": 64, "prompt_tokens_mean": 1000, "output_tokens_mean": 0}
    c = by_id(compute_ceilings({"gpu": H100, "model": model, "tp": 8}, sig)[0])
    routed = (671 - 37) / (1 - 8 / 256)
    touched = 1 - (1 - 8 / 256) ** 64
    expected = (37 + routed * (touched - 8 / 256)) * 1e9
    assert c["decode_tokens_per_s"].inputs["weight_bytes_read"] == pytest.approx(expected)
    assert 580e9 < expected < 590e9   # against 37e9 for the active weights alone


def test_moe_without_expert_counts_is_the_active_only_bound(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({**LLAMA2_13B, "num_local_experts": 8}))
    ctx = {"gpu": H100, "model_config": str(tmp_path / "config.json")}
    c, warnings = compute_ceilings(ctx, {"requests_running": 8, "prompt_tokens_mean": 100, "output_tokens_mean": 100})
    assert "weight_bytes" not in by_id(c)
    assert any("mixture-of-experts config without num_experts_per_tok" in w for w in warnings)
    # given explicitly without the expert counts, decode reads only the active weights (a loose bound)
    ctx["model"] = {"params_b": 47, "active_params_b": 13}
    c, _ = compute_ceilings(ctx, {"requests_running": 8, "prompt_tokens_mean": 100, "output_tokens_mean": 100})
    assert by_id(c)["decode_tokens_per_s"].inputs["weight_bytes_read"] == 26e9
    assert "active weights only, a loose bound" in by_id(c)["decode_tokens_per_s"].formula
    assert by_id(c)["prefill_tokens_per_s"].inputs["active_params_b"] == 13


# ---------------------------------------------------------------- skips and bad input

def test_unknown_gpu_warns_and_skips_what_needs_specs():
    sig = {"requests_running": 32, "prompt_tokens_mean": 1000, "output_tokens_mean": 200}
    c, warnings = compute_ceilings({"gpu": "XYZ", "model": MODEL_13B}, sig)
    assert "unknown GPU 'XYZ': ceilings that need its specs are skipped" in warnings
    assert set(by_id(c)) == {"weight_bytes", "kv_bytes_per_token"}   # these need no GPU


def test_ambiguous_gpu_name_lists_the_boards_it_could_be():
    _, warnings = compute_ceilings({"gpu": "A100", "model": MODEL_13B}, {})
    (warning,) = [w for w in warnings if w.startswith("unknown GPU 'A100'")]
    for title in ("A100 40GB SXM4", "A100 80GB SXM4", "A100 80GB PCIe", "A100 40GB PCIe"):
        assert title in warning
    assert warning.endswith("give the name nvidia-smi prints")


def test_missing_inputs_are_named():
    c, warnings = compute_ceilings({"gpu": H100, "model": {"params_b": 13}}, {"requests_running": 4})
    assert "kv_bytes_per_token skipped: missing model layers, model kv_heads, model head_dim" in warnings
    decode = "decode_tokens_per_s skipped: missing prompt_tokens_mean, output_tokens_mean"
    assert any(w.startswith(decode) for w in warnings)
    assert "weight_dtype not given: 2 bytes/param (bf16/fp16) assumed" in warnings
    assert {"weight_bytes", "prefill_tokens_per_s"} <= set(by_id(c))
    _, warnings = compute_ceilings({"gpu": H100})
    assert any(w.startswith("no model in context") for w in warnings)


def test_model_params_b_shortcut_and_no_gpu():
    c, warnings = compute_ceilings({"model_params_b": 7})
    assert by_id(c)["weight_bytes"].value == 14e9
    assert "no context.gpu: ceilings that need GPU specs are skipped" in warnings


@pytest.mark.parametrize("ctx, key", [
    ({"gpu": H100, "model": {"layers": "forty"}}, "model.layers"),
    ({"gpu": H100, "model": {"param_b": 13}}, "model.param_b"),
    ({"gpu": H100, "model": {"params_b": 13, "weight_dtype": "fp12"}}, "model.weight_dtype"),
    ({"gpu": H100, "model": MODEL_13B, "tp": 0}, "tp"),
])
def test_bad_context_is_an_input_error(ctx, key):
    with pytest.raises(InputError) as err:
        compute_ceilings(ctx)
    assert err.value.key == key


def test_missing_model_config_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="no such file") as err:
        compute_ceilings({"model_config": str(tmp_path / "nope.json")})
    assert err.value.key == "context.model_config"


# ---------------------------------------------------------------- the model catalog (kb/hardware/models.yaml)

@pytest.mark.parametrize("shape", load_hardware().models, ids=lambda m: m.id)
def test_catalog_configs_reproduce_the_published_parameter_counts(shape):
    facts, notes = facts_from_config(shape.config, shape.id)
    assert notes == []
    assert facts["params_b"] == pytest.approx(shape.published["total"], rel=0.03)
    if "active" in shape.published:
        assert facts["active_params_b"] == pytest.approx(shape.published["active"], rel=0.03)
    assert shape.sources[0].endswith("/config.json")


def test_a_catalog_entry_agrees_with_the_config_file_it_was_read_from():
    by_name = by_id(compute_ceilings({"gpu": H100, "model": "mistralai/Mixtral-8x7B-Instruct-v0.1"})[0])
    by_file = by_id(compute_ceilings({"gpu": H100, "model_config": str(CONFIGS / "mixtral-8x7b-v0.1.json")})[0])
    assert {k: c.value for k, c in by_name.items()} == {k: c.value for k, c in by_file.items()}


@pytest.mark.parametrize("name, model_id, dtype", [
    ("meta-llama/Llama-3.1-8B-Instruct", "llama_3_8b", None),
    ("llama3.1:8b", "llama_3_8b", None),                       # ollama tag
    ("Meta-Llama-3-8B-Instruct", "llama_3_8b", None),
    ("Qwen/Qwen2.5-7B-Instruct-AWQ", "qwen2_5_7b", "int4"),    # a quantized repack keeps the shape
    ("Qwen2.5-7B-Instruct-GPTQ-Int4", "qwen2_5_7b", "int4"),
    ("nvidia/Llama-3.3-70B-Instruct-FP8", "llama_3_70b", "fp8"),
    ("bartowski/Meta-Llama-3.1-8B-Instruct-GGUF-Q8_0", "llama_3_8b", "int8"),
    ("gpt-oss:20b", "gpt_oss_20b", None),
    ("deepseek-ai/DeepSeek-R1", "deepseek_v3", None),
    ("Qwen3-30B-A3B", "qwen3_30b_a3b", None),
    ("Llama-3.3-70B-Instruct (4-bit)", "llama_3_70b", "int4"),   # a remark in parentheses gives the format
    ("llama3:70b (Q4, 41 GB)", "llama_3_70b", "int4"),
    ("Qwen3-30B-A3B (FP8)", "qwen3_30b_a3b", "fp8"),
    ("Qwen/Qwen3-8B (bf16)", "qwen3_8b", None),                  # the default format names no quantization
])
def test_match_model(name, model_id, dtype):
    shape, tag = match_model(name)
    assert (shape.id, tag) == (model_id, dtype)


@pytest.mark.parametrize("name", ["Qwen3-8B-Omni", "llama-7b", "Llama-3.1-8", "resnet50", ""])
def test_match_model_unknown(name):
    assert match_model(name)[0] is None


def test_a_named_model_gets_the_ceilings_and_says_where_its_shape_came_from():
    sig = {"requests_running": 32, "prompt_tokens_mean": 1000, "output_tokens_mean": 200, "output_tokens_per_s": 1500}
    c, warnings = compute_ceilings({"gpu": H100, "model": "meta-llama/Llama-3.1-8B-Instruct"}, sig)
    c = by_id(c)
    # 32 layers * 8 KV heads * 128 head_dim * 2 (K and V) * 2 bytes
    assert c["kv_bytes_per_token"].value == 131_072
    assert c["weight_bytes"].value == pytest.approx(8.03e9 * 2, rel=0.001)
    assert c["decode_tokens_per_s"].observed == 1500
    assert any("shape of Llama 3 / 3.1 8B from kb/hardware/models.yaml" in w for w in warnings)


def test_a_quantization_tag_sets_the_weight_format_unless_the_context_gives_one():
    fp8 = by_id(compute_ceilings({"model": "nvidia/Llama-3.3-70B-Instruct-FP8"})[0])
    assert fp8["weight_bytes"].inputs["weight_bytes_per_param"] == 1
    given = by_id(compute_ceilings({"model": {"name": "nvidia/Llama-3.3-70B-Instruct-FP8", "weight_dtype": "bf16"}})[0])
    assert given["weight_bytes"].inputs["weight_bytes_per_param"] == 2


def test_an_unknown_model_name_says_how_to_give_the_shape():
    c, warnings = compute_ceilings({"gpu": H100, "model": "Qwen3.8-27B"}, {"requests_running": 4})
    assert c == []
    assert any(w.startswith("model 'Qwen3.8-27B' is not in kb/hardware/models.yaml") for w in warnings)
    assert not any(w.startswith("no model in context") for w in warnings)


def test_a_catalog_name_claimed_twice_is_an_input_error(tmp_path):
    for f in ("gpus.yaml", "interconnects.yaml"):
        (tmp_path / f).write_text((HARDWARE_DIR / f).read_text())
    entry = ("- id: {id}\n  title: T\n  names: [org/Llama-3.1-8B]\n  config: {{num_hidden_layers: 2, hidden_size: 8, "
             "num_attention_heads: 2, vocab_size: 10, intermediate_size: 8}}\n  published: {{total: 1}}\n"
             "  sources: [https://example.org/config.json]\n")
    (tmp_path / "models.yaml").write_text(entry.format(id="a") + entry.format(id="b"))
    with pytest.raises(InputError, match="also matches 'a'") as err:
        load_hardware(tmp_path)
    assert err.value.key == "b"
