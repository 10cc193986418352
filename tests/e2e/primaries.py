"""Tools of the failover tests on the real node: hang a server, write through the read-write Service as a
client would, and ask each server what it is."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import psql
from .realnode import images, on_real_node
from .waiting import get_json, wait_for


def container_pids(cluster, namespace: str, pod: str, container: str = "postgres") -> dict[int, int]:
    """Host PID -> PID inside the container, for every process of the pod's CONTAINER on this host."""
    statuses = get_json(cluster, "-n", namespace, "pod", pod)["status"]["containerStatuses"]
    container_id = next(s["containerID"] for s in statuses if s["name"] == container).split("//", 1)[1]
    found = {}
    for cgroup in Path("/proc").glob("[0-9]*/cgroup"):
        try:
            if container_id not in cgroup.read_text():
                continue
            nspid = next(
                line for line in (cgroup.parent / "status").read_text().splitlines() if line.startswith("NSpid:")
            )
        except (OSError, StopIteration):  # gone meanwhile
            continue
        found[int(cgroup.parent.name)] = int(nspid.split()[-1])
    assert found, f"no process of {namespace}/{pod}'s {container} container on this host"
    return found


def postgres_pid(cluster, namespace: str, pod: str) -> int:
    """The host PID of the pod's PostgreSQL postmaster: the postgres container's first process (the entrypoint
    execs it), the one whose parent is outside the container. Not PID 1: the pod shares one process namespace
    (the probe container's lease.pl signals the postmaster), whose PID 1 is the pod's pause process."""
    pids = container_pids(cluster, namespace, pod)
    parents = {pid: parent_pid(pid) for pid in pids}
    return next(pid for pid, parent in parents.items() if parent is not None and parent not in pids)


def parent_pid(pid: int) -> int | None:
    """Its parent's PID; None once it is gone (a backend that ended meanwhile)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return None
    return int(next(line for line in status if line.startswith("PPid:")).split()[1])


def hang(pid: int) -> None:
    """SIGSTOP from the host: the postmaster stops answering (inside the container PID 1 ignores it)."""
    os.kill(pid, signal.SIGSTOP)


def resume(pid: int) -> bool:
    """SIGCONT; False when the process is gone (its container was killed meanwhile)."""
    try:
        os.kill(pid, signal.SIGCONT)
    except ProcessLookupError:
        return False
    return True


@contextmanager
def stream_cut(cluster, namespace: str, primary: str, replicas: list[str], both_ways: bool = False) -> Iterator[None]:
    """PRIMARY's server sends nothing more to REPLICAS: what it sends from its port is dropped on the pods'
    bridge (iptables, in the raw table: before kube-router's policy chains, which accept what a policy allows
    and put themselves first again at each sync), so they stay connected and receive nothing, and the archive
    and clients keep reaching it. (A hung WAL receiver would not do: it reads what its socket buffered the
    moment it resumes.)
    BOTH_WAYS: their replies are dropped too, so the primary's walsenders give up after wal_sender_timeout
    (otherwise the replicas' replies keep them waiting, and a clean shutdown with them).
    Lifted on leaving; by then the primary's server should be gone, or the kernel retransmits what it held."""
    source = pod_ip(cluster, namespace, primary)
    rules = [
        [
            "PREROUTING",
            "-s",
            f"{source}/32",
            "-d",
            f"{pod_ip(cluster, namespace, pod)}/32",
            "-p",
            "tcp",
            "--sport",
            "5432",
            "-j",
            "DROP",
        ]
        for pod in replicas
    ]
    if both_ways:
        rules += [
            [
                "PREROUTING",
                "-s",
                f"{pod_ip(cluster, namespace, pod)}/32",
                "-d",
                f"{source}/32",
                "-p",
                "tcp",
                "--dport",
                "5432",
                "-j",
                "DROP",
            ]
            for pod in replicas
        ]
    try:
        for rule in rules:
            subprocess.run(["iptables", "-w", "-t", "raw", "-I", *rule], check=True)
        yield
    finally:
        for rule in rules:
            subprocess.run(["iptables", "-w", "-t", "raw", "-D", *rule], check=False, capture_output=True)


def sql_at(cluster, namespace: str, pod: str, query: str) -> str | None:
    """QUERY on POD's own server as the superuser; None when it does not answer within 3 s."""
    result = psql.run(cluster, namespace, pod, query, connect_timeout=3)
    return result.stdout.strip() if result.returncode == 0 else None


def primaries(cluster, namespace: str, pods: list[str]) -> list[str]:
    """The pods whose server answers that it is not in recovery."""
    return [pod for pod in pods if sql_at(cluster, namespace, pod, "select pg_is_in_recovery()") == "f"]


WRITER_SCRIPT = r"""
printf '*:*:*:%s:%s\n' "$(cat /creds/username)" "$(cat /creds/password)" > /tmp/pgpass
chmod 600 /tmp/pgpass
export PGPASSFILE=/tmp/pgpass PGUSER="$(cat /creds/username)" PGDATABASE=postgres PGCONNECT_TIMEOUT=1
until psql -h "$HOST" -XAtq -c 'create table if not exists writes (id bigserial primary key, at timestamptz)'; do
  sleep 0.2
done
echo ready
while :; do
  if out=$(psql -h "$HOST" -XAtq -c 'insert into writes (at) values (now()) returning id, inet_server_addr()' 2>&1)
  then echo "ok $(date +%s.%N) $(echo "$out" | tr '|' ' ')"
  else echo "fail $(date +%s.%N) $(echo "$out" | head -n 1 | cut -c1-100)"
  fi
  sleep "$PAUSE"
done
"""


@dataclass(frozen=True)
class Write:
    ok: bool
    at: float
    id: int = 0
    server: str = ""  # the address of the server that committed it


class Writer:
    """A client pod on a real node (not on AWAY_FROM, a node a test will fault) writing one row per statement,
    each in a new connection, through the read-write Service (or to HOST, a server's own address), one every PAUSE
    seconds; its log says which were committed (their ids), where, and when."""

    def __init__(
        self,
        cluster,
        namespace: str,
        database: str,
        name: str = "writer",
        host: str = "",
        pause: float = 0.05,
        away_from: str = "",
    ):
        self.cluster, self.namespace, self.name = cluster, namespace, name
        elsewhere = {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "NotIn", "values": [away_from]}]}
        spec = on_real_node(
            {
                **(
                    {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [elsewhere]}}}}
                    if away_from
                    else {}
                ),
                "restartPolicy": "Never",
                "automountServiceAccountToken": False,
                "enableServiceLinks": False,
                "terminationGracePeriodSeconds": 1,
                "securityContext": {
                    "runAsNonRoot": True,
                    "runAsUser": 999,
                    "runAsGroup": 999,
                    "seccompProfile": {"type": "RuntimeDefault"},
                },
                "containers": [
                    {
                        "name": "writer",
                        "image": images()["POSTGRES_IMAGE"],
                        "command": ["/bin/sh", "-c", WRITER_SCRIPT],
                        "env": [{"name": "HOST", "value": host or database}, {"name": "PAUSE", "value": str(pause)}],
                        "securityContext": {
                            "allowPrivilegeEscalation": False,
                            "readOnlyRootFilesystem": True,
                            "capabilities": {"drop": ["ALL"]},
                        },
                        "volumeMounts": [
                            {"name": "creds", "mountPath": "/creds", "readOnly": True},
                            {"name": "tmp", "mountPath": "/tmp"},
                        ],
                    }
                ],
                "volumes": [
                    {"name": "creds", "secret": {"secretName": f"{database}-credentials"}},
                    {"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}},
                ],
            }
        )
        # The label the database's NetworkPolicy admits clients by.
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "spec": spec,
            "metadata": {"name": name, "labels": {f"{database}-client": "true"}},
        }
        # The writer of an earlier test on the module's database that failed before halt(): gone first, so that
        # its failure does not fail this test too (the API server refuses to change a pod's volumes).
        cluster.kubectl(
            "delete", "pod", "-n", namespace, name, "--ignore-not-found", "--wait=true", "--timeout=60s", check=False
        )
        cluster.kubectl("apply", "-n", namespace, "-f", "-", stdin=json.dumps(body))
        wait_for(f"{name} writing", lambda: any(w.ok for w in self.writes()), timeout=120)

    def writes(self, from_node: bool = False) -> list[Write]:
        """What its log says. FROM_NODE: read from the files the kubelet keeps on the node (CRI format), which
        do while the kubelet itself is stopped."""
        if from_node:
            files = sorted(Path("/var/log/pods").glob(f"*/{self.namespace}_{self.name}_*/writer/*.log"))
            log = "\n".join(line.split(" ", 3)[-1] for path in files for line in path.read_text().splitlines())
        else:
            log = self.cluster.kubectl("logs", "-n", self.namespace, self.name, check=False).stdout
        found = []
        for line in log.splitlines():
            parts = line.split()
            if len(parts) >= 4 and parts[0] == "ok":
                found.append(Write(True, float(parts[1]), int(parts[2]), parts[3]))
            elif len(parts) >= 2 and parts[0] == "fail":
                found.append(Write(False, float(parts[1])))
        return found

    def first_after(self, moment: float, server_not: str, from_node: bool = False) -> Write | None:
        """The first write committed after MOMENT by another server than SERVER_NOT."""
        writes = self.writes(from_node)
        return next((w for w in writes if w.ok and w.at > moment and w.server != server_not), None)

    def halt(self) -> list[Write]:
        """Stop writing (the pod is deleted) and return every write it made."""
        made = self.writes()
        self.cluster.kubectl(
            "delete", "pod", "-n", self.namespace, self.name, "--wait=true", "--timeout=60s", check=False
        )
        return made


def missing_writes(cluster, namespace: str, pod: str, writes: list[Write]) -> list[int]:
    """The committed ids POD's server does not have."""
    ids = sorted(w.id for w in writes if w.ok)
    held = sql_at(cluster, namespace, pod, "select coalesce(string_agg(id::text, ','), '') from writes")
    assert held is not None, f"{pod} did not answer"
    present = {int(i) for i in held.split(",") if i}
    return [i for i in ids if i not in present]


def unavailable(writes: list[Write], since: float) -> float:
    """The longest time after SINCE between two committed writes: what clients could not write for."""
    times = [w.at for w in writes if w.ok and w.at >= since - 1]
    return max((b - a for a, b in itertools.pairwise(times)), default=0.0)


def pod_ip(cluster, namespace: str, pod: str) -> str:
    ip = (get_json(cluster, "-n", namespace, "pod", pod).get("status") or {}).get("podIP")
    assert ip, f"{namespace}/{pod} has no address"
    return ip


def wait_until(deadline_seconds: float, check) -> bool:
    """Poll CHECK for the whole duration: True if it never held (something that must not happen did not)."""
    end = time.monotonic() + deadline_seconds
    while time.monotonic() < end:
        if check():
            return False
        time.sleep(0.5)
    return True


# A client beside the server, on its node: over the unix socket, so that it reaches the server whatever happens
# to the pod's network. One row per connection (the table the Writer makes); "ok <time> <id>" or "fail ...".
LOCAL_WRITER = r"""
export PGUSER="$(cat /etc/mydatabase/credentials/username)" PGPASSWORD="$(cat /etc/mydatabase/credentials/password)"
export PGDATABASE=postgres PGCONNECT_TIMEOUT=1
while :; do
  if out=$(/usr/lib/postgresql/15/bin/psql -h /var/run/postgresql -XAtq \
      -c 'insert into writes (at) values (now()) returning id' 2>&1)
  then echo "ok $(date +%s.%N) $out"
  else echo "fail $(date +%s.%N) $(echo "$out" | head -n 1 | cut -c1-100)"
  fi
  sleep 0.1
done
"""


class LocalWriter:
    """LOCAL_WRITER in the mount and network namespaces of the server whose host PID is POSTMASTER, run from
    the host (not through the kubelet, which a test may stop)."""

    def __init__(self, postmaster: int) -> None:
        self.process = subprocess.Popen(
            ["nsenter", "-t", str(postmaster), "-m", "-n", "--", "/bin/sh", "-c", LOCAL_WRITER],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        stdout = self.process.stdout
        assert stdout is not None
        threading.Thread(target=lambda: self.lines.extend(iter(stdout.readline, "")), daemon=True).start()
        wait_for("the local client writing", lambda: self.acknowledged(), timeout=30)

    def acknowledged(self) -> list[float]:
        """When each acknowledged write was, in order."""
        return sorted(float(line.split()[1]) for line in list(self.lines) if line.startswith("ok "))

    def stop(self) -> None:
        self.process.kill()
        self.process.wait()


@contextmanager
def cut_off(postmaster: int) -> Iterator[float]:
    """The pod of the server whose host PID is POSTMASTER drops everything but loopback (the kubelet's probes,
    the operator, the API server, its peers): a node cut off, as its pods see it. Yields when it began."""
    rules = [["INPUT", "!", "-i", "lo", "-j", "DROP"], ["OUTPUT", "!", "-o", "lo", "-j", "DROP"]]
    for rule in rules:
        subprocess.run(["nsenter", "-t", str(postmaster), "-n", "iptables", "-w", "-I", *rule], check=True)
    try:
        yield time.time()
    finally:  # the pod's network namespace is gone with the pod, most often
        for rule in rules:
            subprocess.run(
                ["nsenter", "-t", str(postmaster), "-n", "iptables", "-w", "-D", *rule],
                check=False,
                capture_output=True,
            )


@contextmanager
def stopped(pid: int) -> Iterator[None]:
    """SIGSTOP, then SIGCONT on leaving (a kubelet, an API server)."""
    os.kill(pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(pid, signal.SIGCONT)


def cluster_pid(cluster, process: str) -> int:
    """The host PID of one of the local cluster's processes (kubelet, kube-apiserver, ...)."""
    return int((cluster.kubeconfig.parent / "state" / "pids" / f"{process}.pid").read_text())
