"""UpstreamTls and the CLI's credentials: checked before any connection is made."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from es_tour.cluster._security import _certificates
from es_tour.errors import ConfigError
from es_tour.tls import PASSWORD_ENV, USER_ENV, UpstreamTls, env_credentials, uses_https


@pytest.fixture(scope="module")
def pem(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A CA and the certificates it signed, as `engine start --security` makes them."""
    directory = tmp_path_factory.mktemp("pem")
    _certificates(directory)
    return directory


def test_verification_is_on_by_default_against_the_given_ca(pem: Path) -> None:
    context = UpstreamTls(ca_certs=str(pem / "root-ca.pem")).context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    subjects = [dict(pair[0] for pair in ca["subject"]) for ca in context.get_ca_certs()]
    assert {"organizationName": "es-tour demo", "commonName": "es-tour demo CA"} in subjects


def test_verification_off_is_asked_for_by_name() -> None:
    context = UpstreamTls(verify=False).context()
    assert context.verify_mode == ssl.CERT_NONE and not context.check_hostname


def test_a_client_certificate_loads_with_its_key(pem: Path) -> None:
    UpstreamTls(client_cert=str(pem / "node.pem"), client_key=str(pem / "node-key.pem")).context()
    with pytest.raises(ConfigError, match="cannot load the TLS files"):  # the wrong key
        UpstreamTls(client_cert=str(pem / "node.pem"),
                    client_key=str(pem / "root-ca-key.pem")).context()


@pytest.mark.parametrize("options", [{"ca_certs": "/no/such/ca.pem"},
                                     {"client_cert": "/no/such/cert.pem"}])
def test_a_missing_file_is_named_before_any_connection(options: dict[str, str]) -> None:
    with pytest.raises(ConfigError, match="/no/such/"):
        UpstreamTls(**options)


def test_a_client_key_alone_is_refused(pem: Path) -> None:
    with pytest.raises(ConfigError, match="client certificate"):
        UpstreamTls(client_key=str(pem / "node-key.pem"))


def test_a_file_that_is_no_certificate_is_a_config_error(tmp_path: Path) -> None:
    garbage = tmp_path / "ca.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(ConfigError):
        UpstreamTls(ca_certs=str(garbage)).context()


def test_https_is_told_from_the_urls() -> None:
    assert uses_https(["http://a:9200", "https://b:9200"])
    assert not uses_https("http://a:9200")


def test_credentials_come_from_the_environment_both_or_neither(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(USER_ENV, raising=False)
    monkeypatch.delenv(PASSWORD_ENV, raising=False)
    assert env_credentials() is None
    monkeypatch.setenv(USER_ENV, "reader-a")
    with pytest.raises(ConfigError, match=PASSWORD_ENV):
        env_credentials()
    monkeypatch.setenv(PASSWORD_ENV, "s3cret")
    assert env_credentials() == ("reader-a", "s3cret")
