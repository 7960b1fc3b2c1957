"""Every flag and engine-config key planner.deploy emits is in the flag table, with a source;
values of flags whose choices the table records are among them."""

from __future__ import annotations

import re

import pytest
from deploy_support import cli_flags, golden

from planner.deploy import ENGINE_FLAGS, FLAG_SOURCES, DeployError, deploy, flag, flags_of, flatten_keys
from planner.deploy.engines import EngineCommand

CHECKPOINT = {"llama": "nvidia/Llama-3.1-70B-Instruct-FP8", "disagg": "nvidia/Llama-3.1-70B-Instruct-FP8",
              "deepseek": "deepseek-ai/DeepSeek-R1"}


def _commands(name: str, engine: str) -> tuple[EngineCommand, ...]:
    s, p = golden(name)
    return deploy(s, engine, result=p, weights=CHECKPOINT[name] if engine == "trtllm" else None).commands


def _check(engine: str, c: EngineCommand) -> None:
    argv = list(c.argv)
    for i, a in enumerate(argv):
        if not a.startswith("--"):
            continue
        spec = ENGINE_FLAGS.get((engine, a))
        assert spec is not None, f"{engine} {a} is emitted but not in the flag table"
        if spec.takes_value:
            assert i + 1 < len(argv) and not argv[i + 1].startswith("--"), f"{a} has no value"
            if spec.choices:
                assert argv[i + 1] in spec.choices, f"{a} {argv[i + 1]} not in {spec.choices}"
    for key, value in flatten_keys(c.config).items():
        spec = ENGINE_FLAGS.get((engine, key))
        assert spec is not None, f"{engine} config key {key} is not in the flag table"
        if spec.choices:
            assert value in spec.choices


@pytest.mark.parametrize("engine", ["vllm", "sglang", "trtllm"])
@pytest.mark.parametrize("name", ["llama", "disagg", "deepseek"])
def test_every_emitted_flag_is_in_the_table(name: str, engine: str) -> None:
    cmds = _commands(name, engine)
    for c in cmds:
        _check(engine, c)
        assert cli_flags(c.argv), "a command with no flags"


def test_the_table_names_a_source_for_every_flag() -> None:
    for (engine, name), spec in ENGINE_FLAGS.items():
        assert spec.source in FLAG_SOURCES, name
        src = FLAG_SOURCES[spec.source]
        assert re.fullmatch(r"[0-9a-f]{40}", src.commit), f"{spec.source}: a commit, not a branch"
        assert src.url.startswith("https://") and src.path and "/" in src.repo
        assert spec.checked_version and spec.meaning
        assert name.startswith("--") or re.fullmatch(r"[a-z_]+(\.[a-z_]+)?", name), name
        assert spec.engine == engine
    assert {f.engine for f in ENGINE_FLAGS.values()} == {"vllm", "sglang", "trtllm", "dynamo"}
    assert len(flags_of("vllm")) >= 12


def test_an_unrecorded_flag_is_never_emitted() -> None:
    with pytest.raises(KeyError, match="not in planner.deploy.flags"):
        flag("vllm", "--max-num-sequences")
    assert flag("vllm", "--max-num-seqs") == "--max-num-seqs"


def _strings(node: object) -> list[str]:
    if isinstance(node, dict):
        return [s for v in node.values() for s in _strings(v)]
    if isinstance(node, list):
        return [s for v in node for s in _strings(v)]
    return [node] if isinstance(node, str) else []


@pytest.mark.parametrize("target", ["kserve", "llm-d", "dynamo"])
@pytest.mark.parametrize("name", ["llama", "disagg", "deepseek"])
def test_every_flag_inside_the_manifests_is_in_the_table(name: str, target: str) -> None:
    s, p = golden(name)
    try:
        d = deploy(s, target, result=p)
    except DeployError as exc:  # a refusal is one line naming why (kserve: disaggregated; old EP meaning)
        assert "\n" not in str(exc) and (name, target) in {("disagg", "kserve"), ("deepseek", "llm-d")}
        return
    engines = {"vllm", "dynamo"} if target == "llm-d" else {s.serving.engine, "dynamo"}
    flags = [x for x in _strings(list(d.objects)) if x.startswith("--")]
    assert flags
    for f in flags:
        assert any((e, f) in ENGINE_FLAGS for e in engines), f"{target}: {f} is not in the flag table"
