"""Find a JDK the engines accept and describe it in the environment they read."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from es_tour.errors import EngineSetupError

MINIMUM_JAVA = 17
# Where Debian's and Temurin's packages put JDKs: searched when the default JDK is too old for
# an engine (OpenSearch 3.x and Elasticsearch 9.x need 21; 17 stays the default).
JVM_DIR = Path("/usr/lib/jvm")


def java_home(minimum: int = MINIMUM_JAVA, needed_by: str = "an engine") -> Path:
    """JAVA_HOME if set, else the JDK behind `java` on PATH, when it is Java `minimum` or newer;
    else the newest JDK under /usr/lib/jvm that is."""
    if os.environ.get("JAVA_HOME"):
        default: Path | None = Path(os.environ["JAVA_HOME"])
    elif (java := shutil.which("java")) is not None:
        default = Path(java).resolve().parent.parent
    else:
        default = None
    if default is not None and _major_version(default / "bin" / "java") >= minimum:
        return default
    found = sorted(
        (version, home)
        for home in (JVM_DIR.iterdir() if JVM_DIR.is_dir() else ())
        if (home / "bin" / "java").is_file()
        and (version := _major_version(home / "bin" / "java", strict=False)) >= minimum
    )
    if found:
        return found[-1][1]
    default_is = (f"the default JDK ({default}) is Java {_major_version(default / 'bin' / 'java')}"
                  if default is not None else "no JDK is on PATH")
    raise EngineSetupError(
        f"{needed_by} runs only on JDK {minimum} or newer: {default_is} and {JVM_DIR} has none "
        "that new. "
        f"Install JDK {minimum}+ (e.g. `apt-get install openjdk-{minimum}-jdk-headless` where "
        "Debian has it) or set JAVA_HOME to one."
    )


def _major_version(java: Path, *, strict: bool = True) -> int:
    """The major version of `java`; with strict=False, 0 for one that does not run."""
    try:
        out = subprocess.run([str(java), "-version"], capture_output=True, text=True).stderr
    except OSError as exc:
        if not strict:
            return 0
        raise EngineSetupError(f"cannot run {java}: {exc}; set JAVA_HOME to a JDK") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out)
    if match is None:
        if not strict:
            return 0
        raise EngineSetupError(f"cannot read the Java version of {java}: {out.strip()[:200]}")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major


def java_env(home: Path | None = None) -> dict[str, str]:
    """The process environment with every engine's JDK variable pointing at `home` (default:
    `java_home()`)."""
    jdk = str(home or java_home())
    return {**os.environ, "JAVA_HOME": jdk, "ES_JAVA_HOME": jdk, "OPENSEARCH_JAVA_HOME": jdk}
