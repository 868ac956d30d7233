"""``free_ports(n)``: n distinct TCP ports on LOOPBACK that a server can bind, below the
kernel's ephemeral range."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from harness.processes import LOOPBACK, free_ports


def ephemeral_low() -> int:
    return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])


def test_nine_distinct_ports_that_can_all_be_bound_at_once() -> None:
    ports = free_ports(9)
    assert len(ports) == 9
    assert len(set(ports)) == 9
    sockets = []
    try:
        for port in ports:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sockets.append(s)
            s.bind((LOOPBACK, port))
            s.listen()
    finally:
        for s in sockets:
            s.close()


@pytest.mark.skipif(ephemeral_low() <= 12000, reason="no room below the ephemeral range")
def test_the_ports_are_below_the_ephemeral_range() -> None:
    assert all(port < ephemeral_low() for port in free_ports(20))


def test_excluded_and_taken_ports_are_never_picked() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind((LOOPBACK, 0))
        taken.listen()
        busy = taken.getsockname()[1]
        excluded = set(free_ports(5))
        for _ in range(20):
            picked = set(free_ports(5, exclude=excluded))
            assert not picked & excluded
            assert busy not in picked


def test_zero_ports_is_none_and_a_negative_count_is_an_error() -> None:
    assert free_ports(0) == ()
    with pytest.raises(ValueError, match="0 or more"):
        free_ports(-1)
