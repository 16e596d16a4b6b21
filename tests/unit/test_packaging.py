"""What ``pip install .`` puts in place: the three top-level packages the design names and no
other, metadata that setuptools takes without deprecation warnings, and Python versions that
agree between ``requires-python``, the classifiers and the README."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from packaging.specifiers import SpecifierSet
from setuptools import find_namespace_packages

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
SETUPTOOLS = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"][
    "setuptools"
]


def test_only_the_three_top_level_packages_are_installed() -> None:
    found = find_namespace_packages(str(ROOT), **SETUPTOOLS["packages"]["find"])
    assert {name.split(".")[0] for name in found} == {"consistent", "proxy", "analytics"}
    assert "consistent.demo" in found
    assert not (ROOT / "demo").exists()


def test_the_license_is_an_spdx_expression_with_its_file() -> None:
    assert PROJECT["license"] == "Apache-2.0"
    for pattern in PROJECT["license-files"]:
        assert list(ROOT.glob(pattern)), pattern
    assert not any(c.startswith("License ::") for c in PROJECT["classifiers"])


def test_python_versions_agree() -> None:
    supported = SpecifierSet(PROJECT["requires-python"])
    classified = {
        c.rsplit(" ", 1)[1]
        for c in PROJECT["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    }
    assert classified == {"3.11", "3.12", "3.13"}
    assert all(version in supported for version in classified)
    assert "3.10" not in supported
    assert "3.14" not in supported
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "Python 3.11, 3.12 or 3.13" in readme
    assert f"`requires-python` is `{PROJECT['requires-python']}`" in readme
