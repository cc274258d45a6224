"""Print the vocabulary a blind case writer may use: context keys, GPU and interconnect ids, changes,
signals (unit, kind, entity, definition) and root causes. It leaves out how evidence maps to causes
(findings, strengths, priors), so cases written from it do not echo the KB."""
from pathlib import Path

import yaml

from perfdoctor.symptoms.snapshot import CONTEXT_KEYS

KB = Path(__file__).resolve().parent.parent / "kb"


def main():
    out = ["# perfdoctor vocabulary for case writers", "", "## Context keys", ", ".join(sorted(CONTEXT_KEYS)),
           "workload: inference|training. gpu: as nvidia-smi prints it, or short (H100, A100-80GB, RTX-3090).",
           "disaggregated: true|false (prefill and decode on separate workers), only when the source says so.",
           "rollouts: true when a training job also generates text with a model as part of each step (RL post-training: GRPO, PPO, RLHF or online DPO rollouts, on vLLM, SGLang or HF generate inside the trainer), only when the source says so.",
           "rdma: true when the source says the nodes have InfiniBand, RoCE or EFA adapters (even if NCCL did not use them), false when they are joined only by plain Ethernet/TCP; only when the source says so.",
           "gateway: the gateway, proxy, router, sidecar or load balancer requests pass before the engines (its name, e.g. envoy, nginx, litellm, or true), or false when clients call the engines directly; only when the source says so.",
           "max_num_seqs: the running-batch cap the engine was started with (--max-num-seqs, --max-running-requests, max_batch_size), only when the source gives it.",
           "client_concurrency: requests the clients had in flight in the current state (benchmark concurrency, e.g. --max-concurrency 64, or a stated number of concurrent clients), only when the source gives the number.",
           "model_config: the path of a Hugging Face config.json next to the case (rarely available); put engine flags in description.", ""]
    gpus = yaml.safe_load((KB / "hardware" / "gpus.yaml").read_text())
    out.append("GPU ids in the catalog: " + ", ".join(g["id"] for g in gpus))
    links = yaml.safe_load((KB / "hardware" / "interconnects.yaml").read_text())
    out += ["interconnect ids: " + ", ".join(i["id"] for i in links), "", "## Changes (snapshot.changes)"]
    out += [f"- {c['id']}: {c['description']}" for c in yaml.safe_load((KB / "changes.yaml").read_text())]
    out += ["", "## Signals (baseline/current keys; per-entity values are mappings {gpu0: v, ...})"]
    for path in sorted((KB / "signals").glob("*.yaml")):
        if path.stem in ("ceilings", "context"):
            continue
        out.append(f"\n### {path.stem}")
        for s in yaml.safe_load(path.read_text()):
            values = f" values={s['values']}" if s.get("values") else ""
            out.append(f"- {s['id']} [{s['unit']}, {s['kind']}, per {s['entity']}]{values}: {s['definition']}")
    out += ["", "## Root causes (expected.root_cause / also_acceptable)"]
    for path in sorted((KB / "root_causes").glob("*.yaml")):
        rc = yaml.safe_load(path.read_text())
        out.append(f"- {rc['id']}: {rc['title']}. {rc['description']}")
    print("\n".join(out))


if __name__ == "__main__":
    main()
