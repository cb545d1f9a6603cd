"""docker-compose.yml: `docker compose config` when the CLI can check it offline, else the YAML."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).parents[1]
COMPOSE = ROOT / "docker-compose.yml"


def _compose_cli() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "compose", "version"], capture_output=True, timeout=30)
    return probe.returncode == 0


def _compose_config_errors() -> list[str]:
    """`docker compose config` over both profiles; empty when it accepts the file."""
    errors = []
    for profile in ([], ["--profile", "elasticsearch"]):
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
