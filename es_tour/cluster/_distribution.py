"""Engine distributions fetched from Maven Central with Maven, cached and unpacked once."""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import zipfile
from dataclasses import dataclass, replace
from pathlib import Path

from es_tour.cluster._java import MINIMUM_JAVA, java_env, java_home
from es_tour.errors import EngineSetupError
from es_tour.paths import engines_dir

OPENSEARCH_VERSION = "2.19.1"  # the newest 2.19.x whose k-NN plugin zip Maven Central serves
ELASTICSEARCH_VERSION = "8.19.21"  # the newest 8.x; 8.x still runs on JDK 17
# The current majors, on Java 21: the newest whose every piece Maven Central serves. k-NN's
# zip stops at 3.5.0.0 (3.6.0.0, 3.8.0.0 and 3.9.0.0 are not served); Elasticsearch's
# integ-test zip at 9.3.2 (9.3.3 and 9.3.4 publish a pom but no zip; 9.4.x, nothing).
OPENSEARCH_CURRENT = "3.5.0"
ELASTICSEARCH_CURRENT = "9.3.2"
# What `es-tour engine start --version` runs; each engine's first is its default.
VERSIONS = {
    "opensearch": (OPENSEARCH_VERSION, OPENSEARCH_CURRENT),
    "elasticsearch": (ELASTICSEARCH_VERSION, ELASTICSEARCH_CURRENT),
}
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


def _opensearch_2_modules(version: str) -> tuple[Module, ...]:
    """The modules OpenSearch 2.x's integ-test zip lacks (3.x's ships them)."""
    # The k-NN plugin extends lang-painless.
    painless = Module(
        name="lang-painless",
        classname="org.opensearch.painless.PainlessPlugin",
        description="Painless scripting (assembled by es-tour)",
        jars=(
            f"org.opensearch.plugin:lang-painless:{version}:jar",
            f"org.opensearch.plugin:opensearch-scripting-painless-spi:{version}:jar",
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
    analysis_common = Module(
        name="analysis-common",
        classname="org.opensearch.analysis.common.CommonAnalysisPlugin",
        description="Common analysis components (assembled by es-tour)",
        jars=(f"org.opensearch.plugin:analysis-common:{version}:jar",),
        extends=("lang-painless",),
    )
    # Search templates (`_search/template`, `_render/template`). Maven Central has no
    # `lang-mustache` artifact; the module's classes are published whole as its client jar.
    mustache = Module(
        name="lang-mustache",
        classname="org.opensearch.script.mustache.MustachePlugin",
        description="Mustache scripting and search templates (assembled by es-tour)",
        jars=(
            f"org.opensearch.plugin:lang-mustache-client:{version}:jar",
            "com.github.spullara.mustache.java:compiler:0.9.14:jar",
        ),
        permissions=("accessDeclaredMembers",),  # the module's own policy: mustache's reflection
    )
    return painless, analysis_common, mustache


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
    java: int = MINIMUM_JAVA  # the oldest Java it runs on

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
            _install_plugin(top, fetch_artifact(plugin), plugin, self.java_env())
        shutil.rmtree(self.home, ignore_errors=True)
        top.rename(self.home)
        shutil.rmtree(staging, ignore_errors=True)
        (self.home / ".installed").touch()
        return self.home

    def install_local_plugin(self, archive: Path) -> None:
        """Install a plugin zip built here (e.g. plugin/target/*.zip), again when it changes."""
        if not archive.is_file():
            raise EngineSetupError(f"plugin zip {archive} not found; build it with `make plugin`")
        with zipfile.ZipFile(archive) as zf:
            lines = zf.read("plugin-descriptor.properties").decode().splitlines()
        descriptor = dict(line.strip().split("=", 1) for line in lines
                          if "=" in line and not line.startswith("#"))
        # an engine loads a plugin built for its exact version only: say which build is needed
        built_for = " ".join(f"{engine} {descriptor[f'{engine}.version']}" for engine in VERSIONS
                             if f"{engine}.version" in descriptor)
        if built_for != f"{self.engine} {self.version}":
            raise EngineSetupError(
                f"plugin zip {archive} is built for {built_for or 'no engine es-tour knows'}, "
                f"not {self.engine} {self.version}: `make plugin` builds each (docs/plugin.md)"
            )
        home = self.ensure_installed()
        # the build is reproducible (plugin/pom.xml), so the same source is the same digest
        digest = hashlib.sha256(archive.read_bytes()).hexdigest()
        name = descriptor["name"]
        marker = home / "plugins" / name / ".es-tour-sha256"
        # every checkout's nodes share this home: one install at a time
        with (home / ".es-tour-plugins.lock").open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if marker.is_file() and marker.read_text() == digest:
                return
            shutil.rmtree(home / "plugins" / name, ignore_errors=True)
            _install_plugin(home, archive, str(archive), self.java_env())
            marker.write_text(digest)

    def java_home(self) -> Path:
        """A JDK it runs on (see `es_tour.cluster._java.java_home`)."""
        return java_home(self.java, f"{self.engine} {self.version}")

    def java_env(self) -> dict[str, str]:
        """The environment its tools and nodes run in, with a JDK it accepts."""
        return java_env(self.java_home())

    def _add_missing_modules(self, home: Path) -> None:
        for module in self.modules:
            if not (home / "modules" / module.name).is_dir():
                _assemble_module(home / "modules" / module.name, module, self.version)


# Each engine's first major that runs only on Java 21 or newer.
_JAVA_21_FROM = {"opensearch": 3, "elasticsearch": 9}


def _make(engine: str, version: str) -> Distribution:
    major = int(version.split(".")[0])
    java = 21 if major >= _JAVA_21_FROM[engine] else MINIMUM_JAVA
    product_zip = f"org.{engine}.distribution.integ-test-zip:{engine}:{version}:zip"
    if engine == "elasticsearch":
        return Distribution(engine, version, product_zip, java=java)
    return Distribution(
        engine,
        version,
        product_zip,
        plugin_zips=(f"org.opensearch.plugin:opensearch-knn:{version}.0:zip",),
        modules=_opensearch_2_modules(version) if major == 2 else (),
        java=java,
    )


DISTRIBUTIONS = {(e, v): _make(e, v) for e, versions in VERSIONS.items() for v in versions}
OPENSEARCH = DISTRIBUTIONS["opensearch", OPENSEARCH_VERSION]
SECURITY_PLUGIN = f"org.opensearch.plugin:opensearch-security:{OPENSEARCH_VERSION}.0:zip"
SECURED = replace(OPENSEARCH, plugin_zips=(*OPENSEARCH.plugin_zips, SECURITY_PLUGIN),
                  variant="security")


def distribution(engine: str, version: str | None = None, *,
                 security: bool = False) -> Distribution:
    """`engine` at `version` (default: its first in VERSIONS); with `security`, its own copy
    with the Security plugin."""
    if engine not in VERSIONS:
        raise EngineSetupError(f"unknown engine [{engine}]; choose one of: {', '.join(VERSIONS)}")
    version = version or VERSIONS[engine][0]
    if version not in VERSIONS[engine]:
        raise EngineSetupError(
            f"es-tour does not run {engine} {version}; choose one of: "
            f"{', '.join(VERSIONS[engine])}"
        )
    if not security:
        return DISTRIBUTIONS[engine, version]
    if (engine, version) != (SECURED.engine, SECURED.version):
        raise EngineSetupError(f"--security is available for {SECURED.engine} {SECURED.version}")
    return SECURED


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


def _install_plugin(home: Path, archive: Path, coordinates: str, env: dict[str, str]) -> None:
    tool = home / "bin" / f"{home.name.split('-')[0]}-plugin"
    result = subprocess.run(
        [str(tool), "install", "--batch", archive.resolve().as_uri()],
        capture_output=True,
        text=True,
        env=env,
    )
    if result.returncode != 0:
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:]
        raise EngineSetupError(f"could not install plugin {coordinates}: {' '.join(tail)}")
