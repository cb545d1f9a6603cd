"""UpstreamTls and the CLI's credentials: checked before any connection is made."""

from __future__ import annotations

import socket
import ssl
import threading
from pathlib import Path
from typing import Any

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


def _peer_subject(pem: Path, client: ssl.SSLContext) -> str | None:
    """The subject CN of the certificate `client` shows to a server that asks for one (and
    does not insist), over a real handshake; None when it shows none."""
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(pem / "node.pem"), str(pem / "node-key.pem"))
    server.load_verify_locations(str(pem / "root-ca.pem"))
    server.verify_mode = ssl.CERT_OPTIONAL
    seen: list[dict | None] = []
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]

        def accept() -> None:
            connection, _ = listener.accept()
            with server.wrap_socket(connection, server_side=True) as tls:
                seen.append(tls.getpeercert())

        thread = threading.Thread(target=accept)
        thread.start()
        with socket.create_connection(("127.0.0.1", port)) as raw, \
                client.wrap_socket(raw, server_hostname="localhost") as tls:
            tls.recv(1)  # the server's close: the handshake is done on both sides
        thread.join(10)
    subject = seen[0]
    return dict(pair[0] for pair in subject["subject"])["commonName"] if subject else None


def test_a_client_certificate_kept_to_own_calls_is_not_shown_for_callers(pem: Path) -> None:
    ca, cert, key = (str(pem / name) for name in ("root-ca.pem", "sidecar.pem",
                                                   "sidecar-key.pem"))
    every = UpstreamTls(ca_certs=ca, client_cert=cert, client_key=key)
    assert not every.own_calls_only  # a command's calls are all its own
    assert _peer_subject(pem, every.context(for_callers=True)) == "es-tour-sidecar"
    own = UpstreamTls(ca_certs=ca, client_cert=cert, client_key=key,
                      client_cert_for_callers=False)
    assert own.own_calls_only
    assert _peer_subject(pem, own.context()) == "es-tour-sidecar"
    assert _peer_subject(pem, own.context(for_callers=True)) is None


def test_the_sidecar_shows_its_certificate_to_callers_only_when_told(pem: Path) -> None:
    from es_tour.server import ServerConfig

    tls = UpstreamTls(client_cert=str(pem / "sidecar.pem"), client_key=str(pem / "sidecar-key.pem"))
    assert ServerConfig(upstream="https://127.0.0.1:9200", upstream_tls=tls
                        ).upstream_tls.own_calls_only
    told = ServerConfig(upstream="https://127.0.0.1:9200", upstream_tls=tls,
                        client_cert_for_callers=True)
    assert not told.upstream_tls.own_calls_only


async def test_only_own_identity_views_use_the_certificates_connections(pem: Path) -> None:
    from es_tour.engines import connect

    tls = UpstreamTls(ca_certs=str(pem / "root-ca.pem"), client_cert=str(pem / "sidecar.pem"),
                      client_key=str(pem / "sidecar-key.pem"), client_cert_for_callers=False)
    for engine in ("opensearch", "elasticsearch"):
        async with connect(engine, "https://127.0.0.1:9200", tls) as adapter:
            callers, own = adapter._raw, adapter._own_raw
            assert own is not callers
            caller = adapter.with_headers({"authorization": "Basic x"})
            service = adapter.with_headers({"authorization": "Basic s"}).as_own_identity()
            assert _through(caller._client, callers) and _through(service._client, own)
            assert not _through(caller._client, own)
            assert adapter.as_own_identity()._client is own
        async with connect(engine, "https://127.0.0.1:9200",
                           UpstreamTls(ca_certs=str(pem / "root-ca.pem"))) as plain:
            assert plain._own_raw is plain._raw


def _through(bound: Any, client: Any) -> bool:
    """Whether a header-bound client sends over `client`'s connections."""
    target = getattr(bound, "_target", None)  # opensearch-py: a wrapper of our own
    if target is not None:
        return target is client
    return bool(bound.transport is client.transport)  # elasticsearch-py: options() shares it
