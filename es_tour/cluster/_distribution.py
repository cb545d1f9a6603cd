"""Engine distributions fetched from Maven Central with Maven, cached and unpacked once."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

from es_tour.errors import EngineSetupError
from es_tour.paths import engines_dir

OPENSEARCH_VERSION = "2.19.1"  # the newest 2.19.x whose k-NN plugin zip Maven Central serves
ELASTICSEARCH_VERSION = "8.19.21"  # the newest 8.x; 8.x still runs on JDK 17
# Elasticsearch publishes no module jars to Maven Central since 7.x (neither
# org.elasticsearch.plugin nor org.elasticsearch.module has lang-mustache at 8.19.21), so
# its integ-test zip stays without search templates.



@dataclass(frozen=True)
class Module:
    """A module the integ-test zip lacks, assembled from its published jars."""

    name: str
    classname: str
    description: str
    jars: tuple[str, ...]
    extends: tuple[str, ...] = ()
    permissions: tuple[str, ...] = ()  # java.lang.RuntimePermission names it is granted


# The k-NN plugin extends lang-painless.
_PAINLESS = Module(
    name="lang-painless",
    classname="org.opensearch.painless.PainlessPlugin",
    description="Painless scripting (assembled by es-tour)",
    jars=(
        f"org.opensearch.plugin:lang-painless:{OPENSEARCH_VERSION}:jar",
        f"org.opensearch.plugin:opensearch-scripting-painless-spi:{OPENSEARCH_VERSION}:jar",
        "org.antlr:antlr4-runtime:4.13.1:jar",
        "org.ow2.asm:asm:9.7:jar",
        "org.ow2.asm:asm-util:9.7:jar",
        "org.ow2.asm:asm-tree:9.7:jar",
        "org.ow2.asm:asm-commons:9.7:jar",
        "org.ow2.asm:asm-analysis:9.7:jar",
    ),
    permissions=("createClassLoader", "getClassLoader"),
)
# The language analyzers (`english`, `porter_stem`, ...); it extends lang-painless with
# analysis script conditions.
_ANALYSIS_COMMON = Module(
    name="analysis-common",
    classname="org.opensearch.analysis.common.CommonAnalysisPlugin",
    description="Common analysis components (assembled by es-tour)",
    jars=(f"org.opensearch.plugin:analysis-common:{OPENSEARCH_VERSION}:jar",),
    extends=("lang-painless",),
)
# Search templates (`_search/template`, `_render/template`). Maven Central has no
# `lang-mustache` artifact; the module's classes are published whole as its client jar.
_MUSTACHE = Module(
    name="lang-mustache",
    classname="org.opensearch.script.mustache.MustachePlugin",
    description="Mustache scripting and search templates (assembled by es-tour)",
    jars=(
        f"org.opensearch.plugin:lang-mustache-client:{OPENSEARCH_VERSION}:jar",
        "com.github.spullara.mustache.java:compiler:0.9.14:jar",
    ),
    permissions=("accessDeclaredMembers",),  # the module's own policy: mustache's reflection
)


@dataclass(frozen=True)
class Distribution:
    """One engine product at one version, and the Maven artifacts that make it."""

    engine: str
    version: str
    product_zip: str
    plugin_zips: tuple[str, ...] = ()
    modules: tuple[Module, ...] = ()
    # A variant (e.g. "security") unpacks into its own home, so the plugins it adds never
    # reach the nodes that run the plain distribution.
    variant: str | None = None

    @property
    def home(self) -> Path:
        suffix = f"-{self.variant}" if self.variant else ""
        return engines_dir() / f"{self.engine}-{self.version}{suffix}"

    @property
    def launcher(self) -> Path:
        return self.home / "bin" / self.engine

    def ensure_installed(self) -> Path:
        """Fetch (once) and unpack (once) the distribution with its plugins; returns its home.

        A module added to `modules` after the distribution was unpacked is added to it
        then; a node loads it when it next starts, so nodes running meanwhile are unharmed.
        """
        if (self.home / ".installed").exists():
            self._add_missing_modules(self.home)
            return self.home
        archive = fetch_artifact(self.product_zip)
        staging = self.home.with_name(self.home.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        _unzip(archive, staging)
        top = staging / f"{self.engine}-{self.version}"
        self._add_missing_modules(top)
        for plugin in self.plugin_zips:
            _install_plugin(top, fetch_artifact(plugin), plugin)
        shutil.rmtree(self.home, ignore_errors=True)
        top.rename(self.home)
        shutil.rmtree(staging, ignore_errors=True)
        (self.home / ".installed").touch()
        return self.home

    def install_local_plugin(self, archive: Path) -> None:
        """Install a plugin zip built here (e.g. plugin/target/*.zip), again when it changes."""
        if not archive.is_file():
            raise EngineSetupError(f"plugin zip {archive} not found; build it with `make plugin`")
        home = self.ensure_installed()
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        with zipfile.ZipFile(archive) as zf:
            descriptor = zf.read("plugin-descriptor.properties").decode()
        name = next(
            line.split("=", 1)[1].strip()
            for line in descriptor.splitlines()
            if line.startswith("name=")
        )
        marker = home / "plugins" / name / ".es-tour-sha256"
        if marker.is_file() and marker.read_text() == digest:
            return
        shutil.rmtree(home / "plugins" / name, ignore_errors=True)
        _install_plugin(home, archive, str(archive))
        marker.write_text(digest)

    def _add_missing_modules(self, home: Path) -> None:
        for module in self.modules:
            if not (home / "modules" / module.name).is_dir():
                _assemble_module(home / "modules" / module.name, module, self.version)


OPENSEARCH = Distribution(
    engine="opensearch",
    version=OPENSEARCH_VERSION,
    product_zip=f"org.opensearch.distribution.integ-test-zip:opensearch:{OPENSEARCH_VERSION}:zip",
    plugin_zips=(f"org.opensearch.plugin:opensearch-knn:{OPENSEARCH_VERSION}.0:zip",),
    modules=(_PAINLESS, _ANALYSIS_COMMON, _MUSTACHE),
)
ELASTICSEARCH = Distribution(
    engine="elasticsearch",
    version=ELASTICSEARCH_VERSION,
    product_zip=(
        f"org.elasticsearch.distribution.integ-test-zip:elasticsearch:{ELASTICSEARCH_VERSION}:zip"
    ),
)
DISTRIBUTIONS = {d.engine: d for d in (OPENSEARCH, ELASTICSEARCH)}
SECURITY_PLUGIN = f"org.opensearch.plugin:opensearch-security:{OPENSEARCH_VERSION}.0:zip"
SECURED = {"opensearch": replace(OPENSEARCH, plugin_zips=(*OPENSEARCH.plugin_zips, SECURITY_PLUGIN),
                                 variant="security")}


def distribution(engine: str, *, security: bool = False) -> Distribution:
    """The distribution of `engine`; with `security`, its own copy with the Security plugin."""
    if engine not in DISTRIBUTIONS:
        raise EngineSetupError(
            f"unknown engine [{engine}]; choose one of: {', '.join(DISTRIBUTIONS)}"
        )
    if not security:
        return DISTRIBUTIONS[engine]
    if engine not in SECURED:
        raise EngineSetupError(f"--security is available for: {', '.join(SECURED)}")
    return SECURED[engine]


def fetch_artifact(coordinates: str) -> Path:
    """Copy `group:artifact:version:type` from Maven Central into the download cache."""
    _group, artifact, version, packaging = coordinates.split(":")
    target = engines_dir() / "downloads" / f"{artifact}-{version}.{packaging}"
    if target.exists():
        return target
    if shutil.which("mvn") is None:
        raise EngineSetupError(
            f"Maven (mvn) is needed to fetch {coordinates}; "
            "install it, e.g. `apt-get install maven`"
        )
    target.parent.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        [
            "mvn",
            "-q",
            "-B",
            "dependency:copy",
            f"-Dartifact={coordinates}",
            f"-DoutputDirectory={target.parent}",
        ],
        capture_output=True,
        text=True,
        cwd=target.parent,
    )
    if result.returncode != 0 or not target.exists():
        reason = next(
            (line for line in result.stdout.splitlines() if "ERROR" in line),
            "no output",
        )
        raise EngineSetupError(
            f"could not fetch {coordinates} from Maven Central ({reason.strip()}). "
            "Check that Maven Central is reachable and that this version is published; "
            f"or place the file at {target} by hand."
        )
    return target


def _unzip(archive: Path, into: Path) -> None:
    with zipfile.ZipFile(archive) as zf:
        zf.extractall(into)
    for script in into.glob("*/bin/*"):  # zipfile drops the executable bit
        script.chmod(0o755)


def _assemble_module(directory: Path, module: Module, version: str) -> None:
    """Assemble `module` beside the engines and move it into place whole, so that a node
    starting meanwhile never finds it half-written."""
    staging = engines_dir() / f"{module.name}-{version}.{os.getpid()}.partial"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for jar in module.jars:
        shutil.copy(fetch_artifact(jar), staging)
    (staging / "plugin-descriptor.properties").write_text(
        f"description={module.description}\nversion={version}\n"
        f"name={module.name}\nclassname={module.classname}\n"
        f"java.version=11\nopensearch.version={version}\n"
        f"extended.plugins={','.join(module.extends)}\nhas.native.controller=false\n"
    )
    if module.permissions:
        grants = "".join(f'  permission java.lang.RuntimePermission "{name}";\n'
                         for name in module.permissions)
        (staging / "plugin-security.policy").write_text(f"grant {{\n{grants}}};\n")
    try:
        staging.rename(directory)
    except OSError:  # another process put it there first
        shutil.rmtree(staging, ignore_errors=True)
        if not directory.is_dir():
            raise


def _install_plugin(home: Path, archive: Path, coordinates: str) -> None:
    from es_tour.cluster._java import java_env

    tool = home / "bin" / f"{home.name.split('-')[0]}-plugin"
    result = subprocess.run(
        [str(tool), "install", "--batch", archive.resolve().as_uri()],
        capture_output=True,
        text=True,
        env=java_env(),
    )
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:]
        raise EngineSetupError(f"could not install plugin {coordinates}: {' '.join(tail)}")
