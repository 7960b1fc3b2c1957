"""Every module's __all__ names real objects, and planner re-exports them."""

from __future__ import annotations

import importlib
import pkgutil

import planner


def test_package_exports_exist() -> None:
    for name in planner.__all__:
        assert hasattr(planner, name), name


def test_every_module_declares_all() -> None:
    for info in pkgutil.walk_packages(planner.__path__, "planner."):
        if info.name.endswith("__main__"):
            continue
        module = importlib.import_module(info.name)
        assert hasattr(module, "__all__"), info.name
        for name in module.__all__:
            assert hasattr(module, name), f"{info.name}.{name}"


def test_core_never_imports_streamlit() -> None:
    import re
    from pathlib import Path

    root = Path(planner.__file__).parent
    offenders = [str(p) for p in root.rglob("*.py")
                 if re.search(r"^\s*(import|from)\s+streamlit", p.read_text(), re.M)]
    assert offenders == []
