"""The package as a user gets it: a wheel built from this checkout, installed into a new venv in a
temporary directory, runs verify-crc with an empty HOME and a read-only package directory and
compiles nothing (no numba cache is written anywhere), with the kernels built ahead of time.

The wheel's build reuses the kernels and the jar this checkout's editable install built from the
same sources (setup.py), so the test costs a build environment, not a compile; the new venv
sees this venv's dependencies through a .pth file instead of installing them again."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from mqtool.native import aot
from mqtool.pipeline.spark import jvmreader

REPO = Path(__file__).resolve().parent.parent


def _read_only(root: Path) -> None:
    for path in [root, *root.rglob("*")]:
        mode = path.stat().st_mode
        path.chmod(mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def test_the_wheel_runs_verify_crc_without_compiling_anything(tmp_path, extracted):
    dist = tmp_path / "dist"
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(dist), str(REPO)],
                           capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = dist.glob("mqtool-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
    for family in aot.FAMILIES:
        assert any(n.startswith(f"mqtool/native/_aot_{family}.") and n.endswith(".so") for n in names), family
    assert "mqtool/native/_aot.json" in names
    if jvmreader.javac() is not None:
        assert f"mqtool/pipeline/spark/jvm/{jvmreader.shipped(jvmreader.spark_jars()).name}" in names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")    # numpy, numba... from here
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site),
                    str(wheel)], check=True)
    package = site / "mqtool"
    _read_only(package)
    home = tmp_path / "home"
    home.mkdir()
    temp = tmp_path / "temp"
    temp.mkdir()
    env = {k: v for k, v in os.environ.items()
           if k not in ("XDG_CACHE_HOME", "NUMBA_CACHE_DIR", "PYTHONPATH", "MQTOOL_JIT", "VIRTUAL_ENV")}
    env.update(HOME=str(home), TMPDIR=str(temp))
    try:
        where = subprocess.run([str(python), "-c", "import mqtool, mqtool.native.fastscan as f, mqtool.native.aot as a; "
                                "print(mqtool.__file__, a.available(), a.adopted(f.scan_records))"],
                               env=env, cwd=tmp_path, capture_output=True, text=True, check=True).stdout.split()
        assert where == [str(package / "__init__.py"), "True", "True"]
        run = subprocess.run([str(python), "-m", "mqtool", "verify-crc", str(extracted("basic")), "--json"],
                             env=env, cwd=tmp_path, capture_output=True, text=True)
        assert run.returncode == 0, run.stderr
        summary = json.loads(run.stdout.splitlines()[-1])
        assert summary["problems"] == 0 and summary["records"] > 0
        compiled = [p for p in tmp_path.rglob("*") if p.suffix in (".nbi", ".nbc")]
        assert compiled == [], compiled
    finally:
        for path in [package, *package.rglob("*")]:
            path.chmod(path.stat().st_mode | stat.S_IWUSR)
