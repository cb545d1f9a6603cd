"""`es-tour engine start|stop|status|logs`: local engines for dev, demo and tests, one node or
a cluster of several on loopback."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from es_tour.cli._app import app
from es_tour.cli._errors import clean_errors
from es_tour.cluster import USERS, VERSIONS, LocalCluster, LocalNode, distribution

engine_app = typer.Typer(no_args_is_help=True, help=__doc__)
app.add_typer(engine_app, name="engine")
console = Console()

EngineOption = Annotated[str, typer.Option("--engine", "-e", help="opensearch or elasticsearch")]
VersionOption = Annotated[str | None, typer.Option(
    help="the engine version: " + "; ".join(f"{name} {', '.join(versions)}"
                                            for name, versions in VERSIONS.items())
    + " (default: the first; the newer majors run on JDK 21+, found under /usr/lib/jvm "
      "when JAVA_HOME is older)")]
PortOption = Annotated[int | None, typer.Option(
    help="HTTP port (default 9200 / 9210); a cluster's nodes take the next ones too")]


@engine_app.command()
@clean_errors
def start(
    engine: EngineOption = "opensearch",
    port: PortOption = None,
    heap: Annotated[str, typer.Option(help="JVM heap, e.g. 512m or 1g")] = "1g",
    timeout: Annotated[float, typer.Option(help="seconds to wait for health")] = 180.0,
    plugin: Annotated[list[Path] | None, typer.Option(help="a plugin zip to install")] = None,
    security: Annotated[bool, typer.Option(
        help="OpenSearch only: the Security plugin with demo users admin, readers without "
             "any cluster permission: reader-a (read on tour-a*), reader-ab (tour-a* and "
             "tour-b*, and their settings), reader-index (tour-a* and their settings), "
             "reader-app (exactly read on tour-a*), reader-dls (tour-a*, topic biology "
             "only), reader-fls (tour-a*, no text field), and es-tour-service (the "
             "sidecar's service identity: settings and the vector store; the node also "
             "takes the sidecar's certificate for it)")] = False,
    nodes: Annotated[int, typer.Option(
        help="nodes in the cluster, on consecutive ports; indices get one replica from 2")] = 1,
    transport_port: Annotated[int | None, typer.Option(
        help="a cluster's first transport port (default: the HTTP port + 20000)")] = None,
    version: VersionOption = None,
) -> None:
    """Fetch (once), configure and start a node, or a cluster of --nodes nodes; returns at
    once if they already run."""
    cluster = LocalCluster(engine, port, nodes, heap, transport_port, security=security,
                           version=version)
    for status in cluster.start(timeout, plugins=plugin or []):
        console.print(f"{engine} {status.version} is {status.health} at {status.url}"
                      + (f" ({status.nodes} nodes)" if nodes > 1 else ""))
    first = cluster.nodes[0]
    if first.secured:
        console.print(f"security on: users {', '.join(USERS)}; their passwords are in "
                      f"{first.security.users_file}; HTTPS with the CA {first.ca_certs}")


@engine_app.command()
@clean_errors
def stop(engine: EngineOption = "opensearch", port: PortOption = None) -> None:
    """Stop the node (or every node of the cluster) started by `es-tour engine start` on
    this port, by their recorded pids."""
    cluster = LocalCluster(engine, port)
    for node, stopped in zip(cluster.nodes, cluster.stop(), strict=True):
        console.print(f"stopped {engine} at {node.url}" if stopped
                      else f"{engine} at {node.url} was not running")


@engine_app.command()
@clean_errors
def status(
    engine: Annotated[str | None, typer.Option("--engine", "-e")] = None,
    port: PortOption = None,
) -> None:
    """Version and health of the local nodes (both engines unless --engine is given)."""
    table = Table("engine", "url", "version", "health", "nodes", "pid")
    for name in [engine] if engine else list(VERSIONS):
        for s in LocalCluster(name, port).status():
            table.add_row(name, s.url, s.version or "-", s.health or "stopped",
                          str(s.nodes or "-"), str(s.pid or "-"))
    console.print(table)


@engine_app.command()
@clean_errors
def jdk(engine: EngineOption = "opensearch", version: VersionOption = None) -> None:
    """The JDK home that this engine version runs on (`make plugin` builds the Java 21 plugin
    zips with it)."""
    typer.echo(distribution(engine, version).java_home())


@engine_app.command()
@clean_errors
def logs(
    engine: EngineOption = "opensearch",
    port: PortOption = None,
    lines: Annotated[int, typer.Option("-n")] = 50,
) -> None:
    """The last lines of the node's log."""
    typer.echo(LocalNode(engine, port).logs(lines))
