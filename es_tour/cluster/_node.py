"""Engine nodes on loopback, each with its config, data, logs and pid under a work dir: one
node alone, or several joined into one cluster (`LocalCluster`)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from es_tour.cluster._distribution import Distribution, distribution
from es_tour.cluster._security import SecuritySetup
from es_tour.errors import ConfigError, EngineSetupError
from es_tour.paths import work_dir
from es_tour.tls import UpstreamTls

DEFAULT_PORTS = {"opensearch": 9200, "elasticsearch": 9210}
_UNPRIVILEGED_UID = 65534  # `nobody`: the engines refuse to run as root


@dataclass(frozen=True)
class NodeStatus:
    engine: str
    url: str
    running: bool
    version: str | None = None
    health: str | None = None
    pid: int | None = None
    nodes: int | None = None  # in the cluster, as this node sees it


@dataclass(frozen=True)
class Peers:
    """Who a cluster's nodes find at startup: their names and loopback transport ports."""

    cluster: str
    names: tuple[str, ...]
    transport_ports: tuple[int, ...]


class LocalNode:
    """One locally started engine node, found again by its engine and HTTP port.

    Alone it is a single-node cluster; with `peers` it joins them. Its transport port is
    `transport_port`, or the first free one in port+20000..port+20099. `version` picks the
    distribution it starts (default: the engine's first in VERSIONS); a running node is found
    by its port whatever its version. The version that last ran is recorded in its work dir:
    its data is that version's, and another version is refused it (`claim_data`).
    """

    def __init__(self, engine: str, port: int | None = None, heap: str = "1g",
                 transport_port: int | None = None, peers: Peers | None = None, *,
                 security: bool = False, version: str | None = None):
        distribution(engine, version)  # an unknown engine or version is a clear error first
        self.engine = engine
        self.port = port or DEFAULT_PORTS[engine]
        self.heap = heap
        self.dir = work_dir() / f"{engine}-{self.port}"
        self.name = f"es-tour-{engine}-{self.port}"
        self.transport_port = transport_port
        self.peers = peers
        self.security = SecuritySetup(self.dir / "security")
        # A node once started with --security stays secured (its data holds the security index).
        self.secured = security or self.security.exists()
        # a secured node speaks https with the certificate its own CA signed
        self.url = f"{'https' if self.secured else 'http'}://127.0.0.1:{self.port}"
        self.dist: Distribution = distribution(engine, version, security=self.secured)

    def credentials(self, user: str = "admin") -> tuple[str, str] | None:
        """(user, password) of a demo user of a secured node; None for a plain node."""
        if not (self.secured and self.security.exists()):
            return None
        passwords = self.security.passwords()
        if user not in passwords:
            raise EngineSetupError(
                f"no demo user [{user}] on {self.url}: its security setup predates it; stop "
                f"the node, delete {self.dir} and start it again to make every demo user")
        return user, passwords[user]

    @property
    def ca_certs(self) -> str | None:
        """The CA bundle a client checks a secured node's https certificate with."""
        return str(self.security.ca_file) if self.secured else None

    @property
    def pid_file(self) -> Path:
        return self.dir / "node.pid"

    @property
    def version_file(self) -> Path:
        return self.dir / "data.version"

    @property
    def log_file(self) -> Path:  # the engines name their log after the cluster
        cluster = self.peers.cluster if self.peers else f"es-tour-{self.engine}"
        return self.dir / "logs" / f"{cluster}.log"

    def pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        return pid if _alive(pid) else None

    def start(self, timeout: float = 180.0, plugins: Sequence[Path] = ()) -> NodeStatus:
        """Start the node unless it already runs; wait until the cluster is at least yellow.

        `plugins` are local plugin zips installed into the distribution first.
        """
        if self.pid() is None:
            self.claim_data()  # before anything is fetched or installed
            for plugin in plugins:
                self.dist.install_local_plugin(plugin)
            self.launch()
        return self.wait_healthy(timeout)

    def launch(self) -> None:
        """Start the engine process (installed with its plugins, its data claimed) and return
        at once."""
        if _port_in_use(self.port):
            raise EngineSetupError(
                f"port {self.port} is already in use by another process; "
                "stop it or pass --port with a free port"
            )
        home = self.dist.ensure_installed()
        if self.secured:
            self.security.ensure(home)
        self._write_config(home)
        # a pid file left by a killed node would read as "started, then died" at once
        self.pid_file.unlink(missing_ok=True)
        env = {
            **self.dist.java_env(),
            "HOME": str(self.dir),
            "ES_PATH_CONF": str(self.dir / "config"),
            "OPENSEARCH_PATH_CONF": str(self.dir / "config"),
            "ES_TMPDIR": str(self.dir / "tmp"),
            "OPENSEARCH_TMPDIR": str(self.dir / "tmp"),
        }
        command = [str(self.dist.launcher), "-d", "-p", str(self.pid_file)]
        if os.geteuid() == 0:
            _chown_tree(self.dir, _UNPRIVILEGED_UID)
            command = [
                "setpriv",
                f"--reuid={_UNPRIVILEGED_UID}",
                f"--regid={_UNPRIVILEGED_UID}",
                "--clear-groups",
                *command,
            ]
        # The daemon inherits the launcher's stdout: a file, not a pipe, or run() never returns.
        launcher_log = self.dir / "logs" / "launcher.log"
        with launcher_log.open("w") as out:
            code = subprocess.run(command, env=env, stdout=out, stderr=subprocess.STDOUT).returncode
        if code != 0:
            raise EngineSetupError(
                f"{self.engine} failed to start: {self._last_error(launcher_log.read_text())}"
            )

    def claim_data(self) -> None:
        """Record this node's version as its data's; an EngineSetupError when the data dir
        holds another version's data. An older engine cannot read a newer one's indices (a
        CorruptIndexException), and a newer one upgrades them in place for good."""
        wanted = self.dist.version
        data = self.dir / "data"
        try:
            recorded = self.version_file.read_text().strip()
        except OSError:
            recorded = None  # a new dir, or one from before versions were recorded
        if recorded and recorded != wanted and data.is_dir() and any(data.iterdir()):
            harm = ("cannot read it" if _release(wanted) < _release(recorded)
                    else f"would upgrade it for good, past what {recorded} reads")
            raise EngineSetupError(
                f"port {self.port} holds the data of {self.engine} {recorded}, and "
                f"{self.engine} {wanted} {harm}: start {recorded} there (--version "
                f"{recorded}), pass another --port, or remove {self.dir}")
        self.dir.mkdir(parents=True, exist_ok=True)
        self.version_file.write_text(f"{wanted}\n")

    def wait_healthy(self, timeout: float, nodes: int = 1) -> NodeStatus:
        """Wait until the cluster is yellow or green and this node sees `nodes` nodes."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status = self.status()
            if status.health in ("green", "yellow") and (status.nodes or 0) >= nodes:
                return status
            if self.pid_file.exists() and self.pid() is None:
                break  # the process wrote its pid and has since died
            time.sleep(1.0)
        raise EngineSetupError(
            f"{self.engine} on {self.url} was not healthy within {timeout:.0f}s: "
            f"{self._last_error(self.logs(40) if self.log_file.exists() else '')}"
        )

    def stop(self, timeout: float = 60.0) -> bool:
        """Stop the node by its recorded pid; returns False if it was not running."""
        pid = self.pid()
        if pid is None:
            return False
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
        self.pid_file.unlink(missing_ok=True)
        return True

    def status(self) -> NodeStatus:
        pid = self.pid()
        try:
            with httpx.Client(auth=self.credentials(), timeout=2.0,
                              verify=UpstreamTls(ca_certs=self.ca_certs).context()) as client:
                # GET / lives in a module the Elasticsearch integ-test zip lacks; _nodes is core.
                nodes = client.get(f"{self.url}/_nodes/_local?filter_path=nodes.*.version")
                version = next(iter(nodes.json()["nodes"].values()))["version"]
                health = client.get(f"{self.url}/_cluster/health").json()
            color, nodes_seen = health["status"], health["number_of_nodes"]
        except (httpx.HTTPError, ValueError, KeyError, StopIteration):
            return NodeStatus(self.engine, self.url, running=pid is not None, pid=pid)
        return NodeStatus(self.engine, self.url, running=True, version=version, health=color,
                          pid=pid, nodes=nodes_seen)

    def logs(self, lines: int = 50) -> str:
        """The log's last `lines`; a ConfigError when this node never wrote one."""
        if not self.log_file.exists():
            raise ConfigError(f"no {self.engine} log at {self.log_file}: no node ran on port "
                              f"{self.port} (`es-tour engine start --port {self.port}`)")
        return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-lines:])

    def _write_config(self, home: Path) -> None:
        config = self.dir / "config"
        shutil.rmtree(config, ignore_errors=True)
        shutil.copytree(home / "config", config)
        for sub in ("data", "logs", "tmp"):
            (self.dir / sub).mkdir(parents=True, exist_ok=True)
        settings: dict[str, object] = {
            "cluster.name": f"es-tour-{self.engine}",
            "node.name": self.name,
            "path.data": str(self.dir / "data"),
            "path.logs": str(self.dir / "logs"),
            "network.host": "127.0.0.1",
            "http.port": self.port,
            # Far from the HTTP ports: test nodes' HTTP ports sit 50 apart (9250, 9300, ...),
            # and a transport range at +100 took another checkout's HTTP port.
            "transport.port": self.transport_port or f"{self.port + 20000}-{self.port + 20099}",
            "discovery.type": "single-node",
            # CI disks are often nearly full; a single test node must still allocate shards.
            "cluster.routing.allocation.disk.threshold_enabled": False,
        }
        if self.peers is not None:
            del settings["discovery.type"]
            manager_key = ("cluster.initial_master_nodes" if self.engine == "elasticsearch"
                           else "cluster.initial_cluster_manager_nodes")
            settings.update({
                "cluster.name": self.peers.cluster,
                "discovery.seed_hosts": [f"127.0.0.1:{p}" for p in self.peers.transport_ports],
                manager_key: list(self.peers.names),
            })
        if self.engine == "elasticsearch":
            settings["xpack.security.enabled"] = False
        if self.secured:
            settings.update(self.security.install(config))
        (config / f"{self.engine}.yml").write_text(
            "".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items())
        )
        # jvm.options names gc logs and heap dumps relative to the engine home, which the
        # engine account may not write to.
        jvm_options = config / "jvm.options"
        jvm_options.write_text(
            jvm_options.read_text()
            .replace("=logs/", f"={self.dir}/logs/")
            .replace("file=logs/", f"file={self.dir}/logs/")
            .replace("HeapDumpPath=data", f"HeapDumpPath={self.dir}/data")
        )
        (config / "jvm.options.d" / "heap.options").write_text(
            f"-Xms{self.heap}\n-Xmx{self.heap}\n"
        )

    @staticmethod
    def _last_error(text: str) -> str:
        lines = [line for line in text.splitlines() if line.strip()]
        errors = [line for line in lines if "ERROR" in line or "Exception" in line]
        return (errors or lines or ["no output"])[-1][:500]


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _chown_tree(root: Path, uid: int) -> None:
    for path in (root, *root.rglob("*")):
        os.chown(path, uid, uid, follow_symlinks=False)


class LocalCluster:
    """`nodes` engine nodes on consecutive HTTP ports from `port` (transport ports from
    `transport_port`, default port + 20000), joined into one cluster by seed hosts on loopback.

    Its size and transport ports are recorded beside the first node, so start, stop and
    status find every node again from the first port alone. One node is a plain `LocalNode`.
    """

    def __init__(self, engine: str, port: int | None = None, nodes: int | None = None,
                 heap: str = "1g", transport_port: int | None = None, *,
                 security: bool = False, version: str | None = None):
        first = LocalNode(engine, port, heap, transport_port, security=security, version=version)
        self._layout_file = first.dir / "cluster.json"
        recorded = self._recorded_layout()
        size = nodes or recorded.get("nodes", 1)
        if size < 1:
            raise EngineSetupError(f"a cluster needs at least one node, got {size}")
        if size == 1:
            self.nodes = [first]
            return
        if first.secured:
            raise EngineSetupError("--security starts one node; a secured cluster is not set up")
        transport = transport_port or recorded.get("transport_port") or first.port + 20000
        self._layout = {"nodes": size, "transport_port": transport}
        names = tuple(f"es-tour-{engine}-{first.port + i}" for i in range(size))
        peers = Peers(f"es-tour-{engine}-{first.port}", names,
                      tuple(transport + i for i in range(size)))
        self.nodes = [LocalNode(engine, first.port + i, heap, transport + i, peers,
                                version=version) for i in range(size)]

    @property
    def urls(self) -> list[str]:
        return [node.url for node in self.nodes]

    def start(self, timeout: float = 180.0, plugins: Sequence[Path] = ()) -> list[NodeStatus]:
        """Start the nodes not running yet; wait until all have joined and it is yellow or
        green. Returns at once when they already run."""
        first = self.nodes[0]
        if len(self.nodes) == 1:
            self._layout_file.unlink(missing_ok=True)
            return [first.start(timeout, plugins)]
        pending = [node for node in self.nodes if node.pid() is None]
        for node in pending:  # every node's data claimed before anything is installed or started
            node.claim_data()
        for plugin in plugins:
            first.dist.install_local_plugin(plugin)
        for node in pending:
            node.launch()
        self._layout_file.write_text(json.dumps(self._layout))
        return [node.wait_healthy(timeout, nodes=len(self.nodes)) for node in self.nodes]

    def stop(self, timeout: float = 60.0) -> list[bool]:
        stopped = [node.stop(timeout) for node in self.nodes]
        self._layout_file.unlink(missing_ok=True)
        return stopped

    def status(self) -> list[NodeStatus]:
        return [node.status() for node in self.nodes]

    def _recorded_layout(self) -> dict[str, int]:
        try:
            return dict(json.loads(self._layout_file.read_text()))
        except (OSError, ValueError):
            return {}
