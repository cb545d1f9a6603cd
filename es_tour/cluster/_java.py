"""Find a JDK the engines accept and describe it in the environment they read."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from es_tour.errors import EngineSetupError

MINIMUM_JAVA = 17


def java_home() -> Path:
    """JAVA_HOME if set, else the JDK behind `java` on PATH; checked to be >= 17."""
    if os.environ.get("JAVA_HOME"):
        home = Path(os.environ["JAVA_HOME"])
    elif (java := shutil.which("java")) is not None:
        home = Path(java).resolve().parent.parent
    else:
        raise EngineSetupError(
            f"no JDK found: install JDK {MINIMUM_JAVA} "
            "(e.g. `apt-get install openjdk-17-jdk-headless`) or set JAVA_HOME"
        )
    version = _major_version(home / "bin" / "java")
    if version < MINIMUM_JAVA:
        raise EngineSetupError(
            f"the JDK at {home} is Java {version}; the engines need JDK {MINIMUM_JAVA} or newer. "
            "Set JAVA_HOME to a newer JDK."
        )
    return home


def _major_version(java: Path) -> int:
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True).stderr
    except OSError as exc:
        raise EngineSetupError(f"cannot run {java}: {exc}; set JAVA_HOME to a JDK 17") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if match is None:
        raise EngineSetupError(f"cannot read the Java version of {java}: {out.strip()[:200]}")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def java_env() -> dict[str, str]:
    """The process environment with every engine's JDK variable pointing at one JDK."""
    home = str(java_home())
    return {**os.environ, "JAVA_HOME": home, "ES_JAVA_HOME": home, "OPENSEARCH_JAVA_HOME": home}
