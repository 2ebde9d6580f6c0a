"""The Spring Kafka clients of ``tests/interop/spring``, built once per module with
Maven (spring-kafka from Maven Central) and run with the machine's Java 17."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from tests.support.worker import ROOT

PROJECT = ROOT / "tests" / "interop" / "spring"
MVN = shutil.which("mvn")
JAVA = shutil.which("java")


@pytest.fixture(scope="module")
def client_classpath() -> str:
    if MVN is None or JAVA is None:
        pytest.fail("the Spring interop test needs Maven and Java 17 (`make venv` installs them "
                    "in CI: see .ci/run)")
    build = subprocess.run([MVN, "-q", "-B", "-DskipTests", "package",
                            "dependency:copy-dependencies"],
                           cwd=PROJECT, capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stdout[-4000:] + build.stderr[-4000:]
    return os.pathsep.join([str(PROJECT / "target" / "classes"),
                            str(PROJECT / "target" / "dependency" / "*")])
