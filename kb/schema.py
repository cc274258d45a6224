"""Pydantic schemas for every knowledge-base entry. Field order is the order an on-call engineer reads."""
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Bottleneck = Literal["compute", "vram", "memory_bandwidth", "communication", "scheduling", "service_quality"]
Layer = Literal["model_architecture", "kernel", "inference_engine", "inference_algorithm",
                "distributed_inference", "training_engine", "distributed_control", "cluster_control",
                "hardware", "network", "storage", "gateway"]
EntityKind = Literal["service", "gpu", "rank", "node", "replica", "link"]
Probability = float


class Entry(BaseModel):
    """Common base: unknown keys are errors, so a typo never passes silently."""
    model_config = ConfigDict(extra="forbid", frozen=True)


class Translation(Entry):
    """Chinese text for the user-facing fields of an entry."""
    title: str | None = None
    description: str | None = None
    definition: str | None = None
    cannot_fix: list[str] | None = None
    counterexample: str | None = None
    why: str | None = None


class Outlier(Entry):
    """Robust peer test: |x - median| / (1.4826 * MAD) >= min_z and |x - median| / median >= min_rel.

    reference: best compares each entity with the best peer instead (identical hardware should show identical
    link counts, PCIe generation and width, so any member below the best one is degraded, even half of them).
    """
    direction: Literal["low", "high"]
    min_z: float = 3.5
    min_rel: float = 0.1
    min_peers: int = 3
    reference: Literal["median", "best"] = "median"


class OneBound(Entry):
    """A value compared with exactly one bound: above or below."""
    above: float | None = None
    below: float | None = None

    @model_validator(mode="after")
    def _one_bound(self):
        if (self.above is None) == (self.below is None):
            raise ValueError("needs exactly one of above or below")
        return self


class SignalBound(OneBound):
    """Another signal compared with exactly one bound: above or below."""
    signal: str


class FractionOf(SignalBound):
    """This signal divided by `signal` of the same entity, compared with the bound."""


class Plus(SignalBound):
    """This signal plus `signal` of the same entity (running plus waiting requests), compared with the bound."""


class Condition(SignalBound):
    """A second signal that must also hold for the finding: its aggregate compared with the bound.

    otherwise: what the finding is when the condition fails: absent (the finding means 'X while Y'), or unknown
    (Y is what makes X evidence at all: low clocks on an idle GPU are power saving, not throttling).
    missing: what happens while the other signal is unmeasured: the finding is unknown, or the condition is skipped.
    at_least: an inclusive lower bound, for a condition whose complement (`below` the same value) is another
    finding's condition, so that a value exactly at the bound belongs to one of the two.
    """
    at_least: float | None = None
    aggregate: Literal["max", "min", "median", "mean"] = "max"
    otherwise: Literal["absent", "unknown"] = "absent"
    missing: Literal["unknown", "skip"] = "unknown"

    @model_validator(mode="after")
    def _one_bound(self):
        if [self.above, self.below, self.at_least].count(None) != 2:
            raise ValueError("needs exactly one of above, below or at_least")
        return self


class TailRatioUp(Entry):
    """P99/P50 of now over P99/P50 of the baseline (or over `absolute` without a baseline)."""
    median_signal: str
    factor: float = 1.5
    absolute: float = 4.0


class PartsShare(Entry):
    """Sum of other signals (the parts of this latency) over this signal; every part must be observed."""
    parts: list[str] = Field(min_length=1)
    below: float


class AddedShare(OneBound):
    """Share of the time this signal gained since the baseline that went into `parts` (shares of it, 0-1):
    (now x parts_now - before x parts_before) / (now - before). Every value must be known in both states."""
    parts: list[str] = Field(min_length=1)


NOT_TESTS = {"aggregate", "when", "unless_changed", "complement", "only_without_baseline", "absent_unknown"}


class Rule(Entry):
    """Exactly one test that turns a signal into a present/absent finding."""
    above: float | None = None     # value > bound (a count above 0 is any at all)
    at_least: float | None = None  # value >= bound: a level reached counts ("host CPU >= 90%" holds at 90%)
    below: float | None = None
    ratio_up: float | None = None
    ratio_down: float | None = None
    over_slo: bool | None = None
    outlier: Outlier | None = None
    equals: str | bool | float | None = None
    contains_any: list[str] | None = None
    fraction_of: FractionOf | None = None
    plus: Plus | None = None
    tail_ratio_up: TailRatioUp | None = None
    spread_above: float | None = None
    differs_from_baseline: bool | None = None
    left_baseline_value: str | None = None    # the baseline showed this value, the current no longer does
    parts_share: PartsShare | None = None
    added_share: AddedShare | None = None   # where the time added since the baseline went (data wait, communication)
    aggregate: Literal["max", "min", "median", "mean"] | None = None
    when: Condition | list[Condition] | None = None    # the finding holds only while these other signals also hold
    unless_changed: list[str] | None = None   # a baseline comparison these reported changes make moot
    complement: bool | None = None   # ratio rules on a fraction compare 1 - value (a miss rate, not a hit rate)
    # a state that stands in for a missing comparison: read only when the signal has no baseline (with one,
    # the ratio finding says what changed, and the state would count the same evidence twice)
    only_without_baseline: bool | None = None
    # the finding's absence says nothing about its causes (few fully cold turns do not rule out partial misses):
    # a value short of the bound leaves it unknown rather than absent
    absent_unknown: bool | None = None

    @model_validator(mode="after")
    def _exactly_one(self):
        tests = [k for k in type(self).model_fields if k not in NOT_TESTS and getattr(self, k) is not None]
        if len(tests) != 1:
            raise ValueError(f"a rule needs exactly one test, got {tests or 'none'}")
        return self

    @property
    def conditions(self) -> list[Condition]:
        return self.when if isinstance(self.when, list) else [self.when] if self.when else []

    @property
    def kind(self) -> str:
        return next(k for k in type(self).model_fields if k not in NOT_TESTS and getattr(self, k) is not None)


class Finding(Entry):
    id: str
    title: str
    rule: Rule
    leak: Probability = Field(0.05, gt=0, lt=1, description="P(present) with no modelled cause active")
    zh: Translation | None = None


class MetricSource(Entry):
    """How one exporter exposes a signal; perfdoctor builds the PromQL and the scrape arithmetic from it.

    kind: gauge (averaged over the window), rate (per-second rate of a counter), histogram_quantile
    (quantile of a _bucket histogram over the window), histogram_mean (rate of _sum over rate of _count),
    ratio_of_rates (rate(metric) / rate(denominator)), ratio_of_gauges (gauge metric over gauge denominator,
    each averaged over the window, e.g. MemAvailable over MemTotal), mode_share (share of a counter's rate with
    the given label values, e.g. node_cpu_seconds_total{mode="iowait"} over all modes).
    """
    source: Literal["vllm", "vllm_v0", "sglang", "tgi", "dcgm", "node_exporter"]
    kind: Literal["gauge", "rate", "histogram_quantile", "histogram_mean", "ratio_of_rates", "ratio_of_gauges",
                  "mode_share"]
    metric: str
    denominator: str | None = None
    quantile: float | None = Field(None, gt=0, lt=1)
    scale: float = 1.0
    labels: dict[str, str] = {}
    entity_labels: list[str] = []
    note: str | None = None

    @model_validator(mode="after")
    def _parts_of_the_kind(self):
        if self.kind.startswith("ratio_of_") and not self.denominator:
            raise ValueError(f"kind {self.kind} needs a denominator metric")
        if self.kind == "histogram_quantile" and self.quantile is None:
            raise ValueError("kind histogram_quantile needs a quantile")
        return self


class Signal(Entry):
    id: str
    title: str
    unit: str
    kind: Literal["number", "fraction", "count", "bool", "string", "list"]
    range: tuple[float, float] | None = None
    values: list[str] | None = None
    entity: EntityKind
    definition: str
    from_ceiling: str | None = Field(None, description="computed as observed / this ceiling (engine/ceilings.py)")
    from_context: str | None = Field(None, pattern=r"^[a-z_.]+( / [a-z_.]+)?$",
                                     description="read from the snapshot context: 'key' or 'key / key'; "
                                                 "gpu.FIELD / interconnect.FIELD read the hardware catalog")
    controlled_test: bool = Field(False, description="the outcome of a deliberate A/B test (a rollback, a raised cap, "
                                  "a swapped part): its absence counts in full, like a stated fact")
    metrics: list[MetricSource] = []
    findings: list[Finding] = []
    sources: list[str] = []
    zh: Translation | None = None


class Change(Entry):
    """Something that changed before the regression; reported changes are findings `changed_<id>`."""
    id: str
    title: str
    description: str
    leak: Probability = Field(gt=0, lt=1, description="P(this change is reported) when no modelled cause is active")
    zh: Translation | None = None


class Effect(Entry):
    """A causal edge with its noisy-OR strength: P(target | source alone active)."""
    target: str
    strength: Probability = Field(gt=0, lt=1)
    mode: str | None = Field(None, description="signatures only: the mode of the cause this finding belongs to; "
                                                "strength is then P(finding | that mode)")


class Mode(Entry):
    """One way a cause shows (a downtrained link, blocked peer-to-peer): its signatures come together or not at all.

    P(mode | cause on) = strength; a mode's findings belong to this cause alone, so a cause with several modes
    is not penalised for every mode it does not show.
    """
    id: str
    title: str
    strength: Probability = Field(gt=0, lt=1)


class Mechanism(Entry):
    id: str
    title: str
    description: str
    bottlenecks: list[Bottleneck]
    leak: Probability = Field(gt=0, lt=1)
    effects: list[Effect]
    sources: list[str]
    zh: Translation | None = None


class Scope(Entry):
    """Where a root cause can occur. A snapshot whose context contradicts it scales the prior by `outside`.

    Read as an observed parent of the cause: a KV-cache problem does not happen in a training job, an
    RDMA fabric problem not inside one node, tensor-parallel traffic not without tensor parallelism, an
    NVLink fault not on a GPU without NVLink, a GPUDirect RDMA problem not on a cluster without RDMA NICs.
    """
    workloads: list[Literal["inference", "training"]] = ["inference", "training"]
    min_nodes: int = 1
    min_tp: int = 1
    min_gpus: int = Field(1, description="GPUs (or replicas) the job must span: nothing is imbalanced or exchanged on one GPU")
    needs_nvlink: bool = Field(False, description="impossible on a GPU model with neither NVLink nor an NVLink bridge")
    needs_rdma: bool = Field(False, description="impossible when the scale-out interconnect is plain Ethernet (TCP)")
    outside: Probability = Field(0.02, gt=0, lt=1)
    without_before: Probability = Field(1.0, gt=0, description="prior scale when the snapshot has neither a baseline "
                                        "nor a change list: a regression against an earlier state cannot be shown")
    before_from: list[str] = Field([], description="signals whose reading stands in for the before-state this cause "
                                   "needs (an A/B against other software on the same hardware and load)")


class RootCause(Entry):
    id: str
    title: str
    description: str
    bottlenecks: list[Bottleneck] = Field(min_length=1)
    layer: Layer
    prior: Probability = Field(gt=0, lt=1, description="P(this cause is active) in a regression under investigation")
    mechanisms: list[Effect] = Field(min_length=1)
    signatures: list[Effect] = []
    modes: list[Mode] = []
    scope: Scope = Scope()
    localizes_to: EntityKind
    remedies: list[str] = Field(min_length=1)
    sources: list[str] = Field(min_length=1)
    zh: Translation | None = None


class Probe(Entry):
    id: str
    title: str
    command: str
    promql: str | None = None
    tool: str
    cost_min: float = Field(gt=0)
    disruptive: bool
    workloads: list[Literal["inference", "training"]] = ["inference", "training"]
    fills: list[str] = Field(min_length=1)
    zh: Translation | None = None


class Technology(Entry):
    """A technology or an operational action: what it relieves, worsens, cannot fix, and how it fails."""
    id: str
    title: str
    kind: Literal["technology", "action"]
    layer: Layer
    description: str
    relieves: list[Bottleneck] = Field(min_length=1)
    can_worsen: list[Bottleneck] = []
    cannot_fix: list[str] = Field(min_length=1)
    counterexample: str = Field(min_length=10)
    retest: list[str] = Field(min_length=1)
    sources: list[str] = Field(min_length=1)
    zh: Translation | None = None

    @field_validator("cannot_fix")
    @classmethod
    def _no_empty_items(cls, v):
        if any(not s.strip() for s in v):
            raise ValueError("empty item")
        return v


class NamedItem(Entry):
    id: str
    title: str
    description: str
    zh: Translation | None = None


class Classes(Entry):
    bottlenecks: list[NamedItem]
    layers: list[NamedItem]
