"""A demo OpenSearch Security setup: TLS, certificate authentication, an admin, readers of
their own and the sidecar's service identity.

`es-tour engine start --security` writes it into the node's work dir once: with openssl a
CA, the node's certificate it signs (for the transport layer and for HTTPS) and one for a
sidecar in front of the node (`es-tour serve --tls-cert`, and its `--client-cert`: the node
authenticates a client that shows it as the sidecar, `SIDECAR_DN`, mapped to the service
role); random passwords hashed with the plugin's own Hasher, and the users and roles
below. The plugin loads them into its index on first start
(`plugins.security.allow_default_init_securityindex`).

The readers hold the `read` action group on their indices and nothing else that es-tour
asks for: every method of the sidecar runs on `read` alone (no mget, no multi term
vectors, no analyze, no cluster permission).
"""

from __future__ import annotations

import json
import secrets
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from es_tour.cluster._java import java_env
from es_tour.errors import EngineSetupError

# Indices the demo readers may read: those named tour-a*, and for `reader-ab` tour-b* too.
INDEX_A, INDEX_B = "tour-a*", "tour-b*"
# Search (ids searches included) and single-doc term vectors: all that any method asks of
# an index, on a caller's behalf.
_READ = ["read"]
# Reading `index.tour.*` lets the sidecar serve an index by its settings alone.
_READ_SETTINGS = [*_READ, "indices:monitor/settings/get"]
# The demo's document- and field-level security: `reader-dls` sees the docs of one topic
# (a `topic` keyword, as `es-tour index --metadata` writes it), `reader-fls` every doc
# without its `text`.
DLS_QUERY = {"term": {"topic": "biology"}}
FLS_HIDDEN = "text"
FLS_HIDDEN_VECTOR = "embedding"  # `reader-fls-vector` sees every doc without its vector
# The sidecar's service identity: any index's `index.tour.*` settings, and the labeler
# vector store (es-tour-vectors-*) alone to read and write. Bulk is a cluster action to the
# plugin; the store is read with an ids search, which needs no cluster permission.
STORE_INDICES = "es-tour-vectors-*"
_Role = tuple[list[str], list[dict[str, object]]]  # (cluster, index permissions)
_SERVICE: _Role = (["indices:data/write/bulk"], [
    {"index_patterns": ["*"], "allowed_actions": ["indices:monitor/settings/get"]},
    {"index_patterns": [STORE_INDICES],
     "allowed_actions": ["crud", "create_index", "indices:admin/get"]}])
# role -> (cluster permissions, index permissions). The readers have no cluster permission
# at all, not even `cluster:monitor/main` (GET /): the sidecar must serve them whoever came
# before them. `tour_reader_app` is an application's usual role: `read` on its indices,
# and nothing else, not even their settings.
_ROLES: dict[str, _Role] = {
    "tour_reader_a": ([], [{"index_patterns": [INDEX_A], "allowed_actions": _READ}]),
    "tour_reader_ab": ([], [{"index_patterns": [INDEX_A, INDEX_B],
                             "allowed_actions": _READ_SETTINGS}]),
    "tour_reader_index": ([], [{"index_patterns": [INDEX_A], "allowed_actions": _READ_SETTINGS}]),
    "tour_reader_app": ([], [{"index_patterns": [INDEX_A], "allowed_actions": _READ}]),
    "tour_reader_dls": ([], [{"index_patterns": [INDEX_A], "allowed_actions": _READ,
                              "dls": json.dumps(DLS_QUERY)}]),
    "tour_reader_fls": ([], [{"index_patterns": [INDEX_A], "allowed_actions": _READ,
                              "fls": [f"~{FLS_HIDDEN}"]}]),
    "tour_reader_fls_vector": ([], [{"index_patterns": [INDEX_A], "allowed_actions": _READ,
                                     "fls": [f"~{FLS_HIDDEN_VECTOR}"]}]),
    "es_tour_service": _SERVICE,
}
USERS = {"admin": "all_access", "reader-a": "tour_reader_a", "reader-ab": "tour_reader_ab",
         "reader-index": "tour_reader_index", "reader-app": "tour_reader_app",
         "reader-dls": "tour_reader_dls", "reader-fls": "tour_reader_fls",
         "reader-fls-vector": "tour_reader_fls_vector",
         "es-tour-service": "es_tour_service"}
# Who a client showing the sidecar's certificate is (certificate authentication takes the
# whole subject as the user name), and the role it is mapped to.
SIDECAR_DN = "CN=es-tour-sidecar,O=es-tour demo"
_CERTIFICATE_USERS = {SIDECAR_DN: "es_tour_service"}
_NODE_DN = "CN=es-tour-node,O=es-tour demo"


@dataclass(frozen=True)
class SecuritySetup:
    """The files of one secured node, kept under its work dir across restarts."""

    directory: Path

    @property
    def users_file(self) -> Path:
        return self.directory / "users.json"

    @property
    def ca_file(self) -> Path:
        """The CA that signed the node's certificate and the sidecar's."""
        return self.directory / "root-ca.pem"

    @property
    def sidecar_cert(self) -> tuple[Path, Path]:
        """(certificate, key) a sidecar on this machine may listen with: 127.0.0.1 and
        localhost, signed by `ca_file`."""
        return self.directory / "sidecar.pem", self.directory / "sidecar-key.pem"

    def exists(self) -> bool:
        return self.users_file.is_file()

    def current(self) -> bool:
        """Whether the setup has every demo user and the authentication config this es-tour
        makes; an older one's node must be made afresh (its security index keeps what it
        loaded on first start)."""
        return (self.exists() and set(USERS) <= set(self.passwords())
                and (self.directory / "config.yml").is_file())

    def passwords(self) -> dict[str, str]:
        """user -> password of the demo users (readable by the node's owner only)."""
        return dict(json.loads(self.users_file.read_text()))

    def ensure(self, home: Path) -> None:
        """Certificates, password hashes and the security yml, made once."""
        if self.exists():
            return
        self.directory.mkdir(parents=True, exist_ok=True)
        _certificates(self.directory)
        passwords = {user: secrets.token_urlsafe(18) for user in USERS}
        hashes = {user: _bcrypt(home, password) for user, password in passwords.items()}
        (self.directory / "internal_users.yml").write_text(_internal_users(hashes))
        (self.directory / "roles.yml").write_text(_roles())
        (self.directory / "roles_mapping.yml").write_text(_roles_mapping())
        (self.directory / "config.yml").write_text(_authentication())
        self.users_file.touch(mode=0o600)
        self.users_file.write_text(json.dumps(passwords))

    def install(self, config: Path) -> dict[str, object]:
        """Copy the files into a node's config dir; returns the settings that enable them."""
        for name in ("root-ca.pem", "node.pem", "node-key.pem"):
            shutil.copy(self.directory / name, config / name)
        for name in ("internal_users.yml", "roles.yml", "roles_mapping.yml", "config.yml"):
            shutil.copy(self.directory / name, config / "opensearch-security" / name)
        return {
            "plugins.security.ssl.transport.pemcert_filepath": "node.pem",
            "plugins.security.ssl.transport.pemkey_filepath": "node-key.pem",
            "plugins.security.ssl.transport.pemtrustedcas_filepath": "root-ca.pem",
            "plugins.security.ssl.transport.enforce_hostname_verification": False,
            "plugins.security.ssl.http.enabled": True,
            "plugins.security.ssl.http.pemcert_filepath": "node.pem",
            "plugins.security.ssl.http.pemkey_filepath": "node-key.pem",
            "plugins.security.ssl.http.pemtrustedcas_filepath": "root-ca.pem",
            # a client may show a certificate (the sidecar's), and need not
            "plugins.security.ssl.http.clientauth_mode": "OPTIONAL",
            "plugins.security.nodes_dn": [_NODE_DN],
            "plugins.security.allow_default_init_securityindex": True,
            "plugins.security.restapi.roles_enabled": ["all_access"],
        }


def _certificates(directory: Path) -> None:
    """A self-signed CA, and a node and a sidecar certificate it signs (PKCS#8 keys, as the
    plugin wants)."""
    if shutil.which("openssl") is None:
        raise EngineSetupError("--security needs openssl to make the demo certificates; "
                               "install it, e.g. `apt-get install openssl`")
    extensions = directory / "node.ext"
    extensions.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n"
                          "extendedKeyUsage=serverAuth,clientAuth\n")
    commands = [["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "3650", "-subj",
                 "/O=es-tour demo/CN=es-tour demo CA", "-keyout", "root-ca-key.pem",
                 "-out", "root-ca.pem"]]
    for name, subject in (("node", "/O=es-tour demo/CN=es-tour-node"),
                          ("sidecar", "/O=es-tour demo/CN=es-tour-sidecar")):
        commands += [
            ["req", "-newkey", "rsa:2048", "-nodes", "-subj", subject,
             "-keyout", f"{name}-key.pem", "-out", f"{name}.csr"],
            ["x509", "-req", "-in", f"{name}.csr", "-CA", "root-ca.pem", "-CAkey",
             "root-ca-key.pem", "-CAcreateserial", "-days", "3650", "-extfile", "node.ext",
             "-out", f"{name}.pem"],
        ]
    for command in commands:
        result = subprocess.run(["openssl", *command], cwd=directory, capture_output=True,
                                text=True)
        if result.returncode != 0:
            raise EngineSetupError(f"openssl {command[0]} failed: {result.stderr.strip()[-300:]}")


def _bcrypt(home: Path, password: str) -> str:
    """The plugin's Hasher; the password goes by environment, not on a command line."""
    tool = home / "plugins" / "opensearch-security" / "tools" / "hash.sh"
    env = {**java_env(), "ES_TOUR_DEMO_PASSWORD": password}
    result = subprocess.run(["bash", str(tool), "-env", "ES_TOUR_DEMO_PASSWORD"], env=env,
                            capture_output=True, text=True)
    digest = result.stdout.strip().splitlines()[-1:] if result.returncode == 0 else []
    if not digest or not digest[0].startswith("$2"):
        raise EngineSetupError(f"could not hash a demo password: {result.stderr.strip()[-300:]}")
    return digest[0]


def _yaml(kind: str, entries: dict[str, dict[str, object]]) -> str:
    """Security yml: JSON is YAML, so each entry is written as one JSON mapping."""
    lines = ["---", "_meta:", f"  type: {json.dumps(kind)}", "  config_version: 2"]
    lines += [f"{json.dumps(name)}: {json.dumps(entry)}" for name, entry in entries.items()]
    return "\n".join(lines) + "\n"


def _internal_users(hashes: dict[str, str]) -> str:
    return _yaml("internalusers", {
        user: {"hash": digest, "reserved": user == "admin", "description": "es-tour demo user"}
        for user, digest in hashes.items()})


def _roles() -> str:
    return _yaml("roles", {
        role: {"cluster_permissions": cluster, "index_permissions": indices}
        for role, (cluster, indices) in _ROLES.items()})


def _roles_mapping() -> str:
    users: dict[str, list[str]] = {}
    for user, role in [*USERS.items(), *_CERTIFICATE_USERS.items()]:
        users.setdefault(role, []).append(user)
    return _yaml("rolesmapping", {role: {"users": names} for role, names in users.items()})


def _authentication() -> str:
    """Two ways in over HTTPS: a client certificate the node's CA signed (its subject is the
    user name), tried first, then HTTP basic against the internal users (which asks an
    anonymous caller for credentials: 401). No anonymous access."""
    lines = ["---", "_meta:", '  type: "config"', "  config_version: 2",
             "config:", "  dynamic:", "    http:", "      anonymous_auth_enabled: false",
             "    authc:"]
    domains = {
        "clientcert_auth_domain": {
            "http_enabled": True, "transport_enabled": False, "order": 0,
            "http_authenticator": {"type": "clientcert", "challenge": False},
            "authentication_backend": {"type": "noop"}},
        "basic_internal_auth_domain": {
            "http_enabled": True, "transport_enabled": True, "order": 1,
            "http_authenticator": {"type": "basic", "challenge": True},
            "authentication_backend": {"type": "intern"}},
    }
    lines += [f"      {json.dumps(name)}: {json.dumps(domain)}" for name, domain in domains.items()]
    return "\n".join(lines) + "\n"
