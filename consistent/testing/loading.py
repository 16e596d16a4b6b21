"""Import a script that is not part of a package (an example app, a benchmark runner) so a
test can call its functions."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

__all__ = ["load_module"]


def load_module(name: str, path: Path, *, with_siblings: bool = False) -> ModuleType:
    """Execute the file at ``path`` as the module ``name`` (registered in :data:`sys.modules`,
    so dataclasses and pickling inside it work) and return it.  ``with_siblings`` puts the
    file's directory first on :data:`sys.path` while it runs, as running the script does, so
    that its imports of modules beside it work."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path} as a module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    directory = str(path.resolve().parent)
    if with_siblings:
        sys.path.insert(0, directory)
    try:
        spec.loader.exec_module(module)
    finally:
        if with_siblings:
            sys.path.remove(directory)
    return module
