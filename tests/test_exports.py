"""The public namespace is exactly ``__all__``: at the top and in every sub-package."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
from pathlib import Path
from types import ModuleType

import pytest

import planner

PACKAGES = sorted(info.name for info in pkgutil.walk_packages(planner.__path__, "planner.") if info.ispkg)
MODULES = sorted(info.name for info in pkgutil.walk_packages(planner.__path__, "planner.")
                 if not info.ispkg and not info.name.endswith("__main__"))


def _public_objects(module: ModuleType) -> set[str]:
    """Names bound in the module that are not private, not sub-modules and not ``__future__`` flags."""
    return {name for name, value in vars(module).items()
            if not name.startswith("_") and not inspect.ismodule(value) and name != "annotations"}


def test_planner_all_is_the_public_namespace() -> None:
    assert len(planner.__all__) == len(set(planner.__all__)), "duplicates in planner.__all__"
    listed_modules = {n for n in planner.__all__ if inspect.ismodule(getattr(planner, n, None))}
    assert listed_modules == {"views"}  # the one sub-package re-exported as a name
    assert set(planner.__all__) - listed_modules == _public_objects(planner)


@pytest.mark.parametrize("name", ["planner", *PACKAGES, *MODULES])
def test_every_module_declares_all_and_it_names_real_objects(name: str) -> None:
    module = importlib.import_module(name)
    assert hasattr(module, "__all__"), name
    assert len(module.__all__) == len(set(module.__all__)), f"duplicates in {name}.__all__"
    missing = [n for n in module.__all__ if not hasattr(module, n)]
    assert missing == [], f"{name}.__all__ names what it lacks"


@pytest.mark.parametrize("name", PACKAGES)
def test_subpackage_all_is_its_public_namespace_and_reexports_its_modules(name: str) -> None:
    package = importlib.import_module(name)
    assert set(package.__all__) == _public_objects(package), name
    if name == "planner.cli":
        # Imported by nothing but ``planner.__main__``: its one name is ``main``; its subcommand
        # modules each define ``register`` (the same name), so they cannot share one namespace.
        assert package.__all__ == ["main"]
        return
    for info in pkgutil.iter_modules(package.__path__, name + "."):
        module = importlib.import_module(info.name)
        not_reexported = sorted(set(module.__all__) - set(package.__all__))
        assert not_reexported == [], f"{name} does not re-export {info.name}: {not_reexported}"
        for n in module.__all__:
            assert getattr(package, n) is getattr(module, n), f"{name}.{n} is not {info.name}.{n}"


def test_core_never_imports_streamlit() -> None:
    root = Path(planner.__file__).parent
    offenders = [str(p) for p in root.rglob("*.py")
                 if re.search(r"^\s*(import|from)\s+streamlit", p.read_text(), re.M)]
    assert offenders == []
