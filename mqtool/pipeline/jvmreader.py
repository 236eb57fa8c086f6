"""The JVM half of format("rocketmq") and format("rocketmq_cq"): its Java sources (pipeline/jvm/),
built into a jar once per source and Spark version with the JDK's javac, for mqtool's Spark
sessions to load.

Why a JVM half at all: PySpark's Python data sources are told nothing of the columns a query
reads, so every query makes and carries every column, and Spark turns each Arrow batch into
rows.  A JVM data source gets column pruning and hands Spark columnar batches; the rows
themselves still come from mqtool's Python code, through its row server (rowserver.py).
Without a JDK (javac) the Python data sources serve both names, with the same rows.
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


def jar(environ=None) -> tuple[Path | None, str]:
    """(the jar, "") when it is built or was built before; (None, why not) otherwise."""
    compiler = javac(environ)
    if compiler is None:
        return None, "no JDK (javac) found: format(\"rocketmq\") runs in Python workers"
    jars = spark_jars(environ)
    cache = private_cache_dir(f"mqtool-jvm-{os.geteuid()}", environ)
    if cache is None:
        return None, "no private cache directory to build the JVM reader in"
    target = Path(cache) / f"mqtool-spark-{_key(jars)}.jar"
    if target.is_file():
        return target, ""
    with tempfile.TemporaryDirectory(dir=cache) as work:
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
