"""The JVM half of format("rocketmq") and format("rocketmq_cq"): its Java sources
(pipeline/spark/jvm/), built into a jar with the package (setup.py puts it in pipeline/spark/jvm/,
named by the sources and the Spark it was compiled against), for mqtool's Spark sessions to load:
no JDK is needed at run time.  A source checkout that was not built, or a Spark other than the
build's, gets it built at first use with the JDK's javac into a private cache directory, as a
fallback.

Why a JVM half at all: PySpark's Python data sources are told nothing of the columns a query
reads, so every query makes and carries every column, and Spark turns each Arrow batch into
rows.  A JVM data source gets column pruning and hands Spark columnar batches; the rows
themselves still come from mqtool's Python code, through its row server (rowserver.py).
Without the jar (and no JDK to build it) the Python data sources serve both names, with the same rows.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
import subprocess
import tempfile
import zipfile
from pathlib import Path

from mqtool.storage.fsutil import private_cache_dir

SOURCES = Path(__file__).with_name("jvm")
CLASS = "mqtool.spark.RocketMQSource"                 # format("rocketmq")
QUEUE_CLASS = "mqtool.spark.RocketMQQueueSource"      # format("rocketmq_cq")
_SERVICES = f"{CLASS}\n{QUEUE_CLASS}\n"
REGISTER_SERVICE = "META-INF/services/org.apache.spark.sql.sources.DataSourceRegister"
READER_CONF = "spark.mqtool.reader"       # "jvm" (the default, when a JDK can build it) or "python"
PYTHON_CONF = "spark.mqtool.python"       # the Python of the row servers on the executors
DRIVER_PYTHON_CONF = "spark.mqtool.driverPython"   # ... and on the driver (planning)


def javac(environ=None) -> str | None:
    """The JDK's compiler: $JAVA_HOME/bin/javac, else javac on PATH."""
    environ = os.environ if environ is None else environ
    home = environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "javac"), os.X_OK):
        return os.path.join(home, "bin", "javac")
    return shutil.which("javac", path=environ.get("PATH"))


def spark_jars(environ=None) -> Path:
    """The jars of the Spark PySpark runs (what the sources compile against): $SPARK_HOME's,
    else the ones the pyspark package carries."""
    environ = os.environ if environ is None else environ
    if environ.get("SPARK_HOME"):
        return Path(environ["SPARK_HOME"]) / "jars"
    return Path(importlib.util.find_spec("pyspark").origin).parent / "jars"


def _key(jars: Path) -> str:
    """The build's identity: the Java sources, the data sources registered, and the Spark they
    were compiled against."""
    digest = hashlib.sha256(_SERVICES.encode())
    for source in sorted(SOURCES.glob("*.java")):
        digest.update(source.name.encode() + b"\0" + source.read_bytes())
    for jar in sorted(jars.glob("spark-sql_*.jar")):
        digest.update(jar.name.encode())
    return digest.hexdigest()[:16]


def shipped(jars: Path, package: Path | None = None) -> Path:
    """Where the package (its jvm/ folder, SOURCES) keeps the jar built with it for these sources
    and this Spark."""
    return (package or SOURCES) / f"mqtool-spark-{_key(jars)}.jar"


def jar(environ=None, package: Path | None = None) -> tuple[Path | None, str]:
    """(the jar, "") when it was built with the package or before; (None, why not) otherwise.

    The jar built with the package (setup.py: package data) serves when it was compiled from these
    sources against this Spark; else one built at first use in a private cache directory, with
    the JDK's javac (a source checkout that was not built, or another Spark than the build's)."""
    jars = spark_jars(environ)
    if shipped(jars, package).is_file():
        return shipped(jars, package), ""
    compiler = javac(environ)
    if compiler is None:
        return None, "no JDK (javac) found: format(\"rocketmq\") runs in Python workers"
    cache = private_cache_dir(f"mqtool-jvm-{os.geteuid()}", environ)
    if cache is None:
        return None, "no private cache directory to build the JVM reader in"
    target = Path(cache) / shipped(jars).name
    if target.is_file():
        return target, ""
    return _build(compiler, jars, target)


def build_shipped(package_dir, environ=None, reuse=None) -> tuple[Path | None, str]:
    """Build the jar into package_dir/jvm/ (the build of the package, setup.py): (the jar, "") or
    (None, why not).  reuse: a package directory (the source tree's) whose jvm/ may already hold
    the jar of these sources and this Spark (an editable install built it): then it is copied."""
    compiler = javac(environ)
    if compiler is None:
        return None, "no JDK (javac) found"
    try:
        jars = spark_jars(environ)
    except (ImportError, AttributeError, TypeError):
        return None, "no Spark (pyspark) to compile against"
    if not any(jars.glob("spark-sql_*.jar")):
        return None, f"no Spark jars in {jars}"
    target = Path(package_dir) / "jvm" / shipped(jars).name
    target.parent.mkdir(parents=True, exist_ok=True)
    for old in target.parent.glob("mqtool-spark-*.jar"):
        if old != target:
            old.unlink()
    built = shipped(jars, Path(reuse) / "jvm") if reuse else None
    if built is not None and built.is_file() and built != target:
        shutil.copyfile(built, target)
        return target, ""
    return _build(compiler, jars, target)


def _build(compiler: str, jars: Path, target: Path) -> tuple[Path | None, str]:
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        classes = Path(work) / "classes"
        done = subprocess.run(
            [compiler, "-nowarn", "-encoding", "UTF-8", "--release", "17", "-d", str(classes),
             "-cp", str(jars / "*"), *sorted(str(s) for s in SOURCES.glob("*.java"))],
            capture_output=True, text=True)
        if done.returncode != 0:
            first = next((line for line in done.stderr.splitlines() if "error" in line), done.stderr.strip())
            return None, f"the JVM reader did not compile ({first[:300]})"
        built = Path(work) / "reader.jar"
        with zipfile.ZipFile(built, "w", zipfile.ZIP_DEFLATED) as out:
            out.writestr(REGISTER_SERVICE, _SERVICES)
            for path in sorted(classes.rglob("*.class")):
                out.write(path, path.relative_to(classes).as_posix())
        os.replace(built, target)     # whole or not at all, if two sessions build at once
    return target, ""


def loaded(spark) -> bool:
    """Whether this session's JVM has the reader (its jar among spark.jars)."""
    try:
        jvm = spark.sparkContext._jvm
        loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        jvm.java.lang.Class.forName(CLASS, False, loader)
        return True
    except Exception:  # noqa: BLE001 - not loaded, or a session without a JVM here (Spark Connect)
        return False
