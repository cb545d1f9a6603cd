"""The engine versions es-tour runs, the JDK each runs on, and the plugin build for each."""

from __future__ import annotations

import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pytest

from es_tour.cluster import (
    ELASTICSEARCH_CURRENT,
    ELASTICSEARCH_VERSION,
    OPENSEARCH_CURRENT,
    OPENSEARCH_VERSION,
    VERSIONS,
    LocalNode,
    _java,
    distribution,
)
from es_tour.errors import EngineSetupError

POM = Path(__file__).resolve().parents[1] / "plugin" / "pom.xml"
NS = {"m": "http://maven.apache.org/POM/4.0.0"}


def _pom_properties(profile: str | None = None) -> dict[str, str]:
    root = ET.parse(POM).getroot()
    if profile is None:
        properties = root.find("m:properties", NS)
    else:
        properties = next(p for p in root.iterfind("m:profiles/m:profile", NS)
                          if p.findtext("m:id", namespaces=NS) == profile).find("m:properties", NS)
    assert properties is not None
    return {child.tag.split("}")[1]: child.text or "" for child in properties}


def test_the_plugin_builds_for_the_versions_es_tour_runs() -> None:
    default, current = _pom_properties(), _pom_properties("current")
    assert (default["opensearch.version"], default["elasticsearch.version"]) == (
        OPENSEARCH_VERSION, ELASTICSEARCH_VERSION)
    assert (current["opensearch.version"], current["elasticsearch.version"]) == (
        OPENSEARCH_CURRENT, ELASTICSEARCH_CURRENT)
    assert default["maven.compiler.release"] == "17" and current["maven.compiler.release"] == "21"


def test_the_current_majors_run_on_java_21_and_the_defaults_on_17() -> None:
    assert VERSIONS == {"opensearch": (OPENSEARCH_VERSION, OPENSEARCH_CURRENT),
                        "elasticsearch": (ELASTICSEARCH_VERSION, ELASTICSEARCH_CURRENT)}
    assert distribution("opensearch") is distribution("opensearch", OPENSEARCH_VERSION)
    assert [distribution(e, v).java for e, versions in VERSIONS.items() for v in versions] == [
        17, 21, 17, 21]
    # 2.x's integ-test zip lacks the modules es-tour assembles; 3.x's ships them
    assert distribution("opensearch").modules and not distribution("opensearch", "3.5.0").modules
    assert distribution("opensearch", "3.5.0").plugin_zips == (
        "org.opensearch.plugin:opensearch-knn:3.5.0.0:zip",)


def test_an_unsupported_version_or_a_secured_current_node_is_a_clear_error() -> None:
    with pytest.raises(EngineSetupError, match=r"does not run opensearch 3\.4\.0; choose one "
                                               r"of: 2\.19\.1, 3\.5\.0"):
        distribution("opensearch", "3.4.0")
    with pytest.raises(EngineSetupError, match=r"--security is available for opensearch 2\.19"):
        distribution("opensearch", OPENSEARCH_CURRENT, security=True)


def test_a_plugin_zip_for_another_version_is_refused_before_anything_is_fetched(
        tmp_path: Path) -> None:
    archive = tmp_path / "tour-settings-0.1.0.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("plugin-descriptor.properties",
                    "# a comment = ignored\nname=tour-settings\nopensearch.version=2.19.1\n")
    with pytest.raises(EngineSetupError, match=r"built for opensearch 2\.19\.1, not opensearch "
                                               r"3\.5\.0: `make plugin` builds each"):
        distribution("opensearch", OPENSEARCH_CURRENT).install_local_plugin(archive)
    with pytest.raises(EngineSetupError, match=r"built for opensearch 2\.19\.1, not elasticsearch"):
        distribution("elasticsearch").install_local_plugin(archive)


def _fake_jdk(root: Path, name: str, version: str) -> Path:
    """A JDK directory whose bin/java reports `version` as `java -version` does."""
    java = root / name / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text(f'#!/bin/sh\necho \'openjdk version "{version}" 2025-01-01\' >&2\n')
    java.chmod(0o755)
    return root / name


def test_a_default_jdk_too_old_gives_way_to_the_newest_under_the_jvm_dir(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    jvm = tmp_path / "jvm"
    old = _fake_jdk(jvm, "jdk-17", "17.0.15")
    _fake_jdk(jvm, "jdk-21", "21.0.2")
    newest = _fake_jdk(jvm, "jdk-25", "25")
    (jvm / "not-a-jdk").mkdir()
    monkeypatch.setattr(_java, "JVM_DIR", jvm)
    monkeypatch.setenv("JAVA_HOME", str(old))
    assert _java.java_home() == old  # 17 stays the default where it suffices
    assert _java.java_home(21) == newest
    with pytest.raises(EngineSetupError, match=r"elasticsearch 10\.0\.0 runs only on JDK 26 or "
                                               r"newer: the default JDK .* is Java 17"):
        _java.java_home(26, "elasticsearch 10.0.0")


def _node_with_data(home: Path, monkeypatch: pytest.MonkeyPatch, ran: str | None,
                    version: str) -> LocalNode:
    """A node asked for `version` on a work dir holding data that `ran` last wrote (None: a
    dir from before versions were recorded)."""
    monkeypatch.setenv("ES_TOUR_HOME", str(home))
    node = LocalNode("opensearch", 9655, version=version)
    (node.dir / "data" / "nodes").mkdir(parents=True)
    if ran is not None:
        node.version_file.write_text(f"{ran}\n")
    return node


@pytest.mark.parametrize(("ran", "asked", "harm"), [
    (OPENSEARCH_CURRENT, OPENSEARCH_VERSION, "cannot read it"),
    (OPENSEARCH_VERSION, OPENSEARCH_CURRENT, f"would upgrade it for good, past what "
                                             f"{OPENSEARCH_VERSION} reads")])
def test_a_node_refuses_data_another_version_wrote_before_anything_is_installed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ran: str, asked: str,
        harm: str) -> None:
    node = _node_with_data(tmp_path, monkeypatch, ran, asked)
    with pytest.raises(EngineSetupError) as refused:
        node.start(plugins=[tmp_path / "never-read.zip"])
    assert str(refused.value) == (
        f"port 9655 holds the data of opensearch {ran}, and opensearch {asked} {harm}: start "
        f"{ran} there (--version {ran}), pass another --port, or remove {node.dir}")
    assert node.version_file.read_text() == f"{ran}\n"
    assert not (tmp_path / "engines").exists()  # nothing fetched or unpacked


@pytest.mark.parametrize("ran", [OPENSEARCH_CURRENT, None])
def test_a_node_claims_its_own_versions_data_an_unrecorded_dir_and_an_empty_one(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ran: str | None) -> None:
    node = _node_with_data(tmp_path, monkeypatch, ran, OPENSEARCH_CURRENT)
    node.claim_data()
    assert node.version_file.read_text() == f"{OPENSEARCH_CURRENT}\n"
    # the data removed (as the refusal suggests), any version may start there
    (node.dir / "data" / "nodes").rmdir()
    LocalNode("opensearch", 9655, version=OPENSEARCH_VERSION).claim_data()
    assert node.version_file.read_text() == f"{OPENSEARCH_VERSION}\n"
