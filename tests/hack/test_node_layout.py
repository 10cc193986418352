"""hack/node_layout.py: every real node's addresses inside the safe range, apart from each other and from
kwok's, and its folders and names its own."""

from __future__ import annotations

import ipaddress
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))  # hack/ scripts import each other by plain name

from harness import KWOK_POD_CIDR, SAFE_RANGE, SERVICE_CIDR  # noqa: E402
from node_layout import HOST_IP, MAX_NODES, NODES_SUBNET, RealNode, node_count  # noqa: E402


def test_addresses_stay_in_the_safe_range_and_never_overlap():
    safe, nodes_net = ipaddress.ip_network(SAFE_RANGE), ipaddress.ip_network(NODES_SUBNET)
    taken = [ipaddress.ip_network(KWOK_POD_CIDR), ipaddress.ip_network(SERVICE_CIDR), nodes_net]
    assert ipaddress.ip_address(HOST_IP) in nodes_net
    ips = set()
    for index in range(1, MAX_NODES + 1):
        node = RealNode(index)
        pods = ipaddress.ip_network(node.pod_subnet)
        assert pods.subnet_of(safe) and ipaddress.ip_address(node.pod_gateway) in pods
        assert not any(pods.overlaps(other) for other in taken), node
        taken.append(pods)
        assert ipaddress.ip_address(node.ip) in nodes_net and node.ip != HOST_IP
        ips.add(node.ip)
    assert len(ips) == MAX_NODES


def test_each_node_has_names_folders_and_a_cgroup_of_its_own():
    first, second = RealNode(1), RealNode(2)
    for field in ("name", "netns", "host_link", "run_dir", "state_dir", "containerd_socket", "containerd_root",
                  "cgroup_root", "pod_logs"):
        assert getattr(first, field) != getattr(second, field), field
    assert first.component("kubelet") == "kubelet-1"
    assert len(first.host_link) <= 15  # a Linux interface name
    assert first.in_netns("kubelet")[:2] == ["nsenter", "--net=/run/netns/mydb-node-1"]


def test_the_count_comes_from_the_environment_within_bounds(monkeypatch):
    monkeypatch.delenv("MYDB_REAL_NODES", raising=False)
    assert node_count() == 3
    monkeypatch.setenv("MYDB_REAL_NODES", "5")
    assert node_count() == 5
    monkeypatch.setenv("MYDB_REAL_NODES", str(MAX_NODES + 1))
    with pytest.raises(SystemExit, match="between 1 and"):
        node_count()
