"""Hardware ceilings: the best this GPU could do for this model and load.

A ceiling turns "throughput is low" into either "already near the limit" (fraction_of_ceiling close to 1:
only more or faster hardware, or less work, helps) or "something is wrong" (far below it). Every ceiling
comes from vendor peak specs, so it is an upper bound on throughput (a lower bound on time); real kernels
reach perhaps 60-90 % of memory bandwidth and 40-70 % of tensor peak.

fraction_of_ceiling is always "how close to the limit": observed/ceiling for rates and capacities,
floor/observed for time floors (for the training step that is MFU).

Inputs. context: gpu, model {params_b, active_params_b, experts, experts_per_token, layers, hidden_size,
attention_heads, kv_heads, head_dim, kv_latent_dim, window_layers, window_tokens, weight_dtype, kv_dtype} or
model_params_b or model_config (a Hugging Face config.json: dense, Mixtral / Qwen-MoE / DeepSeek / gpt-oss
mixture-of-experts, MLA attention, sliding-window layers as in Mistral 7B v0.1, Gemma 2 and 3, gpt-oss),
tp, pp, gpus_per_replica, replicas, gpu_memory_utilization, gpus, tokens_per_step or global_batch_size and
seq_len, interconnect, gpus_per_node, allreduce {n, message_bytes, link, link_gb_s}.
signals: {signal_id: number or {entity: number}}. A plain number for a serving signal is read as one
replica's value (what one engine's /metrics shows); a {replica: value} mapping is averaged.
"""
from dataclasses import dataclass, field
from pathlib import Path

from perfdoctor.errors import InputError
from perfdoctor.kb.hardware_schema import (GpuSpec, Hardware, gpus_named_like, load_hardware, match_gpu,
                                           match_interconnect, match_model)
from perfdoctor.yamlio import load_file

DTYPE_BYTES = {
    "float32": 4, "fp32": 4, "float": 4,
    "bfloat16": 2, "bf16": 2, "float16": 2, "fp16": 2, "half": 2,
    "fp8": 1, "float8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "fp8_e4m3": 1, "fp8_e5m2": 1, "int8": 1,
    "int4": 0.5, "fp4": 0.5, "nvfp4": 0.5, "mxfp4": 0.5,
}
MODEL_KEYS = ("name", "params_b", "active_params_b", "experts", "experts_per_token", "layers", "hidden_size",
              "attention_heads", "kv_heads", "head_dim", "kv_latent_dim", "window_layers", "window_tokens",
              "weight_dtype", "kv_dtype")
EXPERT_COUNT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")   # Mixtral/gpt-oss, Qwen, DeepSeek
EXPERTS_PER_TOKEN_KEYS = ("num_experts_per_tok", "experts_per_token")


@dataclass
class Ceiling:
    """One limit, with the formula and inputs that produced it and, when known, the observed value."""
    id: str
    title: str
    value: float
    unit: str
    formula: str
    inputs: dict
    observed: float | None = None
    fraction_of_ceiling: float | None = None


@dataclass
class ModelFacts:
    """What the ceilings need to know about the model; None where it was not given."""
    params_b: float | None = None
    active_params_b: float | None = None
    experts: float | None = None             # routed experts per MoE layer
    experts_per_token: float | None = None   # routed experts each token goes through (top-k)
    layers: float | None = None
    hidden_size: float | None = None
    attention_heads: float | None = None
    kv_heads: float | None = None
    head_dim: float | None = None
    kv_latent_dim: float | None = None       # MLA: compressed KV plus decoupled RoPE key, cached per token and layer
    window_layers: float | None = None       # layers that attend to (and cache) only the last window_tokens tokens
    window_tokens: float | None = None
    weight_bytes_per_param: float = 2
    kv_bytes_per_elem: float = 2
    notes: list[str] = field(default_factory=list)

    @property
    def is_moe(self) -> bool:
        return self.active_params_b is not None and self.params_b is not None and self.active_params_b < self.params_b

    @property
    def active_b(self) -> float | None:
        return self.active_params_b or self.params_b

    @property
    def weight_bytes(self) -> float | None:
        return self.params_b * 1e9 * self.weight_bytes_per_param if self.params_b else None

    @property
    def routed_params_b(self) -> float | None:
        """All routed-expert parameters: total - active = routed * (1 - k/E)."""
        if not self.is_moe or not self.experts or not self.experts_per_token \
                or self.experts_per_token >= self.experts:
            return None
        return (self.params_b - self.active_params_b) / (1 - self.experts_per_token / self.experts)

    @property
    def kv_bytes_per_token(self) -> float | None:
        if self.layers is not None and self.kv_latent_dim is not None:
            return self.layers * self.kv_latent_dim * self.kv_bytes_per_elem
        if None in (self.layers, self.kv_heads, self.head_dim):
            return None
        return 2 * self.layers * self.kv_heads * self.head_dim * self.kv_bytes_per_elem

    @property
    def has_window(self) -> bool:
        return bool(self.window_layers and self.window_tokens and self.layers)

    def kv_bytes_at(self, ctx: float) -> float | None:
        """KV bytes per token of a sequence ctx tokens long: a sliding-window layer caches at most window_tokens,
        so past the window its share of the cache stops growing (kv_bytes_per_token is the cost of every layer)."""
        full = self.kv_bytes_per_token
        if full is None or not self.has_window or ctx <= self.window_tokens:
            return full
        kept = self.layers - self.window_layers + self.window_layers * self.window_tokens / ctx
        return full * kept / self.layers


# ---------------------------------------------------------------- small helpers

def _f(x: float) -> str:
    """A number as a person reads it: 1,955 or 0.01637."""
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.4g}"


def _gb(nbytes: float) -> str:
    return f"{nbytes / 1e9:.4g} GB"


def _pos(value, key: str, where: str = "context") -> float:
    """A positive number, or an InputError naming the key."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise InputError(where, key, f"must be a positive number, got {value!r}")
    return float(value)


def _opt(mapping: dict, key: str, where: str = "context", prefix: str = "") -> float | None:
    value = mapping.get(key)
    return None if value is None else _pos(value, prefix + key, where)


def _dtype_bytes(name, key: str) -> float | None:
    if name is None or str(name).lower() == "auto":
        return None
    try:
        return DTYPE_BYTES[str(name).lower()]
    except KeyError:
        raise InputError("context", key, f"unknown dtype {name!r}; known: {', '.join(DTYPE_BYTES)}") from None


def _signal(signals: dict, key: str, how: str = "mean") -> float | None:
    """A signal as one number: a scalar as given (per replica for serving signals), a mapping averaged over
    its entities, or with how='max' / 'min' the largest (the slowest rank) / the smallest."""
    value = signals.get(key)
    if value is None:
        return None
    if isinstance(value, dict):
        nums = [_pos_or_zero(v, key) for v in value.values()]
        if not nums:
            return None
        return max(nums) if how == "max" else min(nums) if how == "min" else sum(nums) / len(nums)
    return _pos_or_zero(value, key)


def _pos_or_zero(value, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise InputError("signals", key, f"must be a number >= 0, got {value!r}")
    return float(value)


def _skip(warnings: list, ceiling_id: str, needs: dict) -> bool:
    """Record a warning and return True when any needed input is None."""
    missing = [k for k, v in needs.items() if v is None]
    if missing:
        warnings.append(f"{ceiling_id} skipped: missing {', '.join(missing)}")
    return bool(missing)


def _fraction(observed: float | None, ceiling: float) -> float | None:
    return None if observed is None or ceiling <= 0 else observed / ceiling


# ---------------------------------------------------------------- model facts

def read_hf_config(path: str, base_dir: Path | None = None) -> tuple[dict, list[str]]:
    """Model facts from a Hugging Face config.json, and notes on what could not be read."""
    p = Path(path)
    if not p.is_absolute() and base_dir is not None:
        p = Path(base_dir) / p
    if not p.is_file():
        raise InputError(str(path), "context.model_config", "no such file: give the path of a Hugging Face config.json")
    cfg = load_file(p, shown=str(path))
    if not isinstance(cfg, dict):
        raise InputError(str(path), "", "expected a JSON object")
    return facts_from_config(cfg, str(path))


def facts_from_config(cfg: dict, shown: str) -> tuple[dict, list[str]]:
    """Model facts from the fields of a Hugging Face config.json, and notes (prefixed by `shown`) on what
    could not be read."""
    if "num_hidden_layers" not in cfg and isinstance(cfg.get("text_config"), dict):
        cfg = {**cfg["text_config"], "torch_dtype": cfg.get("torch_dtype", cfg["text_config"].get("torch_dtype"))}
    first = lambda *keys: next((cfg[k] for k in keys if cfg.get(k) is not None), None)  # noqa: E731
    facts = {
        "layers": first("num_hidden_layers", "n_layer", "num_layers"),
        "hidden_size": first("hidden_size", "n_embd", "d_model"),
        "attention_heads": first("num_attention_heads", "n_head"),
        "kv_heads": first("num_key_value_heads") or (1 if cfg.get("multi_query") else None),
        "head_dim": first("head_dim"),
        "weight_dtype": _config_weight_dtype(cfg),
    }
    notes = []
    facts.update(_sliding_window(cfg, facts["layers"]))
    if cfg.get("kv_lora_rank"):   # MLA caches one latent vector and one RoPE key per token and layer
        facts.update(kv_heads=None, head_dim=None,
                     kv_latent_dim=cfg["kv_lora_rank"] + (cfg.get("qk_rope_head_dim") or 0))
    count, note = _params_from_config(cfg)
    if count:
        facts.update(count)
    if note:
        notes.append(f"{shown}: {note}")
    return {k: v for k, v in facts.items() if v is not None}, notes


def _config_weight_dtype(cfg: dict) -> str | None:
    quant = cfg.get("quantization_config") or {}
    bits = quant.get("bits") or quant.get("w_bit")
    if bits in (4, 8):
        return {4: "int4", 8: "int8"}[bits]
    method = str(quant.get("quant_method", "")).lower()
    if "fp8" in method:
        return "fp8"
    if "mxfp4" in method:   # gpt-oss: the experts, nearly all the bytes; attention and embeddings stay 16-bit
        return "mxfp4"
    return cfg.get("torch_dtype") or cfg.get("dtype")


def _attention_params(cfg: dict) -> int:
    """Attention projections of one layer: standard (q, k, v, o) or DeepSeek's multi-head latent attention."""
    h, heads = cfg["hidden_size"], cfg["num_attention_heads"]
    if cfg.get("kv_lora_rank"):   # arXiv:2405.04434, section 2.1
        rope, nope = cfg.get("qk_rope_head_dim") or 0, cfg.get("qk_nope_head_dim") or 0
        v_dim, kv_rank, q_rank = cfg.get("v_head_dim") or nope, cfg["kv_lora_rank"], cfg.get("q_lora_rank")
        q = h * q_rank + q_rank * heads * (nope + rope) if q_rank else h * heads * (nope + rope)
        return q + h * (kv_rank + rope) + kv_rank * heads * (nope + v_dim) + heads * v_dim * h
    kv_heads = cfg.get("num_key_value_heads") or heads
    head_dim = cfg.get("head_dim") or h // heads
    return h * heads * head_dim * 2 + h * kv_heads * head_dim * 2   # q and o, k and v


# Every Nth layer attends to the whole sequence, the rest to a sliding window, where a config names no layer_types:
# transformers' defaults for Gemma 2 (local and global alternate, arXiv:2408.00118), gpt-oss (alternating) and
# Gemma 3 (sliding_window_pattern 6).
GLOBAL_EVERY = {"gemma2": 2, "gpt_oss": 2, "gemma3": 6, "gemma3_text": 6}


def _sliding_window(cfg: dict, layers) -> dict:
    """How many layers attend to a sliding window, and its length: from layer_types (newer configs),
    sliding_window_pattern, Qwen2's max_window_layers, the model type's default pattern, or else a window on every
    layer (Mistral 7B v0.1). {} where the config sets no window or switches it off (Qwen2: use_sliding_window false)."""
    window = cfg.get("sliding_window")
    if not window or not layers or cfg.get("use_sliding_window") is False:
        return {}
    every = cfg.get("sliding_window_pattern") or GLOBAL_EVERY.get(cfg.get("model_type"))
    if cfg.get("layer_types"):
        windowed = sum(t == "sliding_attention" for t in cfg["layer_types"])
    elif cfg.get("use_sliding_window") and cfg.get("max_window_layers") is not None:   # Qwen2: layers from there on
        windowed = max(0, layers - cfg["max_window_layers"])
    elif every:
        windowed = layers - layers // every
    else:
        windowed = layers
    return {"window_layers": windowed, "window_tokens": window} if windowed else {}


def _is_moe_layer(cfg: dict, i: int) -> bool:
    """Which decoder layers carry experts: DeepSeek's first dense layers and stride, Qwen's sparse step."""
    if i < (cfg.get("first_k_dense_replace") or 0) or i in (cfg.get("mlp_only_layers") or []):
        return False
    if cfg.get("moe_layer_freq"):
        return i % cfg["moe_layer_freq"] == 0
    return (i + 1) % (cfg.get("decoder_sparse_step") or 1) == 0


def _params_from_config(cfg: dict) -> tuple[dict | None, str | None]:
    """Parameter counts of a decoder with gated MLPs (Llama-style, or mixture-of-experts as in Mixtral,
    Qwen-MoE, DeepSeek-V2/V3 and gpt-oss): {params_b} or {params_b, active_params_b, experts,
    experts_per_token}, or (None, why not). Norms, biases and multi-token-prediction heads are left out."""
    need = ("vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads")
    experts = next((cfg[k] for k in EXPERT_COUNT_KEYS if cfg.get(k)), None)
    top_k = next((cfg[k] for k in EXPERTS_PER_TOKEN_KEYS if cfg.get(k)), None)
    expert_width = cfg.get("moe_intermediate_size") or cfg.get("intermediate_size")
    if any(not cfg.get(k) for k in need) or not (cfg.get("intermediate_size") or experts and expert_width):
        return None, "cannot count parameters from this config: give context.model.params_b"
    if experts and not (top_k and expert_width):
        return None, ("mixture-of-experts config without num_experts_per_tok or an expert width: give "
                      "context.model.params_b and active_params_b")
    v, h, n_layers = cfg["vocab_size"], cfg["hidden_size"], cfg["num_hidden_layers"]
    embeddings = v * h * (1 if cfg.get("tie_word_embeddings") else 2)
    attention = _attention_params(cfg)
    if not experts:
        return {"params_b": (n_layers * (attention + 3 * h * cfg["intermediate_size"]) + embeddings) / 1e9}, None
    expert = 3 * h * expert_width                                          # gate, up, down
    shared = (cfg.get("n_shared_experts") or 0) * expert + 3 * h * (cfg.get("shared_expert_intermediate_size") or 0)
    moe_layers = sum(_is_moe_layer(cfg, i) for i in range(n_layers))
    dense_mlp = 3 * h * (cfg.get("intermediate_size") or 0) * (n_layers - moe_layers)
    always = n_layers * attention + dense_mlp + moe_layers * (shared + h * experts) + embeddings   # router: h * E
    return {"params_b": (always + moe_layers * experts * expert) / 1e9,
            "active_params_b": (always + moe_layers * top_k * expert) / 1e9,
            "experts": experts, "experts_per_token": top_k}, None


def resolve_model(context: dict, base_dir: Path | None = None, warnings: list | None = None,
                  hardware: Hardware | None = None) -> ModelFacts | None:
    """Merge the catalog shape of a named model, model_config, model_params_b and model's own fields (later
    wins); None when the context gives nothing about the model."""
    warnings = [] if warnings is None else warnings
    given = context.get("model") or {}
    if isinstance(given, str):
        given = {"name": given}
    if not isinstance(given, dict):
        raise InputError("context", "model", "must be a mapping or a model name")
    for key in given:
        if key not in MODEL_KEYS:
            raise InputError("context", f"model.{key}", f"unknown key; expected one of {', '.join(MODEL_KEYS)}")
    given = dict(given)
    facts = _catalog_facts(str(given.pop("name", "") or ""), hardware, warnings)
    if context.get("model_config"):
        from_config, notes = read_hf_config(context["model_config"], base_dir)
        facts.update(from_config)
        warnings.extend(notes)
    if context.get("model_params_b") is not None:
        facts["params_b"] = context["model_params_b"]
    facts.update({k: v for k, v in given.items() if v is not None})
    if not facts:
        return None
    nums = {k: _opt(facts, k, prefix="model.") for k in MODEL_KEYS if k not in ("name", "weight_dtype", "kv_dtype")}
    m = ModelFacts(**nums)
    m.kv_heads = m.kv_heads or m.attention_heads
    if m.head_dim is None and m.hidden_size and m.attention_heads:
        m.head_dim = m.hidden_size / m.attention_heads
    weight = _dtype_bytes(facts.get("weight_dtype"), "model.weight_dtype")
    if weight is None:
        m.notes.append("weight_dtype not given: 2 bytes/param (bf16/fp16) assumed")
    m.weight_bytes_per_param = weight or 2
    kv = _dtype_bytes(facts.get("kv_dtype"), "model.kv_dtype")
    m.kv_bytes_per_elem = kv or (m.weight_bytes_per_param if m.weight_bytes_per_param >= 2 else 2)
    return m


def _catalog_facts(name: str, hardware: Hardware | None, warnings: list) -> dict:
    """The shape of a model the catalog knows by this name, with the weight format its quantization tag names;
    {} (and a note) for a name the catalog does not know."""
    if not name.strip():
        return {}
    shape, tag_dtype = match_model(name, hardware)
    if shape is None:
        warnings.append(f"model {name!r} is not in kb/hardware/models.yaml: give context.model_config or "
                        "context.model {params_b, layers, kv_heads, ...} for the model ceilings")
        return {}
    facts, _ = facts_from_config(shape.config, f"kb/hardware/models.yaml {shape.id}")
    warnings.append(f"model {name!r}: shape of {shape.title} from kb/hardware/models.yaml ({shape.sources[0]})")
    if tag_dtype:
        facts["weight_dtype"] = tag_dtype
    return facts


# ---------------------------------------------------------------- the ceilings

def weight_bytes_ceiling(m: ModelFacts, gpus: float) -> Ceiling:
    value = m.weight_bytes
    return Ceiling(
        "weight_bytes", "Model weight bytes (whole replica)", value, "bytes",
        f"{_f(m.params_b)}e9 params * {m.weight_bytes_per_param:g} bytes/param = {_f(value)} bytes "
        f"({_gb(value)}; {_gb(value / gpus)} per GPU over {gpus:g} GPUs)",
        {"params_b": m.params_b, "weight_bytes_per_param": m.weight_bytes_per_param, "gpus_per_replica": gpus,
         "weight_bytes_per_gpu": value / gpus})


def kv_per_token_ceiling(m: ModelFacts) -> Ceiling:
    value = m.kv_bytes_per_token
    if m.kv_latent_dim is not None:   # MLA (arXiv:2405.04434, table 1): (d_c + d_h^R) * layers elements per token
        formula = (f"{m.layers:g} layers * {m.kv_latent_dim:g} (MLA latent + RoPE key) * {m.kv_bytes_per_elem:g} "
                   f"bytes = {_f(value)} bytes/token")
        inputs = {"layers": m.layers, "kv_latent_dim": m.kv_latent_dim, "kv_bytes_per_elem": m.kv_bytes_per_elem}
    else:
        formula = (f"2 (K and V) * {m.layers:g} layers * {m.kv_heads:g} kv_heads * {m.head_dim:g} head_dim * "
                   f"{m.kv_bytes_per_elem:g} bytes = {_f(value)} bytes/token")
        inputs = {"layers": m.layers, "kv_heads": m.kv_heads, "head_dim": m.head_dim,
                  "kv_bytes_per_elem": m.kv_bytes_per_elem}
    if m.has_window:
        formula += (f"; up to {_f(m.window_tokens)} tokens long: {m.window_layers:g} of the {m.layers:g} layers "
                    f"keep only the last {_f(m.window_tokens)} tokens, so longer sequences cost less per token")
        inputs.update(window_layers=m.window_layers, window_tokens=m.window_tokens)
    return Ceiling("kv_bytes_per_token", "KV-cache bytes per token", value, "bytes/token", formula, inputs)


def decode_weight_bytes(m: ModelFacts, batch: float) -> tuple[float, str]:
    """Weight bytes one decode step reads, and how they were counted. A dense model reads all its weights.
    A mixture-of-experts layer reads each expert that at least one of the batch's tokens is routed to: with
    uniform routing 1 - (1 - k/E)^batch of them, so a large batch reads nearly every expert; skewed routing
    reads fewer, down to the active weights alone (one token's k experts)."""
    if not m.is_moe:
        return m.weight_bytes, ""
    active = m.active_b * 1e9 * m.weight_bytes_per_param
    routed = m.routed_params_b
    if routed is None:
        return active, " (MoE: active weights only, a loose bound: give experts and experts_per_token)"
    touched = 1 - (1 - m.experts_per_token / m.experts) ** batch
    value = active + routed * 1e9 * m.weight_bytes_per_param * (touched - m.experts_per_token / m.experts)
    return value, (f" (MoE: {touched:.0%} of {m.experts:g} experts touched by {batch:g} tokens under uniform "
                   f"routing; skewed routing reads less, down to the active {_gb(active)})")


def decode_ceiling(m: ModelFacts, gpu: GpuSpec, gpus: float, batch: float, ctx: float,
                   observed: float | None) -> Ceiling:
    """Memory-bound decode: each step reads the weights once and every running sequence's KV cache."""
    weights, how = decode_weight_bytes(m, batch)
    per_token = m.kv_bytes_at(ctx)
    kv = batch * ctx * per_token
    step = (weights + kv) / (gpu.hbm_bw_bytes_s * gpus)
    value = batch / step
    window = (f" (at this length: {m.window_layers:g} of {m.layers:g} layers keep only {_f(m.window_tokens)} tokens)"
              if per_token != m.kv_bytes_per_token else "")
    return Ceiling(
        "decode_tokens_per_s", "Decode throughput ceiling per replica (HBM bandwidth)", value, "tokens/s",
        f"step >= (weights {_gb(weights)}{how} + {batch:g} seqs * {_f(ctx)} tokens * {_f(per_token)} B{window} "
        f"= {_gb(weights + kv)}) / ({gpu.hbm_bw_tb_s:g} TB/s * {gpus:g} GPUs) = {step * 1e3:.4g} ms; "
        f"{batch:g} / {step:.4g} s = {_f(value)} tokens/s",
        {"weight_bytes_read": weights, "batch": batch, "context_tokens": ctx,
         "kv_bytes_per_token": per_token, "hbm_bw_tb_s": gpu.hbm_bw_tb_s, "gpus_per_replica": gpus,
         "step_floor_s": step},
        observed, _fraction(observed, value))


# Signals the ceilings read: with the model and the GPU known they count through a ceiling, baseline or not.
CEILING_INPUTS = {"requests_running", "requests_waiting", "prompt_tokens_mean", "output_tokens_mean",
                  "output_tokens_per_s", "request_rate_rps", "prefix_cache_hit_rate", "prompt_tokens_per_s",
                  "step_time_s", "comm_time_frac", "nccl_busbw_gb_per_s", "kv_cache_capacity_tokens"}


def prefill_ceiling(m: ModelFacts, gpu: GpuSpec, gpus: float, observed: float | None) -> Ceiling:
    """Compute-bound prefill: 2 FLOPs per active parameter per token (attention FLOPs left out)."""
    flops = gpu.tensor_tflops * 1e12 * gpus
    value = flops / (2 * m.active_b * 1e9)
    return Ceiling(
        "prefill_tokens_per_s", "Prefill throughput ceiling per replica (16-bit tensor peak)", value, "tokens/s",
        f"{gpu.tensor_tflops:g} TFLOPS * {gpus:g} GPUs / (2 * {_f(m.active_b)}e9 active params) = {_f(value)} tokens/s",
        {"tensor_tflops": gpu.tensor_tflops, "gpus_per_replica": gpus, "active_params_b": m.active_b},
        observed, _fraction(observed, value))


def kv_capacity_ceiling(m: ModelFacts, gpu: GpuSpec, gpus: float, util: float,
                        observed: float | None) -> Ceiling | str:
    """Tokens of KV cache that fit beside the weights; a warning string when the weights do not fit."""
    usable = gpu.hbm_bytes * util * gpus
    free = usable - m.weight_bytes
    if free <= 0:
        return (f"kv_capacity_tokens skipped: weights {_gb(m.weight_bytes)} exceed usable memory {_gb(usable)} "
                f"({gpus:g} x {gpu.hbm_gb:g} GiB x {util:g})")
    value = free / m.kv_bytes_per_token
    return Ceiling(
        "kv_capacity_tokens", "KV-cache capacity per replica", value, "tokens",
        f"({gpus:g} GPUs * {gpu.hbm_gb:g} GiB * {util:g} - weights {_gb(m.weight_bytes)}) / "
        f"{_f(m.kv_bytes_per_token)} B/token = {_f(value)} tokens",
        {"hbm_bytes_per_gpu": gpu.hbm_bytes, "gpu_memory_utilization": util, "gpus_per_replica": gpus,
         "weight_bytes": m.weight_bytes, "kv_bytes_per_token": m.kv_bytes_per_token},
        observed, _fraction(observed, value))


def training_step_ceiling(m: ModelFacts, gpu: GpuSpec, n_gpus: float, tokens: float,
                          observed: float | None) -> Ceiling:
    """6 FLOPs per active parameter per token (forward + backward); MFU = floor / observed step time."""
    flops = 6 * m.active_b * 1e9 * tokens
    value = flops / (n_gpus * gpu.tensor_tflops * 1e12)
    return Ceiling(
        "train_step_time_floor_s", "Training step time floor (16-bit tensor peak)", value, "s",
        f"6 * {_f(m.active_b)}e9 active params * {_f(tokens)} tokens / ({n_gpus:g} GPUs * {gpu.tensor_tflops:g} "
        f"TFLOPS) = {value:.4g} s" + (f"; MFU = {value:.4g} / {observed:.4g} s" if observed else ""),
        {"active_params_b": m.active_b, "tokens_per_step": tokens, "gpus": n_gpus, "tensor_tflops": gpu.tensor_tflops},
        observed, _fraction(value, observed) if observed else None)


def allreduce_ceilings(n: float, message_bytes: float, link_gb_s: float, link: str,
                       observed_s: float | None, observed_busbw: float | None) -> list[Ceiling]:
    """Ring all-reduce: each GPU sends and receives 2(n-1)/n of the message over its own link."""
    factor = 2 * (n - 1) / n
    value = factor * message_bytes / (link_gb_s * 1e9)
    inputs = {"ranks": n, "message_bytes": message_bytes, "link_gb_s": link_gb_s, "link": link}
    return [
        Ceiling("allreduce_time_floor_s", "All-reduce time floor (ring, link bandwidth)", value, "s",
                f"2 * ({n:g} - 1) / {n:g} * {_gb(message_bytes)} / {link_gb_s:g} GB/s ({link}) = {value:.4g} s",
                inputs, observed_s, _fraction(value, observed_s) if observed_s else None),
        Ceiling("allreduce_busbw_gb_s", "All-reduce bus bandwidth ceiling (link, per direction)", link_gb_s, "GB/s",
                f"busbw <= {link_gb_s:g} GB/s per direction ({link}); in-network reduction (NVLS, SHARP) can beat it",
                inputs, observed_busbw, _fraction(observed_busbw, link_gb_s)),
    ]


def batch_cap_ceiling(cap: float, observed: float | None) -> Ceiling:
    """The engine's configured running-batch cap (vLLM --max-num-seqs, SGLang --max-running-requests,
    TensorRT-LLM / TGI max batch size) against the largest running batch seen on a replica."""
    return Ceiling(
        "running_batch_cap", "Configured running-batch cap per replica", cap, "requests",
        f"max_num_seqs = {cap:g} (context; --max-num-seqs, --max-running-requests or max_batch_size)",
        {"max_num_seqs": cap}, observed, _fraction(observed, cap))


def call_batch_cap_ceiling(cap: float, call_batch: float) -> Ceiling:
    """The engine's batch cap against the most prompts the layer above hands it in one call (LLM.generate's
    list, one RPC, one batched actor call). Calls far below the cap while work is pending upstream mean a limit
    in front of the engine sets the batch (Ray Serve: max_ongoing_requests below max_batch_size, PR 43840)."""
    return Ceiling(
        "call_batch_cap", "Configured batch cap, against the prompts handed to the engine per call", cap, "requests",
        f"max_num_seqs = {cap:g} (context); engine_call_batch, the largest call seen", {"max_num_seqs": cap},
        call_batch, _fraction(call_batch, cap))


def gpus_installed_ceiling(per_node: float, fewest_listed: float | None) -> Ceiling:
    """The GPUs each node should have (context.gpus_per_node) against the fewest the driver lists on a node."""
    return Ceiling(
        "gpus_installed", "GPUs per node", per_node, "GPUs",
        f"gpus_per_node = {per_node:g} (context)", {"gpus_per_node": per_node}, fewest_listed,
        _fraction(fewest_listed, per_node))


def client_inflight_ceiling(concurrency: float, held: float | None) -> Ceiling:
    """Requests the clients (load generator or gateway) have in flight against those the engines hold.

    In a closed loop every outstanding request is somewhere: in the gateway or API server, in transit, or in
    an engine's running batch or waiting queue (num_requests_running + num_requests_waiting). Far fewer at
    the engines than in flight means the rest are held in front of them (Little's law per stage).
    """
    return Ceiling(
        "client_inflight", "Requests in flight at the clients", concurrency, "requests",
        f"client_concurrency = {concurrency:g} (context; benchmark concurrency or the gateway's active requests)",
        {"client_concurrency": concurrency}, held, _fraction(held, concurrency))


def client_inflight_running_ceiling(concurrency: float, running: float) -> Ceiling:
    """Requests the clients have in flight against the engines' running batch, where the waiting count is unknown.

    A running batch far below what the clients keep in flight means the rest wait somewhere: in the engine's
    queue (admission stops below the cap) or in front of it (a gateway, serving layer or API server caps them).
    With the waiting count known, engine_inflight_frac and the batch-cap readings tell the two apart.
    """
    return Ceiling(
        "client_inflight_running", "Requests in flight at the clients, against the running batch", concurrency,
        "requests", f"client_concurrency = {concurrency:g} (context); running batch summed over replicas "
        "(waiting count unknown)", {"client_concurrency": concurrency}, running, _fraction(running, concurrency))


def _engine_running(signals: dict) -> float | None:
    """Running requests summed over replicas, only where the waiting count is unknown; None otherwise."""
    running = signals.get("requests_running")
    if running is None or signals.get("requests_waiting") is not None:
        return None
    values = running.values() if isinstance(running, dict) else [running]
    return sum(_pos_or_zero(v, "requests_running") for v in values)


def _engine_held(signals: dict) -> float | None:
    """Running plus waiting requests summed over replicas; None unless both are known."""
    parts = [signals.get("requests_running"), signals.get("requests_waiting")]
    if any(p is None for p in parts):
        return None
    total = 0.0
    for key, value in zip(("requests_running", "requests_waiting"), parts):
        values = value.values() if isinstance(value, dict) else [value]
        total += sum(_pos_or_zero(v, key) for v in values)
    return total


# ---------------------------------------------------------------- putting it together

def _gpu(context: dict, hardware: Hardware, warnings: list) -> GpuSpec | None:
    name = context.get("gpu")
    if name is None:
        warnings.append("no context.gpu: ceilings that need GPU specs are skipped")
        return None
    gpu = match_gpu(str(name), hardware)
    if gpu is None:
        alike = gpus_named_like(str(name), hardware)
        which = (f"; it could be {', '.join(g.title for g in alike)}: give the name nvidia-smi prints"
                 if 1 < len(alike) <= 6 else "")
        warnings.append(f"unknown GPU {name!r}: ceilings that need its specs are skipped{which}")
    return gpu


def _gpus_per_replica(context: dict) -> float:
    if context.get("gpus_per_replica") is not None:
        return _pos(context["gpus_per_replica"], "gpus_per_replica")
    return (_opt(context, "tp") or 1) * (_opt(context, "pp") or 1)


def _tokens_per_step(context: dict) -> float | None:
    if context.get("tokens_per_step") is not None:
        return _pos(context["tokens_per_step"], "tokens_per_step")
    batch, seq = _opt(context, "global_batch_size"), _opt(context, "seq_len")
    return batch * seq if batch and seq else None


def _serving(m, gpu, gpus, context, signals, warnings) -> list[Ceiling]:
    batch = _signal(signals, "requests_running")
    prompt, output = _signal(signals, "prompt_tokens_mean"), _signal(signals, "output_tokens_mean")
    ctx = prompt + output / 2 if prompt is not None and output is not None else None
    out: list[Ceiling] = []
    needs = {"requests_running": batch, "prompt_tokens_mean": prompt, "output_tokens_mean": output,
             "model kv_bytes_per_token": m.kv_bytes_per_token, "model params_b": m.weight_bytes}
    if not _skip(warnings, "decode_tokens_per_s", needs):
        if batch == 0:
            warnings.append("decode_tokens_per_s skipped: requests_running is 0 (idle)")
        else:
            observed = _signal(signals, "output_tokens_per_s")
            out.append(decode_ceiling(m, gpu, gpus, batch, ctx, observed))
    rate = _signal(signals, "request_rate_rps")
    hit = _signal(signals, "prefix_cache_hit_rate") or 0.0
    taken_in = _signal(signals, "prompt_tokens_per_s")   # measured; else what the request rate implies
    if taken_in is None and rate is not None and prompt is not None:
        taken_in = rate * prompt
    prefill_obs = taken_in * (1 - min(hit, 1.0)) if taken_in is not None else None
    if gpu.tensor_tflops is None:
        warnings.append(f"prefill_tokens_per_s skipped: no citable 16-bit tensor peak for {gpu.title}")
    else:
        out.append(prefill_ceiling(m, gpu, gpus, prefill_obs))
    if m.has_window and "kv_cache_capacity_tokens" not in signals:
        warnings.append(f"kv_capacity_tokens skipped: {m.window_layers:g} of {m.layers:g} layers keep only the last "
                        f"{_f(m.window_tokens)} tokens, so the tokens that fit depend on each sequence's length; give "
                        "kv_cache_capacity_tokens (the engine's start-up log)")
    elif m.kv_bytes_per_token is not None and m.weight_bytes is not None and "kv_cache_capacity_tokens" not in signals:
        util = _opt(context, "gpu_memory_utilization") or 0.9
        cap = kv_capacity_ceiling(m, gpu, gpus, util, _kv_in_use(signals))
        (warnings.append(cap) if isinstance(cap, str) else out.append(cap))
    return out


def _kv_in_use(signals: dict) -> float | None:
    """Tokens the running batch holds: each running request its prompt and, on average, half its output."""
    batch = _signal(signals, "requests_running")
    prompt, output = _signal(signals, "prompt_tokens_mean"), _signal(signals, "output_tokens_mean")
    return batch * (prompt + output / 2) if None not in (batch, prompt, output) else None


def reported_kv_capacity_ceiling(pool: float, observed: float | None) -> Ceiling:
    """The KV pool the engine reports at start-up; it beats the estimate from HBM and weights, which cannot see
    a hybrid model's state pages, activation reserves or other tenants' memory."""
    return Ceiling("kv_capacity_tokens", "KV-cache capacity per replica (as the engine reports it)", pool, "tokens",
                   f"kv_cache_capacity_tokens = {_f(pool)} tokens (the engine's start-up report)",
                   {"kv_cache_capacity_tokens": pool}, observed, _fraction(observed, pool))


def _training(m, gpu, context, signals, warnings) -> list[Ceiling]:
    tokens = _tokens_per_step(context)
    n_gpus = _opt(context, "gpus") or _opt(context, "world_size")
    if _skip(warnings, "train_step_time_floor_s", {"tokens_per_step (or global_batch_size and seq_len)": tokens,
                                                   "gpus": n_gpus}):
        return []
    if gpu.tensor_tflops is None:
        warnings.append(f"train_step_time_floor_s skipped: no citable 16-bit tensor peak for {gpu.title}")
        return []
    return [training_step_ceiling(m, gpu, n_gpus, tokens, _signal(signals, "step_time_s", "max"))]


def _link(context: dict, ar: dict, gpu: GpuSpec | None, n: float, hardware: Hardware,
          warnings: list) -> tuple[float | None, str]:
    """Per-direction GB/s of the link each GPU all-reduces over, and its name."""
    if ar.get("link_gb_s") is not None:
        return _pos(ar["link_gb_s"], "allreduce.link_gb_s"), "given"
    name = ar.get("link") or (context.get("interconnect") if n > (_opt(context, "gpus_per_node") or 8) else None)
    if name and str(name).lower() not in ("nvlink", "pcie"):
        link = match_interconnect(str(name), hardware)
        if link is None:
            key = "allreduce.link" if ar.get("link") else "interconnect"
            warnings.append(f"unknown interconnect {str(name)!r} (context.{key}): ceilings that need its bandwidth "
                            "are skipped")
            return None, ""
        return link.gb_s, link.title
    if gpu is None:
        return None, ""
    if gpu.nvlink_gb_s and str(name or "nvlink").lower() == "nvlink":
        return gpu.nvlink_gb_s / 2, f"NVLink {gpu.nvlink_gb_s:g} GB/s bidirectional / 2"
    why = "" if str(name).lower() == "pcie" else ", no NVLink on this GPU"
    return gpu.pcie_gb_s, f"PCIe Gen{gpu.pcie_gen} x16 per direction{why}"


def _allreduce(m, gpu, context, signals, hardware, warnings) -> list[Ceiling]:
    ar = context.get("allreduce") or {}
    if not isinstance(ar, dict):
        raise InputError("context", "allreduce", "must be a mapping")
    n = _opt(ar, "n", prefix="allreduce.") or _opt(context, "gpus") or _opt(context, "world_size")
    message = _opt(ar, "message_bytes", prefix="allreduce.")
    if message is None and m is not None and m.params_b:
        message = m.params_b * 1e9 * 2 / _gpus_per_replica(context)   # bf16 gradients of one model shard
    link_gb_s, link = _link(context, ar, gpu, n or 0, hardware, warnings)
    if _skip(warnings, "allreduce_time_floor_s", {"allreduce.n (or gpus)": n, "allreduce.message_bytes": message,
                                                  "link bandwidth (GPU specs or allreduce.link)": link_gb_s}):
        return []
    if n < 2:
        warnings.append("allreduce_time_floor_s skipped: needs at least 2 ranks")
        return []
    step, comm = _signal(signals, "step_time_s", "max"), _signal(signals, "comm_time_frac")
    observed_s = step * comm if step is not None and comm else None
    return allreduce_ceilings(n, message, link_gb_s, link, observed_s, _signal(signals, "nccl_busbw_gb_per_s"))


def compute_ceilings(context: dict, signals: dict | None = None, *, base_dir: Path | None = None,
                     hardware: Hardware | None = None) -> tuple[list[Ceiling], list[str]]:
    """Every ceiling the context and signals allow, and a warning for each one skipped."""
    if not isinstance(context, dict):
        raise InputError("context", "", "must be a mapping")
    signals = signals or {}
    hardware = hardware or load_hardware()
    warnings: list[str] = []
    gpu = _gpu(context, hardware, warnings)
    m = resolve_model(context, base_dir, warnings, hardware)
    gpus = _gpus_per_replica(context)
    out: list[Ceiling] = []
    if m is None and not context.get("model"):
        warnings.append("no model in context (model, model_params_b or model_config): model ceilings are skipped")
    elif m is not None:
        warnings.extend(m.notes)
        if not _skip(warnings, "weight_bytes", {"model params_b": m.params_b}):
            out.append(weight_bytes_ceiling(m, gpus))
        if not _skip(warnings, "kv_bytes_per_token", {"model layers": m.layers, "model kv_heads": m.kv_heads,
                                                      "model head_dim": m.head_dim}):
            out.append(kv_per_token_ceiling(m))
    serving = any(k in signals for k in ("requests_running", "output_tokens_per_s", "prompt_tokens_mean",
                                         "prompt_tokens_per_s"))
    training = "step_time_s" in signals or any(k in context for k in ("tokens_per_step", "global_batch_size"))
    if gpu is not None and m is not None and m.active_b is not None:
        if serving:
            out.extend(_serving(m, gpu, gpus, context, signals, warnings))
        if training:
            out.extend(_training(m, gpu, context, signals, warnings))
    elif gpu is not None and m is not None and (serving or training):
        warnings.append("throughput ceilings skipped: missing model params_b")
    if serving and signals.get("kv_cache_capacity_tokens") is not None:
        out.append(reported_kv_capacity_ceiling(_signal(signals, "kv_cache_capacity_tokens"), _kv_in_use(signals)))
    if context.get("max_num_seqs") is not None:
        out.append(batch_cap_ceiling(_pos(context["max_num_seqs"], "max_num_seqs"),
                                     _signal(signals, "requests_running", how="max")))
        if signals.get("engine_call_batch") is not None:
            out.append(call_batch_cap_ceiling(_pos(context["max_num_seqs"], "max_num_seqs"),
                                              _signal(signals, "engine_call_batch", how="max")))
    if context.get("gpus_per_node") is not None and signals.get("gpus_visible") is not None:
        out.append(gpus_installed_ceiling(_pos(context["gpus_per_node"], "gpus_per_node"),
                                          _signal(signals, "gpus_visible", how="min")))
    if context.get("client_concurrency") is not None:
        concurrency = _pos(context["client_concurrency"], "client_concurrency")
        out.append(client_inflight_ceiling(concurrency, _engine_held(signals)))
        if _engine_running(signals) is not None:
            out.append(client_inflight_running_ceiling(concurrency, _engine_running(signals)))
    if "allreduce" in context or "nccl_busbw_gb_per_s" in signals:
        out.extend(_allreduce(m, gpu, context, signals, hardware, warnings))
    return out, warnings
