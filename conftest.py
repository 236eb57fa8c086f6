"""Let a plain `pytest` find what the tests need.

./bootstrap installs mqtool and its dependencies into .venv, and the README's test command
runs that interpreter.  A `pytest` started from another Python of the same version gets the
venv's packages added to its path, and the processes the tests start (sys.executable) run the
venv's interpreter; any other Python is told how to run the suite."""

from __future__ import annotations

import importlib.util
import site
import sys
from pathlib import Path

import pytest

_VENV = Path(__file__).resolve().parent / ".venv"

if importlib.util.find_spec("construct") is None:
    packages = _VENV / "lib" / f"python{sys.version_info[0]}.{sys.version_info[1]}" / "site-packages"
    if packages.is_dir():
        site.addsitedir(str(packages))
        sys.executable = str(_VENV / "bin" / "python")
    else:
        pytest.exit("mqtool's dependencies are not installed for this Python: run ./bootstrap, then "
                    ".venv/bin/python -m pytest -q", returncode=4)
