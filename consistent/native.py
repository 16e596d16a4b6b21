"""The modules compiled to C extensions with mypyc, and the check that each matches its source.

The proxy's per-query path (framing, the response relay, the session's command handling) is
ordinary typed Python; ``make`` compiles it with mypyc (``scripts/compile.py``) into C
extensions that CPython imports in place of the ``.py`` files beside them.  Nothing else
changes: the same source runs interpreted when no compiled module is there, as after
``make clean-native`` or on a machine without a C compiler.

A compiled module that is older than its source is stale: importing it would run code that
no longer exists.  :func:`require_fresh`, called by each package that has compiled modules,
refuses that with :class:`StaleNativeModule`, which says how to rebuild.
"""

from __future__ import annotations

import importlib.machinery
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Final

from consistent.errors import InterfaceError

__all__ = [
    "COMPILED",
    "GROUP",
    "StaleNativeModule",
    "compiled_files",
    "is_compiled",
    "require_fresh",
    "source_path",
    "stale_modules",
]

#: What ``scripts/compile.py`` compiles, as module names.  Every module a compiled module
#: calls on the per-query path belongs here; modules that subclass compiled classes must be
#: compiled too (an interpreted class cannot inherit from a compiled one).
COMPILED: Final[tuple[str, ...]] = (
    "proxy.stream",
    "proxy.relay",
    "proxy.statements",
    "proxy.intercept",
    "proxy.backends",
    "proxy.sessionbase",
    "proxy.clientio",
    "proxy.slowpath",
    "proxy.session",
    "proxy.server",
)

#: The compiled modules' group: mypyc puts their shared code in one library, the module
#: ``proxy._native__mypyc``, inside the package so that it is found wherever ``proxy`` is.
GROUP: Final = "proxy._native"
_ROOT: Final = Path(__file__).resolve().parents[1]


class StaleNativeModule(InterfaceError):
    """A compiled module is older than its source: rebuild it, or remove it."""


def source_path(root: Path, module: str) -> Path:
    """The ``.py`` file of ``module`` under ``root``."""
    return root.joinpath(*module.split(".")).with_suffix(".py")


def _extensions(root: Path, module: str) -> Iterator[Path]:
    source = source_path(root, module)
    for suffix in importlib.machinery.EXTENSION_SUFFIXES:
        candidate = source.with_name(source.stem + suffix)
        if candidate.exists():
            yield candidate


def compiled_files(root: Path) -> list[Path]:
    """Every compiled module of :data:`COMPILED` under ``root``, and mypyc's runtime."""
    return [path for module in (*COMPILED, GROUP + "__mypyc") for path in _extensions(root, module)]


def stale_modules(root: Path, package: str) -> list[str]:
    """The modules of ``package`` whose compiled file is older than their source."""
    stale = []
    for module in COMPILED:
        if not module.startswith(package + "."):
            continue
        source = source_path(root, module)
        for extension in _extensions(root, module):
            if source.stat().st_mtime > extension.stat().st_mtime:
                stale.append(module)
    return stale


def require_fresh(package: str, root: Path = _ROOT) -> None:
    """Raise :class:`StaleNativeModule` if a compiled module of ``package`` is stale."""
    stale = stale_modules(root, package)
    if stale:
        raise StaleNativeModule(
            f"compiled module(s) older than their source: {', '.join(stale)}; rebuild them "
            "with `make native` (or remove them with `make clean-native` to run from source)"
        )


def is_compiled(module: ModuleType) -> bool:
    """Whether ``module`` was imported from a compiled extension rather than its source."""
    file = getattr(module, "__file__", None) or ""
    return file.endswith(tuple(importlib.machinery.EXTENSION_SUFFIXES))
