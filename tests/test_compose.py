"""docker-compose.yml: `docker compose config` when the CLI can check it offline, else the YAML;
the Dockerfile's health check, and the secured profile's services, read statically (no engine
runs containers here)."""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

from es_tour import paths
from es_tour.server._ops import HEALTH_TIMEOUT_S

ROOT = Path(__file__).parents[1]
COMPOSE = ROOT / "docker-compose.yml"
DOCKERFILE = ROOT / "Dockerfile"


def _compose_cli() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
    return probe.returncode == 0


def _compose_config_errors() -> list[str]:
    """`docker compose config` over both profiles; empty when it accepts the file."""
    errors = []
    for profile in ([], ["--profile", "elasticsearch"], ["--profile", "secure"]):
        result = subprocess.run(["docker", "compose", "-f", str(COMPOSE), *profile, "config",
                                 "--quiet"], capture_output=True, text=True, timeout=60, cwd=ROOT)
        if result.returncode != 0:
            errors.append(result.stderr)
    return errors


def test_stack_puts_the_sidecar_between_each_ui_and_its_engine() -> None:
    """Checked by `docker compose config` where the CLI plugin exists, and always as YAML."""
    if _compose_cli():
        assert _compose_config_errors() == []
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    default = {name for name, s in services.items() if "profiles" not in s}
    assert default == {"opensearch", "sidecar", "dashboards"}
    assert {n for n, s in services.items() if "elasticsearch" in s.get("profiles", [])} == \
        {"elasticsearch", "sidecar-es", "kibana"}
    assert "http://sidecar:9201" in services["dashboards"]["environment"]["OPENSEARCH_HOSTS"]
    assert "http://sidecar-es:9201" in services["kibana"]["environment"]["ELASTICSEARCH_HOSTS"]
    assert services["sidecar"]["command"][-1] == "http://opensearch:9200"
    assert services["sidecar-es"]["command"][-1] == "http://elasticsearch:9200"
    for engine, zip_name in (("opensearch", "tour-settings-0.1.0.zip"),
                             ("elasticsearch", "tour-settings-es-0.1.0.zip")):
        inline = services[engine]["build"]["dockerfile_inline"]
        assert zip_name in inline and "plugin install" in inline
    assert services["sidecar"]["build"] == "." and (ROOT / "Dockerfile").is_file()


def _interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's `${VAR:-default}`, nested, innermost first: enough for the models volume."""
    pattern = re.compile(r"\$\{(\w+):-([^${}]*)\}")
    while match := pattern.search(text):
        text = text[:match.start()] + (env.get(match.group(1)) or match.group(2)) + \
            text[match.end():]
    return text


def _models_volume() -> tuple[str, str]:
    """(host side, container side) of the sidecars' models mount, as written."""
    services = yaml.safe_load(COMPOSE.read_text())["services"]
    volumes = {tuple(services[name]["volumes"]) for name in ("sidecar", "sidecar-es")}
    assert len(volumes) == 1, "both sidecars mount the same models"
    (volume,) = volumes.pop()
    host, container, mode = volume.rsplit(":", 2)
    assert mode == "ro"
    return host, container


@pytest.mark.parametrize("env", [{}, {"ES_TOUR_HOME": "/srv/tour"}],
                         ids=["default", "ES_TOUR_HOME"])
def test_compose_mounts_the_models_make_wrote(env, monkeypatch) -> None:
    """`make models` writes es_tour.paths.models_dir(); compose must mount that path."""
    monkeypatch.delenv("ES_TOUR_HOME", raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(os, "geteuid", lambda: 1000)  # root needs ES_TOUR_HOME (the docs say)
    host, _ = _models_volume()
    assert Path(os.path.expanduser(_interpolate(host, env))) == paths.models_dir()


def test_the_mount_lands_where_the_image_reads_models() -> None:
    home = re.search(r"ES_TOUR_HOME=(\S+)", DOCKERFILE.read_text())
    assert home, "the Dockerfile sets ES_TOUR_HOME"
    assert _models_volume()[1] == f"{home.group(1)}/models"


def test_building_models_in_the_image_installs_what_the_build_needs() -> None:
    """BUILD_MODELS=1 runs `es-tour models build` for the models the sidecar serves, which
    are ready ONNX in Maven jars: it needs Maven (onnx_models fetches jars with mvn) and the
    runtime's own packages (onnx quantises), not the `export` extra."""
    from onnx_models import spec

    text = DOCKERFILE.read_text()
    branch = re.search(r'if \[ "\$BUILD_MODELS" = "1" \]; then(.*?)fi', text, re.S)
    assert branch, "BUILD_MODELS=1 has its own step"
    steps = branch.group(1)
    assert "maven" in steps and "es-tour models build retriever default" in steps
    assert text.index("pip install --no-cache-dir . ") < branch.start()  # runtime first
    assert all(spec(name).source.ready_onnx for name in ("retriever", "default"))
    core = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(req.startswith("onnx>") for req in core)


SIDECARS = ("sidecar", "sidecar-es", "sidecar-secure")
HEALTH_PATH = "/_tour/health"


def _services() -> dict:
    return dict(yaml.safe_load(COMPOSE.read_text())["services"])


def dockerfile_health() -> tuple[dict[str, str], list[str]]:
    """(options, exec-form command) of the Dockerfile's HEALTHCHECK."""
    text = DOCKERFILE.read_text().replace("\\\n", " ")
    match = re.search(r"^HEALTHCHECK((?: --[\w-]+=\S+)*)\s+CMD (\[.*\])$", text, re.M)
    assert match, "the Dockerfile declares a HEALTHCHECK with an exec-form CMD"
    options = dict(re.findall(r"--([\w-]+)=(\S+)", match.group(1)))
    return options, json.loads(match.group(2))


def test_the_image_is_healthy_while_its_sidecar_answers_on_its_health_endpoint() -> None:
    options, command = dockerfile_health()
    assert command[:2] == ["python", "-c"], "the slim image has no curl"
    code = command[2]
    ast.parse(code)  # valid Python
    listen = re.search(r'"--listen", "0\.0\.0\.0:(\d+)"', DOCKERFILE.read_text())
    assert listen, "the image's sidecar listens on a fixed port"
    assert f"http://127.0.0.1:{listen.group(1)}{HEALTH_PATH}" in code
    # the endpoint waits up to HEALTH_TIMEOUT_S for the engine: the probe must wait longer
    probe_timeout = re.search(r"timeout=(\d+)", code)
    assert probe_timeout, "the probe gives up on its own"
    assert HEALTH_TIMEOUT_S < float(probe_timeout.group(1)) < float(options["timeout"].rstrip("s"))


def test_every_sidecar_runs_the_images_health_check_and_its_ui_waits_for_it() -> None:
    services = _services()
    sidecars = {name for name, s in services.items() if s.get("build") == "."}
    assert sidecars == set(SIDECARS)
    _, command = dockerfile_health()
    for name in SIDECARS:
        assert services[name]["healthcheck"]["test"] == ["CMD", *command], name
    for ui, sidecar in (("dashboards", "sidecar"), ("kibana", "sidecar-es"),
                        ("dashboards-secure", "sidecar-secure")):
        assert services[ui]["depends_on"] == {sidecar: {"condition": "service_healthy"}}, ui


def test_the_secure_profile_runs_opensearch_with_security_behind_an_https_sidecar() -> None:
    services = _services()
    secure = {n for n, s in services.items() if "secure" in s.get("profiles", [])}
    assert secure == {"opensearch-secure", "sidecar-secure", "dashboards-secure"}
    engine = services["opensearch-secure"]
    assert engine["build"] == services["opensearch"]["build"], "the plugin is installed"
    for service in (engine, services["dashboards-secure"]):
        environment = service["environment"]
        assert not any(key.startswith("DISABLE_") for key in environment)
        assert "plugins.security.disabled" not in environment
    assert "OPENSEARCH_INITIAL_ADMIN_PASSWORD" in engine["environment"]
    assert "https://localhost:9200" in " ".join(engine["healthcheck"]["test"])
    sidecar = services["sidecar-secure"]
    upstream = sidecar["command"][sidecar["command"].index("--upstream") + 1]
    assert upstream == "https://opensearch-secure:9200"
    # its own identity is the engine's admin; callers' credentials pass through unchanged
    service_user = sidecar["environment"]["ES_TOUR_SERVICE_CREDENTIALS"]
    password = engine["environment"]["OPENSEARCH_INITIAL_ADMIN_PASSWORD"]
    assert service_user == f"admin:{password}"
    assert sidecar["depends_on"] == {"opensearch-secure": {"condition": "service_healthy"}}
    assert "http://sidecar-secure:9201" in \
        services["dashboards-secure"]["environment"]["OPENSEARCH_HOSTS"]
