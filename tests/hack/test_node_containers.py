"""hack/node_containers.py: which of the kept containerd store's images are forgotten at `up`."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "hack"))  # hack/ scripts import each other by plain name

from node_containers import is_tag, stale_images  # noqa: E402

OLD, NEW, PG = "sha256:" + "a" * 64, "sha256:" + "b" * 64, "sha256:" + "c" * 64
OPERATOR = "127.0.0.1:16500/mydb/mydatabase-operator:0.1.0"
POSTGRES = "127.0.0.1:16500/library/postgres:15.2"


def test_tags_are_told_from_digests_and_ids() -> None:
    assert is_tag(OPERATOR) and is_tag("docker.io/library/postgres:15")
    assert not is_tag(f"127.0.0.1:16500/mydb/mydatabase-operator@{OLD}")
    assert not is_tag(OLD)
    assert not is_tag("127.0.0.1:16500/library/postgres")  # a port alone is no tag


def test_an_image_rebuilt_under_its_tag_is_forgotten_with_its_other_names() -> None:
    """The operator's image keeps its tag across builds: the store's copy would run the old code."""
    stored = {
        OPERATOR: OLD, f"127.0.0.1:16500/mydb/mydatabase-operator@{OLD}": OLD, "sha256:" + "d" * 64: OLD,
        POSTGRES: PG, f"127.0.0.1:16500/library/postgres@{PG}": PG, "sha256:" + "e" * 64: PG,
    }
    assert stale_images(stored, {OPERATOR: NEW, POSTGRES: PG}) == sorted(
        [OPERATOR, f"127.0.0.1:16500/mydb/mydatabase-operator@{OLD}", "sha256:" + "d" * 64])


def test_current_images_stay_and_a_tag_the_registry_lost_goes() -> None:
    stored = {POSTGRES: PG, "127.0.0.1:16500/library/postgres:15": PG, "docker.io/library/not-here:1": OLD}
    registry = {POSTGRES: PG, "127.0.0.1:16500/library/postgres:15": PG, "docker.io/library/not-here:1": None}
    assert stale_images(stored, registry) == ["docker.io/library/not-here:1"]
    assert stale_images({POSTGRES: PG}, {POSTGRES: PG}) == []


def test_content_another_kept_tag_names_keeps_its_other_names() -> None:
    """postgres:15 moved on, postgres:15.2 did not: the digest and id names of 15.2's content stay."""
    stored = {POSTGRES: PG, "127.0.0.1:16500/library/postgres:15": PG, f"127.0.0.1:16500/library/postgres@{PG}": PG}
    registry = {POSTGRES: PG, "127.0.0.1:16500/library/postgres:15": NEW}
    assert stale_images(stored, registry) == ["127.0.0.1:16500/library/postgres:15"]


def test_a_containerd_that_is_not_running_is_not_dialled(monkeypatch) -> None:
    """`down` of a node already down: ctr's dial of a socket nobody serves waits 10 s (the serial pass's last
    `down`, after the down test's own, took that long)."""
    import node_containers

    def no_dial(*args: str, check: bool = True) -> None:
        raise AssertionError(f"ctr {' '.join(args)} was run with no containerd to answer it")

    from node_layout import RealNode

    monkeypatch.setattr(node_containers, "running_pid", lambda name: None)
    monkeypatch.setattr(node_containers, "ctr", no_dial)
    node_containers.forget_containers(RealNode(2))


def test_a_containers_node_is_read_from_its_cgroup() -> None:
    """Each real node's kubelet puts its pods under its own cgroup root: a lost node's processes alone are killed."""
    from node_containers import container_node

    assert container_node("5:memory:/mydb-node-2/kubepods/burstable/pod1/abc\n4:cpu:/mydb-node-2/kubepods\n") == 2
    assert container_node("5:memory:/user.slice\n") is None
    assert container_node("5:memory:/kubepods/besteffort/pod1/abc\n") is None  # no node of ours
