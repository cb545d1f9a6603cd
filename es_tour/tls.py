"""How es-tour reaches an https engine: the CA it trusts, its client certificate, and the
credentials of the CLI's own calls. One place builds them for every client es-tour uses
(the official clients, the sidecar's aiohttp pool, httpx)."""

from __future__ import annotations

import os
import ssl
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from es_tour.errors import ConfigError

# The CLI's own engine calls (index, eval, train-agent, ...) authenticate with these; never
# from argv, where any user of the machine can read them.
USER_ENV, PASSWORD_ENV = "ES_TOUR_USER", "ES_TOUR_PASSWORD"


@dataclass(frozen=True)
class UpstreamTls:
    """ca_certs: a PEM bundle of the CAs an engine's certificate may chain to (None: the
    system's); verify: check the engine's certificate and host name (off only for a
    throwaway node); client_cert, client_key: a PEM certificate (and its key, when not in
    the same file) shown to an engine that asks for one.

    client_cert_for_callers: whether the certificate is shown on calls made for callers
    too. A command's calls are all its own (True: the default). The sidecar's are not: it
    sets this False unless its operator says otherwise (`--client-cert-for-callers`), and
    then shows the certificate only on its own identity's calls (settings lookups as the
    service, the vector store, health), since an engine that authenticates by certificate
    would take a caller for the sidecar."""

    ca_certs: str | None = None
    verify: bool = True
    client_cert: str | None = None
    client_key: str | None = None
    client_cert_for_callers: bool = True

    def __post_init__(self) -> None:
        if self.client_key is not None and self.client_cert is None:
            raise ConfigError("a client key needs its client certificate (--client-cert)")
        for name in ("ca_certs", "client_cert", "client_key"):
            path = getattr(self, name)
            if path is not None and not Path(path).is_file():
                raise ConfigError(f"{name} [{path}] is not a readable file")

    @property
    def own_calls_only(self) -> bool:
        """Whether calls made for callers go without the client certificate that the
        process's own calls show: they then need connections of their own."""
        return self.client_cert is not None and not self.client_cert_for_callers

    def context(self, *, for_callers: bool = False) -> ssl.SSLContext:
        """An SSL context for a client of the engine: for the process's own calls, or
        `for_callers` (without the client certificate when `own_calls_only`); a
        ConfigError for a file that is no PEM certificate or key."""
        try:
            context = ssl.create_default_context(cafile=self.ca_certs)
            if self.client_cert is not None and not (for_callers and self.own_calls_only):
                context.load_cert_chain(self.client_cert, self.client_key)
        except ssl.SSLError as exc:
            raise ConfigError(f"cannot load the TLS files ({exc.reason or exc})") from None
        if not self.verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context


def uses_https(urls: str | Iterable[str]) -> bool:
    return any(url.startswith("https://") for url in ([urls] if isinstance(urls, str) else urls))


def env_credentials() -> tuple[str, str] | None:
    """(user, password) from ES_TOUR_USER / ES_TOUR_PASSWORD; None when neither is set."""
    user, password = os.environ.get(USER_ENV), os.environ.get(PASSWORD_ENV)
    if user is None and password is None:
        return None
    if not user or password is None:
        raise ConfigError(f"set both {USER_ENV} and {PASSWORD_ENV}, or neither")
    return user, password
