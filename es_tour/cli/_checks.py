"""Checks the commands make of their inputs before any work: a bad one costs no ingest."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from es_tour.cli._errors import err_console
from es_tour.cluster import DEFAULT_PORTS
from es_tour.errors import ConfigError
from es_tour.tls import PASSWORD_ENV, USER_ENV, UpstreamTls, env_credentials

if TYPE_CHECKING:
    from es_tour.engines import ClientEngine

T = TypeVar("T")

# How every command that talks to an engine reaches an https one. Credentials come from
# ES_TOUR_USER / ES_TOUR_PASSWORD only: argv is readable by any user of the machine.
CaCerts = Annotated[Path | None, typer.Option(
    envvar="ES_TOUR_CA_CERTS", show_default=False,
    help="PEM bundle of the CAs an https engine's certificate chains to (default: the "
         f"system's); credentials come from {USER_ENV} / {PASSWORD_ENV}")]
ClientCert = Annotated[Path | None, typer.Option(
    envvar="ES_TOUR_CLIENT_CERT", show_default=False,
    help="PEM client certificate for an engine that asks for one (mutual TLS)")]
ClientKey = Annotated[Path | None, typer.Option(
    envvar="ES_TOUR_CLIENT_KEY", show_default=False,
    help="the client certificate's PEM key, when its file does not hold it")]
VerifyCerts = Annotated[bool, typer.Option(
    "--verify-certs/--no-verify-certs",
    help="check an https engine's certificate and host name (off only for a throwaway "
         "node)")]


def renamed(value: T, old_value: T | None, old_name: str, name: str) -> T:
    """An option's value given under its name or its old one, which still works (hidden
    from --help); saying which name replaces it."""
    if old_value is None:
        return value
    old_name_used(old_name, name)
    return old_value


def old_name_used(old_name: str, name: str) -> None:
    err_console.print(f"{old_name} is now {name}; the old name will go")


def upstream_tls(ca_certs: Path | None, client_cert: Path | None, client_key: Path | None,
                 verify_certs: bool) -> UpstreamTls:
    """The TLS options as given on the command line; a ConfigError for a missing file."""
    return UpstreamTls(ca_certs=path_text(ca_certs), verify=verify_certs,
                       client_cert=path_text(client_cert), client_key=path_text(client_key))


@dataclass(frozen=True)
class EngineTarget:
    """An engine as a command reaches it: its kind, URL, TLS and the credentials of
    ES_TOUR_USER / ES_TOUR_PASSWORD (None: anonymous)."""

    engine: str
    url: str
    tls: UpstreamTls
    auth: tuple[str, str] | None

    def connect(self) -> ClientEngine:
        from es_tour.engines import connect

        return connect(self.engine, self.url, self.tls, self.auth)


def engine_target(engine: str, url: str | None, ca_certs: Path | None = None,
                  client_cert: Path | None = None, client_key: Path | None = None,
                  verify_certs: bool = True) -> EngineTarget:
    """Every check of how to reach the engine, made before any work."""
    return EngineTarget(engine, engine_url(engine, url),
                        upstream_tls(ca_certs, client_cert, client_key, verify_certs),
                        env_credentials())


def engine_url(engine: str, url: str | None) -> str:
    """`url`, or the local node's of `engine`; a ConfigError for an unknown engine or a URL
    that is not http(s)."""
    if engine not in DEFAULT_PORTS:
        raise ConfigError(f"--engine must be one of {list(DEFAULT_PORTS)}, got {engine!r}")
    address = url or f"http://127.0.0.1:{DEFAULT_PORTS[engine]}"
    if not address.startswith(("http://", "https://")):
        raise ConfigError(f"--url must be an http:// or https:// URL, got {address!r}")
    return address


def writable(path: Path | None) -> None:
    """A ConfigError now, before the work, for an output path that cannot be written."""
    if path is None:
        return
    if path.is_dir():
        raise ConfigError(f"{path} is a directory; give a file name")
    if not path.parent.is_dir():
        raise ConfigError(f"cannot write {path}: {path.parent} is not a directory")


def path_text(path: Path | None) -> str | None:
    """A path option as the configs take it."""
    return None if path is None else str(path)
