"""`pip install .` from a clone: every console script pyproject.toml
declares names a function that exists, in a package setuptools finds, and
the bare-metal runner the README documents is one of them."""
import importlib
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text())


def test_console_scripts_resolve():
    scripts = PROJECT["project"]["scripts"]
    for name, target in scripts.items():
        module, _, func = target.partition(":")
        assert callable(getattr(importlib.import_module(module), func)), name
        # setuptools packages what is under tools/ and named schedsteal*
        assert (REPO / "tools" / module.replace(".", "/")).with_suffix(".py").is_file(), name
    assert scripts["abbench"] == "schedsteal.abbench:main"


def test_guest_half_is_packaged():
    find = PROJECT["tool"]["setuptools"]["packages"]["find"]
    assert find == {"where": ["tools"], "include": ["schedsteal*"]}
    assert (REPO / "tools" / "schedsteal" / "guest" / "__init__.py").is_file()
    # standard library only: a bare machine needs nothing but Python
    assert PROJECT["project"]["dependencies"] == []


def test_readme_documents_the_bare_metal_runner():
    readme = (REPO / "README.md").read_text()
    section = readme.split("## Bare metal", 1)[1].split("\n## ", 1)[0]
    assert "pip install" in section and "abbench run" in section
    assert "abbench report" in section
