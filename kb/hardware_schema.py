"""Hardware specs as data: GPUs (kb/hardware/gpus.yaml), scale-out links (kb/hardware/interconnects.yaml) and the
shapes of well-known models (kb/hardware/models.yaml)."""
import re
from functools import lru_cache
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, model_validator

from perfdoctor.errors import InputError
from perfdoctor.kb.schema import Entry
from perfdoctor.yamlio import load_file

HARDWARE_DIR = Path(__file__).parent / "hardware"


class GpuSpec(Entry):
    """One GPU model. Dense tensor-core peaks; see the header of gpus.yaml for every unit."""
    id: str
    vendor: Literal["nvidia", "amd"]
    title: str
    names: list[str] = Field(min_length=1, description="as nvidia-smi / dcgm-exporter modelName print them")
    aliases: list[str] = []
    hbm_gb: float = Field(gt=0, description="datasheet GB, read as GiB")
    hbm_bw_tb_s: float = Field(gt=0)
    bf16_dense_tflops: float | None = Field(None, gt=0)
    fp16_dense_tflops: float | None = Field(None, gt=0)
    fp8_dense_tflops: float | None = Field(None, gt=0)
    nvlink_gb_s: float | None = Field(None, gt=0, description="total bidirectional per GPU")
    nvlink_bridge_gb_s: float | None = Field(None, gt=0, description="NVLink bridge between a pair of PCIe cards, total bidirectional; None when no bridge exists")
    pcie_gen: int | None = Field(None, ge=3, le=6)
    pcie_gb_s: float | None = Field(None, gt=0, description="x16, per direction")
    pcie_datasheet_gb_s: float | None = Field(None, gt=0, description="datasheet figure, bidirectional")
    tdp_w: float | None = Field(None, gt=0)
    notes: str = ""
    sources: list[str] = Field(min_length=1)

    @model_validator(mode="after")
    def _pcie_consistent(self):
        if self.pcie_gb_s and self.pcie_datasheet_gb_s and abs(self.pcie_datasheet_gb_s - 2 * self.pcie_gb_s) > 0.5:
            raise ValueError("pcie_datasheet_gb_s (bidirectional) must be twice pcie_gb_s (per direction)")
        return self

    @property
    def tensor_tflops(self) -> float | None:
        """The 16-bit dense tensor peak: BF16, or FP16 where the GPU has no BF16 (V100)."""
        return self.bf16_dense_tflops or self.fp16_dense_tflops

    @property
    def nvlink_links_if_none(self) -> int | None:
        """0 for an NVIDIA board that takes no NVLink at all (no bridge either): its GPUs talk over PCIe.
        None (unknown) where NVLink is built in, an optional bridge may be fitted, or the vendor's link is not NVLink."""
        return 0 if self.vendor == "nvidia" and not self.nvlink_gb_s and not self.nvlink_bridge_gb_s else None

    @property
    def hbm_bytes(self) -> float:
        return self.hbm_gb * 2**30

    @property
    def hbm_bw_bytes_s(self) -> float:
        return self.hbm_bw_tb_s * 1e12


class Interconnect(Entry):
    """One scale-out port: InfiniBand or RoCE. gbit_s is per direction."""
    id: str
    kind: Literal["infiniband", "roce", "ethernet"]
    title: str
    names: list[str] = Field(min_length=1)
    gbit_s: float = Field(gt=0)
    lanes: int | None = Field(None, gt=0)
    notes: str = ""
    sources: list[str] = Field(min_length=1)

    @property
    def gb_s(self) -> float:
        """Per direction, GB/s."""
        return self.gbit_s / 8


class ModelShape(Entry):
    """One published model: the architecture fields of its Hugging Face config.json, so that a model named
    in the context gets the same ceilings as one given by model_config."""
    id: str
    title: str
    names: list[str] = Field(min_length=1, description="Hugging Face repo ids (org/name) with this exact shape")
    aliases: list[str] = Field([], description="short names people type: ollama tags, names without the org")
    config: dict = Field(description="config.json fields: layers, widths, heads, vocabulary, experts, dtype")
    published: dict[Literal["total", "active"], float] = Field(
        description="the vendor's parameter counts in billions, which the config must reproduce (a check on typos)")
    notes: str = ""
    sources: list[str] = Field(min_length=1, description="the config.json each figure was read from")

    @model_validator(mode="after")
    def _config_complete(self):
        need = ("num_hidden_layers", "hidden_size", "num_attention_heads", "vocab_size")
        missing = [k for k in need if not self.config.get(k)]
        if missing:
            raise ValueError(f"config lacks {', '.join(missing)}")
        return self


class Hardware(Entry):
    gpus: list[GpuSpec]
    interconnects: list[Interconnect]
    models: list[ModelShape] = []


def normalize(name: str) -> str:
    """Loose form of a GPU or link name: lower case, no vendor words, no spaces, hyphens or underscores."""
    s = name.lower()
    for word in ("nvidia", "geforce", "tesla", "amd", "instinct"):
        s = s.replace(word, "")
    return re.sub(r"[\s\-_]+", "", s)


def _load_list(path: Path, model):
    raw = load_file(path)
    if not isinstance(raw, list):
        raise InputError(str(path), "", "expected a list of entries")
    out = []
    for i, item in enumerate(raw):
        try:
            out.append(model.model_validate(item))
        except ValidationError as exc:
            err = exc.errors()[0]
            key = ".".join(str(p) for p in err["loc"])
            who = item.get("id", f"entry {i}") if isinstance(item, dict) else f"entry {i}"
            raise InputError(str(path), f"{who}.{key}", err["msg"]) from None
    return out


def _check_unique(entries, path: Path, keys) -> None:
    """Every id, name and alias (exact and normalized) must point at one entry only."""
    seen: dict[str, str] = {}
    for e in entries:
        for label in keys(e):
            for form in {label.lower(), normalize(label)}:
                if seen.setdefault(form, e.id) != e.id:
                    raise InputError(str(path), e.id, f"name {label!r} also matches {seen[form]!r}")


@lru_cache(maxsize=4)
def load_hardware(directory: Path = HARDWARE_DIR) -> Hardware:
    """Load and check gpus.yaml and interconnects.yaml."""
    gpus = _load_list(directory / "gpus.yaml", GpuSpec)
    links = _load_list(directory / "interconnects.yaml", Interconnect)
    models = _load_list(directory / "models.yaml", ModelShape) if (directory / "models.yaml").is_file() else []
    _check_unique(gpus, directory / "gpus.yaml", lambda g: [g.id, *g.names, *g.aliases])
    _check_unique(links, directory / "interconnects.yaml", lambda i: [i.id, *i.names])
    seen: dict[str, str] = {}
    for m in models:
        for label in [m.id, *m.names, *m.aliases]:
            key = model_key(label)[0]
            if seen.setdefault(key, m.id) != m.id:
                raise InputError(str(directory / "models.yaml"), m.id, f"name {label!r} also matches {seen[key]!r}")
    return Hardware(gpus=gpus, interconnects=links, models=models)


def _match(name: str, entries, exact, loose):
    """Exact names (case-insensitive), then aliases, then the normalized form of all of them."""
    key = name.strip().lower()
    for labels in (exact, loose):
        for e in entries:
            if key in (s.lower() for s in labels(e)):
                return e
    key = normalize(name)
    for e in entries:
        if key in (normalize(s) for s in [e.id, *exact(e), *loose(e)]):
            return e
    return None


def match_gpu(name: str, hardware: Hardware | None = None) -> GpuSpec | None:
    """The GPU an nvidia-smi name, an alias or a loose spelling of either refers to; None if unknown."""
    if not name or not name.strip():
        return None
    hw = hardware or load_hardware()
    return _match_gpu_name(name, hw) or _match_gpu_without_remarks(name, hw)


def gpus_named_like(name: str, hardware: Hardware | None = None) -> list[GpuSpec]:
    """Catalog GPUs whose name or alias begins with this name's loose form: 'A100' -> the four A100 boards."""
    key = normalize(name)
    hw = hardware or load_hardware()
    return [g for g in hw.gpus if key and any(normalize(s).startswith(key) for s in [*g.names, *g.aliases])]


def _match_gpu_name(name: str, hw: Hardware) -> GpuSpec | None:
    return _match(name, hw.gpus, lambda g: g.names, lambda g: [g.id, *g.aliases])


REMARK = re.compile(r"\(([^)]*)\)")
MEMORY_SIZE = re.compile(r"(\d+(?:\.\d+)?)\s*gb\b", re.I)
FORM_FACTORS = ("pcie", "sxm", "nvl", "laptop", "mobile", "max-q")   # the same chip name on another board


def _match_gpu_without_remarks(name: str, hw: Hardware) -> GpuSpec | None:
    """A name with what people add to it ('GB10 (DGX Spark, 128 GB unified memory)', 'RTX 5070 Ti 16GB'): the GPU
    the name means without its parentheses and memory size, if the size it states is that GPU's. A form factor in
    the remark ('V100 (PCIe, no NVLink)') must match as well; a size that differs (a 22 GB modded 2080 Ti) is
    another card, so no match."""
    base = MEMORY_SIZE.sub(" ", REMARK.sub(" ", name)).strip()
    if not base or base == name.strip():
        return None
    remark = " ".join(REMARK.findall(name)).lower()
    stated = [float(x) for x in MEMORY_SIZE.findall(name)]
    forms = [f for f in FORM_FACTORS if f in remark]
    stems = [f"{base} {f}" for f in forms] or [base]
    tries = [f"{stem} {gb:g}GB" for stem in stems for gb in stated] + stems
    gpu = next((g for g in (_match_gpu_name(t, hw) for t in tries) if g), None)
    if gpu is None or (stated and all(abs(gb - gpu.hbm_gb) > 0.5 for gb in stated)):
        return None
    return gpu


def match_interconnect(name: str, hardware: Hardware | None = None) -> Interconnect | None:
    """The link a name such as 'NDR', 'IB HDR' or 'RoCE 400G' refers to; None if unknown."""
    if not name or not name.strip():
        return None
    hw = hardware or load_hardware()
    return _match(name, hw.interconnects, lambda i: i.names, lambda i: [i.id])


# Name parts that say how a checkpoint was packaged, not which model it is: chat/instruct tuning keeps the shape.
TUNING_WORDS = {"instruct", "chat", "hf", "it", "base", "gguf", "dynamic", "bnb"}
# Quantization tags in a repo or tag name, and the weight format they mean (bytes per weight follow from it).
QUANT_WORDS = {"fp8": "fp8", "nvfp4": "nvfp4", "mxfp4": "mxfp4", "awq": "int4", "gptq": "int4", "int4": "int4",
               "w4a16": "int4", "4bit": "int4", "int8": "int8", "w8a8": "int8", "w8a16": "int8", "8bit": "int8"}
GGUF_QUANT = re.compile(r"[-_.:](i?q([2-8])_(?:k(?:_[sml])?|[01]|xxs|xs|s|m|nl))$", re.I)   # llama.cpp: Q4_K_M, Q8_0, IQ3_XS


def model_key(name: str) -> tuple[str, str | None]:
    """The shape-identifying part of a model name, and the weight format its quantization tag implies.
    'Qwen/Qwen2.5-7B-Instruct-AWQ' -> ('qwen2.57b', 'int4'); 'llama3.1:8b' -> ('llama3.18b', None)."""
    s = name.strip().lower()
    remark = " ".join(REMARK.findall(s))            # 'Llama-3.3-70B-Instruct (4-bit)', 'llama3:70b (Q4, 41 GB)'
    s = REMARK.sub(" ", s).strip().rsplit("/", 1)[-1]
    dtype = _remark_dtype(remark)
    gguf = GGUF_QUANT.search(s)
    if gguf:
        dtype = dtype or ("int8" if gguf.group(2) == "8" else "int4")
        s = s[:gguf.start()]
    words = [w for w in re.split(r"[\s\-_:]+", s) if w]
    while words and (words[-1] in TUNING_WORDS or words[-1] in QUANT_WORDS):
        word = words.pop()
        dtype = dtype or QUANT_WORDS.get(word)
    return "".join(words), dtype


def _remark_dtype(remark: str) -> str | None:
    """The weight format a remark beside a model name gives ('4-bit', 'Q4', 'INT4', 'fp8'), or None."""
    for word in re.split(r"[\s,;/]+", remark.replace("-", "")):
        gguf = re.fullmatch(r"i?q([2-8])(?:_\w+)?", word)
        if word in QUANT_WORDS or gguf:
            return QUANT_WORDS.get(word) or ("int8" if gguf.group(1) == "8" else "int4")
    return None


def match_model(name: str, hardware: Hardware | None = None) -> tuple[ModelShape | None, str | None]:
    """The catalog model a repo id, tag or short name refers to (None if unknown), and the weight format
    named by its quantization tag (None if it names none)."""
    if not name or not name.strip():
        return None, None
    hw = hardware or load_hardware()
    key, dtype = model_key(name)
    for m in hw.models:
        if key in (model_key(label)[0] for label in [m.id, *m.names, *m.aliases]):
            return m, dtype
    return None, dtype
