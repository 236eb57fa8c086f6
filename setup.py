"""The build steps setuptools cannot be told in pyproject.toml: the compiled parts, built with the
package (a wheel, a source install or an editable install) so that nothing compiles at run time.

- the numba kernels, ahead of time with numba.pycc: one extension module per kernel family
  (mqtool/native/aot.py says which kernels, from which sources), built two or more at once;
- the JVM reader's jar (mqtool/pipeline/spark/jvmreader.py), where a JDK is found: package data.

MQTOOL_AOT=0 builds neither kernels (they are then compiled at first use, into numba's cache);
MQTOOL_AOT_CPU names the CPU the kernels are built for ("" by default: the architecture's
generic one, which runs on any machine of it; "host" for the building machine's own).
"""

import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, ROOT)
from mqtool.native.aot import FAMILIES  # noqa: E402 - stdlib, numpy and isal only at import (no numba)


def _current_in_tree() -> bool:
    """Whether the source tree holds modules built from its sources as they are, by this numba for
    this CPU (an editable install's): a wheel built from the tree then reuses them."""
    from importlib.metadata import version

    from mqtool.native import aot

    try:
        with open(os.path.join(ROOT, "mqtool", "native", "_aot.json")) as f:
            stamp = json.load(f)
    except (OSError, ValueError):
        return False
    return stamp == aot.stamp(ROOT, version("numba"), os.environ.get("MQTOOL_AOT_CPU", ""))


class Kernels(Extension):
    """A kernel family's module, made by numba.pycc rather than a C compiler's sources."""

    def __init__(self, family):
        super().__init__(f"mqtool.native._aot_{family}", sources=[])
        self.family = family


class BuildCompiled(build_ext):
    def build_extensions(self):
        self._extras = []      # what is built besides the modules: the stamp, the jar
        kernels = [ext for ext in self.extensions if isinstance(ext, Kernels)]
        others = [ext for ext in self.extensions if not isinstance(ext, Kernels)]
        for ext in others:
            self.build_extension(ext)
        jobs = max(1, min(len(kernels), os.cpu_count() or 1))
        with tempfile.TemporaryDirectory() as cache, ThreadPoolExecutor(jobs + 1) as pool:
            env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
                       NUMBA_CACHE_DIR=cache, PYTHONWARNINGS="ignore")
            jar = pool.submit(self._jar)
            done = list(pool.map(lambda ext: self._kernels(ext, env), kernels))
            jar.result()
        if kernels and all(done):
            from mqtool.native import aot
            folder = os.path.dirname(self.get_ext_fullpath(kernels[0].name))
            from importlib.metadata import version
            with open(os.path.join(folder, "_aot.json"), "w") as f:
                json.dump(aot.stamp(ROOT, version("numba"), os.environ.get("MQTOOL_AOT_CPU", "")), f)
            self._extras.append(os.path.join(folder, "_aot.json"))

    def _kernels(self, ext, env) -> bool:
        started = time.perf_counter()
        target = self.get_ext_fullpath(ext.name)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        source_tree = os.path.join(ROOT, "mqtool", "native", os.path.basename(target))
        if source_tree != target and os.path.isfile(source_tree) and _current_in_tree():
            self.copy_file(source_tree, target)   # built in place from these very sources: reused
            return True
        with tempfile.TemporaryDirectory() as out:
            code = ("import sys; from mqtool.native import aot; "
                    f"print(aot.build({ext.family!r}, sys.argv[1], {os.environ.get('MQTOOL_AOT_CPU', '')!r}))")
            done = subprocess.run([sys.executable, "-c", code, out], env=env, cwd=ROOT, capture_output=True, text=True)
            if done.returncode != 0:
                sys.stderr.write(done.stdout + done.stderr)
                raise RuntimeError(f"building the {ext.family} kernels failed")
            os.replace(done.stdout.strip().splitlines()[-1], target)
        print(f"mqtool: built the {ext.family} kernels in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        return True

    def _jar(self):
        from mqtool.pipeline.spark import jvmreader

        if os.environ.get("MQTOOL_BUILD_JAR", "1") == "0":
            return None
        built, why = jvmreader.build_shipped(self._package_dir("mqtool.pipeline.spark"),
                                             reuse=os.path.join(ROOT, "mqtool", "pipeline", "spark"))
        if built is None:
            print(f"mqtool: the JVM reader's jar is not built: {why}", file=sys.stderr)
        else:
            self._extras.append(str(built))
        return built

    def copy_extensions_to_source(self):
        """An in-place build (an editable install): the stamp and the jar go next to the modules."""
        super().copy_extensions_to_source()
        build_py = self.get_finalized_command("build_py")
        for built in getattr(self, "_extras", []):
            rel = os.path.relpath(built, self.build_lib)
            package = os.path.dirname(os.path.dirname(rel) if rel.endswith(".jar") else rel).replace(os.sep, ".")
            folder = build_py.get_package_dir(package)
            if rel.endswith(".jar"):
                folder = os.path.join(folder, "jvm")
                for old in os.listdir(folder) if os.path.isdir(folder) else []:
                    if old.startswith("mqtool-spark-") and old.endswith(".jar"):
                        os.unlink(os.path.join(folder, old))
            self.copy_file(built, os.path.join(folder, os.path.basename(rel)), level=self.verbose)

    def _package_dir(self, package):
        return os.path.dirname(self.get_ext_fullpath(package + ".x"))

    def get_outputs(self):
        return super().get_outputs() + getattr(self, "_extras", [])


families = [] if os.environ.get("MQTOOL_AOT") == "0" else list(FAMILIES)
setup(ext_modules=[Kernels(f) for f in families], cmdclass={"build_ext": BuildCompiled})
