"""Shared test fixtures: the real RocketMQ stores in ../shared/fixtures, used through copies.

The fixtures directory is found through $MQTOOL_FIXTURES, else ../shared/fixtures
next to the checkout.  Tests never touch it in place: stores are extracted from
their tarballs into temporary directories.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import tarfile
from pathlib import Path

import pytest

from mqtool.cli import main as cli
from mqtool.cli import output

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(os.environ.get("MQTOOL_FIXTURES", REPO.parent / "shared" / "fixtures"))

ALL_FIXTURES = {
    "basic": "rocketmq-4.9.8/basic",
    "features": "rocketmq-4.9.8/features",
    "multifile": "rocketmq-4.9.8/multifile",
    "crash": "rocketmq-4.9.8/crash",
    "flipped-body-byte": "rocketmq-4.9.8/corrupt-tail/flipped-body-byte",
    "garbage-tail": "rocketmq-4.9.8/corrupt-tail/garbage-tail",
    "basic5": "rocketmq-5.3.3/basic5",
    "timer5": "rocketmq-5.3.3/timer5",
    "journey5": "rocketmq-5.3.3/journey5",
}
# 5.3.3 stores with features switched on (README there): read by their own tests
FEATURE_FIXTURES = {
    "batchcq5": "rocketmq-5.3.3/batchcq5",
    "lmq5": "rocketmq-5.3.3/lmq5",
    "cqext5": "rocketmq-5.3.3/cqext5",
}
UNDAMAGED = ["basic", "features", "multifile", "crash", "basic5"]
DAMAGED = ["flipped-body-byte", "garbage-tail"]
# DLedger mode (5.3.3): dledger3's archive holds three nodes' stores, each with its own expected read
DLEDGER_FIXTURES = {
    "dledger1": ("rocketmq-5.3.3-dledger/dledger1", "store", "expected-read.jsonl"),
    "dledger3-n0": ("rocketmq-5.3.3-dledger/dledger3", "store-n0", "expected-read-n0.jsonl"),
    "dledger3-n1": ("rocketmq-5.3.3-dledger/dledger3", "store-n1", "expected-read-n1.jsonl"),
    "dledger3-n2": ("rocketmq-5.3.3-dledger/dledger3", "store-n2", "expected-read-n2.jsonl"),
    # a plain 5.3.3 store switched to DLedger mode: the old commitlog below dividedCommitlogOffset
    "mixed5": ("rocketmq-5.3.3-dledger/mixed5", "store", "expected-read.jsonl"),
}
ALL_FIXTURES.update({name: where for name, (where, _, _) in DLEDGER_FIXTURES.items()})
DLEDGER = list(DLEDGER_FIXTURES)
MIXED = ["mixed5"]      # in DLEDGER too (writers that append refuse it); no expected-query.jsonl


def fixture_dir(name: str) -> Path:
    path = FIXTURES / {**ALL_FIXTURES, **FEATURE_FIXTURES}[name]
    if not path.is_dir():
        # a skip, not a failure: a checkout without ../shared runs what needs no fixture
        pytest.skip(f"fixture {path} is missing: set MQTOOL_FIXTURES to the shared fixtures directory",
                    allow_module_level=True)
    return path


def load_jsonl(path: Path) -> list[dict]:
    if not path.exists():
        gz = path.with_name(path.name + ".gz")
        path = gz
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def expected_read(name: str) -> list[dict]:
    expected = DLEDGER_FIXTURES[name][2] if name in DLEDGER_FIXTURES else "expected-read.jsonl"
    return load_jsonl(fixture_dir(name) / expected)


@pytest.fixture(scope="session")
def extracted(tmp_path_factory):
    """name -> a store extracted once per session; treat as read-only."""
    root = tmp_path_factory.mktemp("fixtures")
    cache: dict[str, Path] = {}

    def get(name: str) -> Path:
        if name not in cache:
            # one extraction per archive: dledger3's three nodes share theirs (named as the archive's folder)
            target = root / (Path(ALL_FIXTURES[name]).name if name in DLEDGER_FIXTURES else name)
            if not target.exists():
                target.mkdir()
                with tarfile.open(fixture_dir(name) / "store.tar.gz") as tar:
                    tar.extractall(target, filter="tar")
            cache[name] = target / (DLEDGER_FIXTURES[name][1] if name in DLEDGER_FIXTURES else "store")
        return cache[name]

    return get


def sparse_copy(src, dst, **_):
    """shutil.copy2, keeping holes: a DLedger index file is 160 MiB of mostly holes."""
    if os.path.getsize(src) < (1 << 24):
        return shutil.copy2(src, dst)
    subprocess.run(["cp", "--sparse=always", "--preserve=mode,timestamps", str(src), str(dst)], check=True)
    return dst


@pytest.fixture
def store_copy(extracted, tmp_path):
    """name -> a private copy of a fixture store that the test may change."""

    def copy(name: str) -> Path:
        target = tmp_path / name
        shutil.copytree(extracted(name), target, symlinks=True, copy_function=sparse_copy)
        return target

    return copy


class Result:
    def __init__(self, code: int, out: str, err: str):
        self.code = code
        self.out = out
        self.err = err

    def json_lines(self) -> list[dict]:
        return [json.loads(line) for line in self.out.splitlines() if line.strip()]


@pytest.fixture
def run_cli(capsys):
    """Run mqtool in-process; returns (exit code, stdout, stderr)."""

    def run(*args) -> Result:
        output.reset_consoles()
        capsys.readouterr()
        code = cli.run([str(a) for a in args])
        captured = capsys.readouterr()
        output.reset_consoles()
        return Result(code, captured.out, captured.err)

    return run
