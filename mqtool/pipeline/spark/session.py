"""mqtool's Spark session: started with mqtool's settings and the JVM reader's jar (jvmreader),
its data sources registered (sources; format("rocketmq") is the JVM reader where the session's
JVM has it), Java's start-up notice kept off stderr.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from mqtool.errors import UsageError
from mqtool.pipeline.spark import jvmreader
from mqtool.pipeline.spark.sources import (
    ConsumeQueueDataSource,
    PythonConsumeQueueDataSource,
    PythonRocketMQDataSource,
    RocketMQDataSource,
)

PUSHDOWN = "spark.sql.python.filterPushdown.enabled"
SESSION_CONF = {
    # needed for option("pushdown", "true"); readers without pushFilters are not affected
    PUSHDOWN: "true",
    # topic=123/ is a topic named "123", not a number, when an export is read back
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
LOCAL_CONF = {"spark.ui.enabled": "false"}


def register(spark, reader: str | None = None) -> None:
    """Make format("rocketmq") and format("rocketmq_cq") known to this session, and the Python data
    sources as format("rocketmq_python") and format("rocketmq_cq_python").  format("rocketmq")
    and format("rocketmq_cq") are the JVM reader when the session's JVM has it (its jar in
    spark.jars: session() adds it), else the Python data sources.  reader: "python" to insist on
    the Python data source (spark.mqtool.reader by default), refused where the JVM has its own."""

    reader = reader or spark.conf.get(jvmreader.READER_CONF, "jvm")
    if not jvmreader.loaded(spark):
        spark.dataSource.register(RocketMQDataSource)
        spark.dataSource.register(ConsumeQueueDataSource)
    elif reader == "python":
        raise UsageError(f'{jvmreader.READER_CONF}=python: this process\'s JVM has the JVM reader from an earlier '
                         'session, which keeps the name format("rocketmq"); start a new process (or use '
                         'format("rocketmq_python"))')
    spark.dataSource.register(PythonRocketMQDataSource)
    spark.dataSource.register(PythonConsumeQueueDataSource)


def _reader_choice(conf) -> str | None:
    """spark.mqtool.reader from --spark-conf: "jvm" or "python"; None when not given."""

    choice = None
    for item in conf:
        key, _, value = item.partition("=")
        if key.strip() == jvmreader.READER_CONF:
            choice = value.strip().lower()
    if choice not in (None, "jvm", "python"):
        raise UsageError(f'--spark-conf {jvmreader.READER_CONF}={choice}: expected "jvm" or "python"')
    return choice


def _add_jvm_reader(settings, local: bool) -> None:
    """The JVM reader's jar into spark.jars (built first if need be), so that format("rocketmq")
    is the JVM reader; without a JDK to build it, the Python data source serves it."""

    jar, _ = jvmreader.jar()
    if jar is None:
        return
    jars = [j for j in settings.get("spark.jars", "").split(",") if j.strip()]
    settings.set("spark.jars", ",".join(jars + [str(jar)]))
    settings.set(jvmreader.DRIVER_PYTHON_CONF, sys.executable)
    if local:
        settings.set(jvmreader.PYTHON_CONF, sys.executable)


def session(master: str | None = None, conf=()):
    """(SparkSession, created): the active session if there is one, else a new one on master
    (local[*] by default) with mqtool's data sources registered."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway
    from pyspark.sql import SparkSession


    reader = _reader_choice(conf)
    active = SparkSession.getActiveSession()
    if active is not None:
        register(active, reader)
        return active, False
    if not os.environ.get("JAVA_HOME") and shutil.which("java") is None:
        raise UsageError("--engine spark needs Java 17 or newer (java on PATH, or JAVA_HOME)")
    master = master or "local[*]"
    local = master.startswith("local")
    if local:
        # Spark's Python workers are this interpreter, so they import this mqtool
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log_conf = Path(__file__).with_name("spark-log4j2.properties")
    settings = SparkConf(loadDefaults=True).setMaster(master).setAppName("mqtool")
    settings.set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={log_conf.as_uri()}")
    for key, value in {**SESSION_CONF, **(LOCAL_CONF if local else {})}.items():
        settings.set(key, value)
    for item in conf:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--spark-conf {item!r}: expected KEY=VALUE")
        settings.set(key.strip(), value.strip())
    reader = reader or "jvm"
    settings.set(jvmreader.READER_CONF, reader)
    if reader == "jvm":
        _add_jvm_reader(settings, local)
    try:
        if SparkContext._gateway is None:    # the JVM starts here (not again after a stop()): see _forward_stderr
            gateway = launch_gateway(settings, popen_kwargs={"stderr": subprocess.PIPE})
            threading.Thread(target=_forward_stderr, args=(gateway.proc.stderr,), name="spark-stderr",
                             daemon=True).start()
            SparkContext(conf=settings, gateway=gateway)
        spark = SparkSession.builder.config(conf=settings).getOrCreate()
    except Exception as exc:  # noqa: BLE001 - Java failing to start shows up as many error types
        raise UsageError(f"cannot start Spark ({master}): {exc}") from None
    spark.sparkContext.setLogLevel("ERROR")
    try:
        register(spark)
    except UsageError:
        spark.stop()
        raise
    return spark, True


_JVM_NOTICE = b"WARNING: Using incubator modules"


def _forward_stderr(stream) -> None:
    """The JVM's stderr onto ours, less the notice Java prints for the jdk.incubator.vector module
    Spark's launcher always adds (before any log setting can reach it)."""
    for line in iter(stream.readline, b""):
        if not line.startswith(_JVM_NOTICE):
            try:
                sys.stderr.write(line.decode("utf-8", "replace"))
                sys.stderr.flush()
            except (OSError, ValueError):   # our stderr is gone (the reader left, or we are exiting)
                pass

