"""mqtool's build backend: setuptools', asking for what the ahead-of-time build needs.

The compiled kernels (mqtool/native/aot.py) are built with numba, so numba (and what importing
the kernel modules needs) is in every build's requirements (pyproject.toml).  The JVM reader's
jar (mqtool/pipeline/spark/jvmreader.py) is compiled against Spark's jars: pyspark joins the build's
requirements only where a JDK (javac) can build it; elsewhere the package is built without the
jar and format("rocketmq") builds it at first use, or is the Python data source.
"""

import os
import shutil

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F401,F403 - the rest of the backend as setuptools has it

SPARK = "pyspark>=4.1"


def _jdk() -> bool:
    if os.environ.get("MQTOOL_BUILD_JAR", "1") == "0":
        return False
    home = os.environ.get("JAVA_HOME")
    if home and os.access(os.path.join(home, "bin", "javac"), os.X_OK):
        return True
    return shutil.which("javac") is not None


def _extra() -> list[str]:
    return [SPARK] if _jdk() else []


def get_requires_for_build_wheel(config_settings=None):
    return _setuptools.get_requires_for_build_wheel(config_settings) + _extra()


def get_requires_for_build_editable(config_settings=None):
    return _setuptools.get_requires_for_build_editable(config_settings) + _extra()
