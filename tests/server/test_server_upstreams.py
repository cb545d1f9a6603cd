"""Several upstream nodes: how they are named, and the order requests try them in."""

from __future__ import annotations

import pytest

from es_tour.errors import ConfigError
from es_tour.server import ServerConfig
from es_tour.server._upstream import Hosts

A, B, C = "http://127.0.0.1:1", "http://127.0.0.1:2", "http://127.0.0.1:3"


def test_upstreams_are_comma_separated_urls_and_the_first_is_the_base_url() -> None:
    config = ServerConfig(upstream=f"{A}/, {B}")
    assert config.upstreams == (A, B)
    assert config.base_url == A


@pytest.mark.parametrize("upstream", ["", ",", f"{A},ftp://x", f"{A},127.0.0.1:9200"])
def test_every_upstream_must_be_an_http_url(upstream: str) -> None:
    with pytest.raises(ConfigError):
        ServerConfig(upstream=upstream)


def test_nodes_are_taken_in_turn_and_each_request_may_try_them_all() -> None:
    hosts = Hosts((A, B, C))
    assert [hosts.order() for _ in range(4)] == [[A, B, C], [B, C, A], [C, A, B], [A, B, C]]


def test_a_node_that_failed_is_tried_last_until_its_time_is_up() -> None:
    hosts = Hosts((A, B, C), retry_after_s=60)
    hosts.failed(A)
    assert [hosts.order() for _ in range(3)] == [[B, C, A], [B, C, A], [C, B, A]]
    back = Hosts((A, B), retry_after_s=0)
    back.failed(A)
    assert back.order() == [A, B]
