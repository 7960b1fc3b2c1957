"""Read the decode running-batch cap of InferenceX's disaggregated TensorRT-LLM runs
from InferenceX's own sweep configs, into planner/validate/inferencex_recipes.json.

InferenceX names each Dynamo + TensorRT-LLM point's srt-slurm recipe in its sweep
config (``CONFIG_FILE=recipes/trtllm/<gpu>-<precision>/<isl>k<osl>k/<mtp|stp>/
ctx<P>_gen<D>_<dep|tep|tp><n>_batch<B>_eplb<E>_mtp<k>.yaml``); ``batch<B>`` is the
decode worker's ``max_batch_size`` (per attention-DP rank with DP attention), which
its published rows do not carry.  A closed loop of more clients than the decode pool
holds queues the rest before their first token, so TTFT needs it.

    python bench/inferencex_recipes.py --repo PATH_TO_INFERENCEX_GIT [--srt-slurm PATH_TO_SRT_SLURM_GIT]
        [--since 2025-11-01 --until 2026-05-15]

reads every version of the config committed in the window (the runs in
``../shared/data/inferencex_dsr1.json`` date from 2025-12 to 2026-06) and writes
one entry per search-space point; a point whose batch differs between versions is
left out (none does in the shipped window).
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import yaml

CONFIG_PATHS = ("configs/nvidia-master.yaml", ".github/configs/nvidia-master.yaml",
                "configs/deprecated/nvidia-1k1k-master.yaml")
OUT = Path(__file__).resolve().parent.parent / "planner" / "validate" / "inferencex_recipes.json"
_RECIPE = re.compile(r"(recipes/\S+?_batch(\d+)_\S*?\.yaml)")


def _git(repo: str, *args: str) -> str:
    return subprocess.run(["git", "--git-dir", repo, *args], check=True, capture_output=True, text=True).stdout


def points(cfg: dict) -> list[tuple[tuple, int, str]]:
    """(key, batch per rank, recipe path) for each disaggregated DeepSeek-R1 point with a named recipe."""
    out = []
    for name, c in (cfg or {}).items():
        if not isinstance(c, dict) or not name.startswith("dsr1") or not c.get("disagg"):
            continue
        gpu = name.split("-")[2]
        # the sweep's schema: ``scenarios: fixed-seq-len:`` (2026), ``seq-len-configs:`` before
        for sc in (c.get("scenarios") or {}).get("fixed-seq-len") or c.get("seq-len-configs") or []:
            for s in sc.get("search-space", []):
                p, d = s["prefill"], s["decode"]
                text = " ".join(str(a) for a in (p.get("additional-settings") or []) + (d.get("additional-settings") or []))
                m = _RECIPE.search(text)
                if not m:
                    continue
                layout = (p["num-worker"], p["tp"], p["ep"], bool(p["dp-attn"]),
                          d["num-worker"], d["tp"], d["ep"], bool(d["dp-attn"]))
                for conc in s.get("conc-list") or []:
                    key = (gpu, c.get("precision"), c.get("framework"), sc["isl"], sc["osl"],
                           s.get("spec-decoding", "none"), *layout, conc)
                    out.append((key, int(m.group(2)), m.group(1)))
    return out


SRT_REF = "sa-submission-q2-2026"  # the srt-slurm branch InferenceX's sweep config links its recipes on


def prefill_tokens(srt_repo: str | None, recipe: str, ref: str = SRT_REF) -> int | None:
    """The context (prefill) servers' ``max_num_tokens`` in srt-slurm's copy of ``recipe``
    (``ref``, else its main branch): a prefill pass's token budget on each attention-DP rank."""
    if srt_repo is None:
        return None
    for at in (ref, "HEAD"):
        try:
            text = _git(srt_repo, "show", f"{at}:{recipe}")
        except subprocess.CalledProcessError:
            continue
        prefill = ((((yaml.safe_load(text) or {}).get("backend") or {}).get("trtllm_config") or {}).get("prefill")
                   or {})
        value = prefill.get("max_num_tokens")
        return int(value) if isinstance(value, int) and value > 0 else None
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", required=True, help="InferenceX git directory (a bare mirror works)")
    ap.add_argument("--since", default="2025-11-01")
    ap.add_argument("--until", default="2026-05-15")
    ap.add_argument("--srt-slurm", default=None,
                    help="NVIDIA/srt-slurm git directory: each recipe's prefill max_num_tokens too")
    args = ap.parse_args(argv)
    commits = _git(args.repo, "log", "--format=%H", f"--since={args.since}", f"--until={args.until}", "--",
                   *CONFIG_PATHS).split()
    seen: dict[tuple, set[tuple[int, str]]] = {}
    for commit in commits:
        for path in CONFIG_PATHS:
            try:
                text = _git(args.repo, "show", f"{commit}:{path}")
            except subprocess.CalledProcessError:
                continue
            for key, batch, recipe in points(yaml.safe_load(text)):
                seen.setdefault(key, set()).add((batch, recipe))
    groups: dict[tuple, list[int]] = {}
    for key, found in seen.items():
        if len({b for b, _ in found}) != 1:
            continue  # the recipe changed its batch between versions: not knowable from the row
        batch, recipe = min(found)
        groups.setdefault((*key[:-1], batch, recipe), []).append(key[-1])
    recipes = []
    for k, concs in sorted(groups.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
        gpu, prec, fw, isl, osl, spec, pw, ptp, pep, pdp, dw, dtp, dep, ddp, batch, recipe = k
        recipes.append({"gpu": gpu, "precision": prec, "framework": fw, "isl": isl, "osl": osl, "speculative": spec,
                        "prefill": {"workers": pw, "tp": ptp, "ep": pep, "dp_attention": pdp},
                        "decode": {"workers": dw, "tp": dtp, "ep": dep, "dp_attention": ddp},
                        "concurrency": sorted(concs), "decode_batch_per_rank": batch,
                        **({"prefill_tokens_per_rank": t} if (t := prefill_tokens(args.srt_slurm, recipe)) else {}),
                        "recipe": recipe})
    doc = {"about": ("Decode max_batch_size (per attention-DP rank) of InferenceX's Dynamo + TensorRT-LLM "
                     "disaggregated DeepSeek-R1 points, read from the recipe each point names in InferenceX's "
                     "sweep config, and the recipe's prefill max_num_tokens (per attention-DP rank) from "
                     "srt-slurm (bench/inferencex_recipes.py)."),
           "source": (f"https://github.com/SemiAnalysisAI/InferenceX {', '.join(CONFIG_PATHS)}: every version "
                      f"committed {args.since}..{args.until} ({len(commits)} commits)"
                      + (f"; https://github.com/NVIDIA/srt-slurm recipes at {SRT_REF}" if args.srt_slurm else "")),
           "recipes": recipes}
    lines = ",\n  ".join(json.dumps(r) for r in recipes)  # one point a line: reviewable diffs
    head = json.dumps({k: v for k, v in doc.items() if k != "recipes"}, indent=1)[:-2]
    OUT.write_text(f'{head},\n "recipes": [\n  {lines}\n ]\n}}\n')
    json.loads(OUT.read_text())
    print(f"{len(recipes)} points ({sum(len(r['concurrency']) for r in recipes)} concurrencies) -> {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
