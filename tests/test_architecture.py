"""The package's folders are its layers: a module imports only its own layer or lower ones,
no import cycle, the library never loads click or rich, pyspark only for --engine spark, and
docs/architecture.md's "Layout of the code" names every module."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "mqtool"

# lowest first; a module may import its own layer or any lower one
LAYERS = ["errors", "formats", "storage", "native", "engine", "broker", "forensics", "pipeline", "cli"]
ROOT_MODULES = {  # modules at the package's top, by the layer they belong to
    "mqtool": "errors", "mqtool.errors": "errors", "mqtool.__main__": "cli",
    "mqtool.store": "engine", "mqtool.sparksource": "pipeline",   # the documented names, re-exported
}
LIBRARY = ("storage", "native", "engine", "broker", "forensics", "pipeline")


def module_files() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = module_files()


def layer_of(name: str) -> str:
    if name in ROOT_MODULES:
        return ROOT_MODULES[name]
    top = name.split(".")[1]
    return "cli" if top == "commands" else top


def imports_of(name: str, path: Path) -> set[str]:
    """Every mqtool module `name` imports, at the top or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            # `from pkg import mod` imports pkg.mod; `from mod import name` imports mod
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name and target.startswith("mqtool"):
                found.add(target)
    found.discard("mqtool")   # the package itself (its __init__ holds only the version)
    return found


GRAPH = {name: imports_of(name, path) for name, path in MODULES.items()}


def test_every_module_is_in_a_known_layer():
    assert {layer_of(name) for name in MODULES} <= set(LAYERS)


def test_no_module_imports_a_higher_layer():
    upward = [f"{name} ({layer_of(name)}) imports {target} ({layer_of(target)})"
              for name, targets in GRAPH.items() for target in sorted(targets)
              if LAYERS.index(layer_of(target)) > LAYERS.index(layer_of(name))]
    assert upward == []


def test_no_import_cycle():
    state: dict[str, int] = {}
    cycles = []

    def visit(name, trail):
        state[name] = 1
        for target in sorted(GRAPH[name]):
            if state.get(target) == 1:
                cycles.append(trail[trail.index(target):] + [target])
            elif target not in state:
                visit(target, trail + [target])
        state[name] = 2

    for name in sorted(GRAPH):
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_the_graph_sees_imports():
    """The checks above would pass on an empty graph: make sure they read real edges."""
    assert "mqtool.storage.mappedfile" in GRAPH["mqtool.storage.commitlog"]
    assert "mqtool.engine.store" in GRAPH["mqtool.cli.requires"]   # imported where used: the graph sees it
    assert "mqtool.broker.ingest" in GRAPH["mqtool.commands.append"]


def test_only_the_cli_layer_imports_click_or_rich():
    offenders = []
    for name, path in MODULES.items():
        if layer_of(name) == "cli":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{name}: {n}" for n in names if n.split(".")[0] in ("click", "rich")]
    assert offenders == []


SPARK = "mqtool.pipeline.spark"     # the only package that imports pyspark (and what re-exports it)


def _is_spark(name: str) -> bool:
    return name.startswith(SPARK + ".") or name == "mqtool.sparksource"


def test_only_the_spark_package_imports_pyspark():
    importers = sorted(name for name, path in MODULES.items()
                       if re.search(r"^\s*(from|import) pyspark", path.read_text(encoding="utf-8"), re.M))
    assert importers and all(name.startswith(SPARK + ".") for name in importers), importers
    outside = sorted(f"{name} imports {target}" for name, targets in GRAPH.items() if not _is_spark(name)
                     for target in targets if _is_spark(target))
    assert outside == []     # open_engine names the Spark engine, and loads it only for --engine spark


def test_the_library_loads_neither_click_nor_rich():
    library = [name for name in MODULES if layer_of(name) in LIBRARY and not _is_spark(name)]
    code = ("import importlib, sys\n"
            f"for name in {library!r}: importlib.import_module(name)\n"
            "print(sorted(m for m in ('click', 'rich', 'pyspark') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=REPO)
    assert out.stdout.strip() == "[]"


def test_every_package_says_what_lives_there():
    packages = [path for path in PACKAGE.rglob("__init__.py")]
    assert len(packages) >= len(LAYERS)
    undocumented = [str(p.relative_to(REPO)) for p in packages if not ast.get_docstring(ast.parse(p.read_text()))]
    assert undocumented == []


def _layout_section() -> str:
    text = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    start = text.index("## Layout of the code")
    return text[start: text.index("\n## ", start + 1)]


def test_readme_layout_names_every_module():
    """Each folder has a bullet starting with `mqtool/<folder>/`; it names each module of the folder."""
    bullets = {}
    for bullet in re.split(r"\n- ", _layout_section()):
        m = re.match(r"`mqtool/([a-z_/]*)`", bullet)
        if m:
            bullets[m.group(1).rstrip("/")] = bullet
    missing = []
    for name, path in MODULES.items():
        folder = str(path.parent.relative_to(PACKAGE)).replace(".", "")
        stem = path.stem
        if stem == "__init__":
            continue
        bullet = bullets.get(folder) or ""
        if f"`{stem}`" not in bullet and f"`{stem}.py`" not in bullet:
            missing.append(f"{path.relative_to(REPO)} (in the bullet for mqtool/{folder}/)")
    assert missing == []


BLOCK_PYSPARK = """
import importlib.abc, sys
class _NoPyspark(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "pyspark" or name.startswith("pyspark."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, _NoPyspark())
from mqtool.cli.main import main
sys.argv = ["mqtool"] + sys.argv[1:]
main()
"""


def test_export_stats_and_local_engine_work_without_pyspark(tmp_path, extracted):
    store = extracted("basic")

    def run(*args):
        return subprocess.run([sys.executable, "-c", BLOCK_PYSPARK, *args], capture_output=True, text=True,
                              cwd=tmp_path, timeout=300)

    out = tmp_path / "out"
    exported = run("export", str(store), "--format", "parquet", "--out", str(out))
    assert exported.returncode == 0, exported.stderr
    assert list(out.rglob("*.parquet"))
    stats = run("stats", str(store), "--json")
    assert stats.returncode == 0, stats.stderr
    assert stats.stdout.strip() and all(line.startswith("{") for line in stats.stdout.splitlines())
    spark = run("stats", str(store), "--engine", "spark")
    assert spark.returncode == 2 and "pyspark" in spark.stderr and "Traceback" not in spark.stderr
