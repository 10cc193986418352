"""The real node runs real containers beside the kwok nodes, and nothing of it reaches past this machine.

Every pod here runs on mydb-real-node (kubelet + containerd + runc) from an
image built on this machine and served by the loopback registry.
"""

from __future__ import annotations

import json
import os
import random
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .realnode import HOST_BRIDGE, HOST_BRIDGE_MAC, HOST_IP, NODE_NAMES, REAL_NODES, REPO, images, on_real_node, real_node
from .waiting import get_json, wait_for

pytestmark = pytest.mark.e2e


def apply(cluster, namespace: str, *manifests: dict) -> None:
    cluster.kubectl("apply", "-n", namespace, "-f", "-",
                    stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(manifests)}))


def pod(name: str, image: str, command: list[str], **spec) -> dict:
    # A `sleep` or `sh` as PID 1 ignores the stop signal: a pod of one needs terminationGracePeriodSeconds, or
    # its namespace's deletion leaves it terminating for 30 s (and a `stop` of the cluster waits that out).
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
            "spec": on_real_node({"containers": [{"name": "main", "image": image, "command": command}], **spec})}


def phase(cluster, namespace: str, name: str) -> str:
    return get_json(cluster, "-n", namespace, "pod", name).get("status", {}).get("phase", "")


def wait_running(cluster, namespace: str, name: str, timeout: float = 120) -> dict:
    def ready():
        found = get_json(cluster, "-n", namespace, "pod", name)
        conditions = found.get("status", {}).get("conditions", [])
        return found if any(c["type"] == "Ready" and c["status"] == "True" for c in conditions) else None
    try:
        return wait_for(f"pod {name} Ready", ready, timeout=timeout)
    except AssertionError:
        events = cluster.kubectl("get", "events", "-n", namespace, check=False).stdout
        raise AssertionError(f"pod {name} not Ready; events:\n{events}") from None


def pinned_kubernetes_version() -> str:
    lines = (REPO / "hack" / "versions.env").read_text().splitlines()
    return next(line.split("=", 1)[1] for line in lines if line.startswith("KUBERNETES_VERSION="))


def test_nodes_are_real_and_tainted(cluster):
    """The real nodes registered beside the kwok nodes, Ready, tainted, with the pinned kubelet version, each with
    its own address."""
    assert len(REAL_NODES) == 3
    for real in REAL_NODES:
        node = get_json(cluster, "node", real.name)
        assert any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"]["conditions"])
        assert {"key": "node.mydb.local/real", "value": "true", "effect": "NoSchedule"} in node["spec"]["taints"]
        assert node["status"]["nodeInfo"]["kubeletVersion"] == pinned_kubernetes_version()
        assert node["status"]["nodeInfo"]["containerRuntimeVersion"].startswith("containerd://")
        assert {"type": "InternalIP", "address": real.ip} in node["status"]["addresses"]
    kwok_nodes = [n for n in get_json(cluster, "nodes")["items"] if n["metadata"]["name"].startswith("kwok-node-")]
    assert len(kwok_nodes) == 3


def test_postgres_image_runs_and_exit_code_reaches_status(cluster, namespace):
    """`postgres --version` from the local image prints the real version; the exit code lands in the pod status."""
    image = images()["POSTGRES_IMAGE"]
    apply(cluster, namespace, pod("version", image, ["sh", "-c", "postgres --version; exit 3"],
                                  restartPolicy="Never"))
    wait_for("pod Failed", lambda: phase(cluster, namespace, "version") == "Failed", timeout=120)
    status = get_json(cluster, "-n", namespace, "pod", "version")["status"]
    assert status["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 3
    log = cluster.kubectl("logs", "-n", namespace, "version").stdout
    real_version = image.rsplit(":", 1)[1]
    assert f"postgres (PostgreSQL) {real_version}" in log
    assert get_json(cluster, "-n", namespace, "pod", "version")["spec"]["nodeName"] in NODE_NAMES


def test_exec_logs_and_port_forward(cluster, namespace, tmp_path):
    """exec and logs go through the API server to the kubelet; port-forward reaches PostgreSQL in the pod."""
    image = images()["POSTGRES_IMAGE"]
    script = ("initdb -D /tmp/db -U postgres --auth=trust >/dev/null && echo initialised && "
              "exec postgres -D /tmp/db -c listen_addresses=127.0.0.1")
    apply(cluster, namespace, pod("pg", image, ["sh", "-c", script],
                                  securityContext={"runAsUser": 999, "runAsGroup": 999}))
    wait_running(cluster, namespace, "pg")
    wait_for("server up", lambda: cluster.kubectl("exec", "-n", namespace, "pg", "--", "pg_isready", "-h",
                                                  "127.0.0.1", check=False).returncode == 0, timeout=60)
    assert cluster.kubectl("exec", "-n", namespace, "pg", "--", "id", "-u").stdout.strip() == "999"
    assert "initialised" in cluster.kubectl("logs", "-n", namespace, "pg").stdout

    port = free_port()
    forward = subprocess.Popen([cluster.tool("kubectl"), f"--kubeconfig={cluster.kubeconfig}", "port-forward",
                                "-n", namespace, "pod/pg", f"{port}:5432"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        def query():
            result = subprocess.run(["psql", "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-Atc",
                                     "select 40 + 2"], capture_output=True, text=True, timeout=10)
            return result.stdout.strip() if result.returncode == 0 else None
        assert wait_for("a query through port-forward", query, timeout=30) == "42"
    finally:
        forward.terminate()
        forward.wait(timeout=10)


def echo_server() -> str:
    """A shell line that answers every TCP connection on port 7000 with the pod's name (perl is in perl-base)."""
    return ("exec perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(LocalPort => 7000, Listen => 5, "
            "ReuseAddr => 1) or die $!; while ($c = $s->accept) { print $c \"$ENV{HOSTNAME}\\n\"; close $c }'")


def tcp_client(host: str) -> str:
    return (f"perl -MIO::Socket::INET -e '$c = IO::Socket::INET->new(PeerAddr => \"{host}\", PeerPort => 7000, "
            "Timeout => 5) or die \"connect: $!\"; print scalar <$c>'")


def test_services_and_dns_between_pods(cluster, namespace):
    """A pod reaches others, on other nodes, through a ClusterIP, its DNS name, and a headless Service's per-pod
    names."""
    image = images()["POSTGRES_IMAGE"]
    labels = {"app": "echo"}
    apply(cluster, namespace,
          {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo"},
           "spec": {"selector": labels, "ports": [{"port": 7000}]}},
          {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "echo-pods"},
           "spec": {"clusterIP": "None", "selector": labels, "ports": [{"port": 7000}]}},
          {"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "echo"},
           "spec": {"replicas": 2, "serviceName": "echo-pods", "selector": {"matchLabels": labels},
                    "template": {"metadata": {"labels": labels}, "spec": on_real_node({
                        "affinity": apart(labels),
                        "terminationGracePeriodSeconds": 1, "containers": [
                            {"name": "echo", "image": image, "command": ["sh", "-c", echo_server()],
                             "readinessProbe": {"tcpSocket": {"port": 7000}, "periodSeconds": 1}}]})}}},
          pod("client", image, ["sleep", "3600"], terminationGracePeriodSeconds=1, affinity=apart(labels)))
    wait_for("2 echo pods ready", lambda: get_json(cluster, "-n", namespace, "statefulset", "echo")
             .get("status", {}).get("readyReplicas") == 2, timeout=120)
    wait_running(cluster, namespace, "client")
    placed = [get_json(cluster, "-n", namespace, "pod", name)["spec"]["nodeName"]
              for name in ("echo-0", "echo-1", "client")]
    assert sorted(placed) == NODE_NAMES, placed
    cluster_ip = get_json(cluster, "-n", namespace, "service", "echo")["spec"]["clusterIP"]
    assert cluster_ip.startswith("198.19.")

    def client(line: str) -> str:
        result = cluster.kubectl("exec", "-n", namespace, "client", "--", "sh", "-c", line, check=False)
        return result.stdout.strip() if result.returncode == 0 else f"failed: {result.stderr.strip()}"

    assert client(tcp_client(cluster_ip)) in ("echo-0", "echo-1")
    name = f"echo.{namespace}.svc.cluster.local"
    assert wait_for("the Service by DNS name", lambda: client(tcp_client(name)) in ("echo-0", "echo-1"), timeout=30)
    assert client(f"getent hosts {name}").split()[0] == cluster_ip
    for ordinal in (0, 1):
        own = f"echo-{ordinal}.echo-pods.{namespace}.svc.cluster.local"
        assert wait_for(f"{own} answers", lambda: client(tcp_client(own)) == f"echo-{ordinal}", timeout=30)
    # Nothing outside the cluster's zones resolves in a pod.
    assert "failed" in client("getent hosts outside.example.org")


def apart(labels: dict) -> dict:
    """Required anti-affinity to the pods with LABELS: each on a node of its own."""
    term = {"labelSelector": {"matchLabels": labels}, "topologyKey": "kubernetes.io/hostname"}
    return {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def node_link_of(cluster, namespace: str, pod_name: str) -> str:
    """The node's end of the pod's veth: the interface of the node's namespace whose index is the pod's eth0 peer."""
    peer = cluster.kubectl("exec", "-n", namespace, pod_name, "--", "cat", "/sys/class/net/eth0/iflink").stdout.strip()
    netns = real_node(get_json(cluster, "-n", namespace, "pod", pod_name)["spec"]["nodeName"]).netns
    links = json.loads(subprocess.run(["ip", "-n", netns, "-j", "link", "show"], capture_output=True, text=True,
                                      check=True).stdout)
    return next(link["ifname"] for link in links if str(link["ifindex"]) == peer)


def test_a_pod_leaving_does_not_cut_the_others_off_the_node(cluster, namespace):
    """The node's pod bridge keeps its own MAC while pods come and go, so a pod's lookups stay instant after
    another leaves.

    A bridge without an address of its own takes its lowest port's. Here the leaving pod's port gets the lowest
    one before the other pod first talks to the node; once it leaves, that pod's gateway entry would point at no
    port, and each lookup would wait out the resolver's 5 s timeouts until ARP gave up on it."""
    image = images()["POSTGRES_IMAGE"]
    apply(cluster, namespace, pod("leaves", image, ["sleep", "3600"], terminationGracePeriodSeconds=0))
    wait_running(cluster, namespace, "leaves")
    node = real_node(get_json(cluster, "-n", namespace, "pod", "leaves")["spec"]["nodeName"])
    port = node_link_of(cluster, namespace, "leaves")
    subprocess.run(["ip", "-n", node.netns, "link", "set", port, "address", "02:00:00:00:00:01"], check=True)
    beside = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node.name]}]}]}}}
    apply(cluster, namespace, pod("stays", image, ["sleep", "3600"], terminationGracePeriodSeconds=1,
                                  affinity=beside))
    wait_running(cluster, namespace, "stays")

    def links() -> str:
        return subprocess.run(["ip", "-n", node.netns, "link", "show"], capture_output=True, text=True).stdout


    def lookup_milliseconds() -> int:
        line = ("start=$(date +%s%N); getent hosts kubernetes.default.svc.cluster.local >/dev/null || exit 1; "
                "echo $(( ($(date +%s%N) - start) / 1000000 ))")
        return int(cluster.kubectl("exec", "-n", namespace, "stays", "--", "sh", "-c", line).stdout)

    assert lookup_milliseconds() < 2000
    cluster.kubectl("delete", "pod", "-n", namespace, "leaves", "--wait=true")
    wait_for(f"{port} removed", lambda: f" {port}@" not in links(), timeout=30)
    assert lookup_milliseconds() < 2000
    bridge = subprocess.run(["ip", "-n", node.netns, "-j", "link", "show", "pods0"], capture_output=True, text=True,
                            check=True).stdout
    assert json.loads(bridge)[0]["address"] == f"02:00:c6:12:{130 + node.index:02x}:01"
    assert Path(f"/sys/class/net/{HOST_BRIDGE}/address").read_text().strip() == HOST_BRIDGE_MAC


def test_in_cluster_config_and_rbac_from_a_pod(cluster, namespace):
    """From the operator's own image, in-cluster configuration reaches the API server and RBAC applies."""
    image = images()["OPERATOR_IMAGE"]
    cluster.kubectl("create", "serviceaccount", "reader", "-n", namespace)
    script = ("import kubernetes, sys\n"
              "kubernetes.config.load_incluster_config()\n"
              "api = kubernetes.client.CoreV1Api()\n"
              "try:\n"
              f"    print('pods:', len(api.list_namespaced_pod('{namespace}').items))\n"
              "except kubernetes.client.ApiException as error:\n"
              "    print('status:', error.status)\n")
    def run_as_reader(name: str) -> str:
        apply(cluster, namespace, pod(name, image, ["python", "-c", script], restartPolicy="Never",
                                      serviceAccountName="reader"))
        wait_for(f"{name} done", lambda: phase(cluster, namespace, name) in ("Succeeded", "Failed"), timeout=120)
        return cluster.kubectl("logs", "-n", namespace, name).stdout.strip()

    assert run_as_reader("denied") == "status: 403"
    cluster.kubectl("create", "role", "pod-reader", "-n", namespace, "--verb=list", "--resource=pods")
    cluster.kubectl("create", "rolebinding", "pod-reader", "-n", namespace, "--role=pod-reader",
                    f"--serviceaccount={namespace}:reader")
    assert run_as_reader("allowed").startswith("pods: ")


@pytest.mark.long
def test_claim_data_survives_pod_and_liveness_restarts(cluster, namespace):
    """A row of data on a claim outlives its pod; a failing liveness probe restarts the container."""
    image = images()["POSTGRES_IMAGE"]
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
             "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}}
    volume = {"volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}]}
    mount = [{"name": "data", "mountPath": "/data"}]

    def writer(name: str, line: str) -> dict:
        manifest = pod(name, image, ["sh", "-c", line], restartPolicy="Never",
                       securityContext={"runAsUser": 999}, **volume)
        manifest["spec"]["containers"][0]["volumeMounts"] = mount
        return manifest

    apply(cluster, namespace, claim, writer("first", "echo kept > /data/row && cat /data/row"))
    wait_for("first pod Succeeded", lambda: phase(cluster, namespace, "first") == "Succeeded", timeout=120)
    cluster.kubectl("delete", "-n", namespace, "pod", "first")
    apply(cluster, namespace, writer("second", "cat /data/row"))
    wait_for("second pod Succeeded", lambda: phase(cluster, namespace, "second") == "Succeeded", timeout=120)
    assert cluster.kubectl("logs", "-n", namespace, "second").stdout.strip() == "kept"

    # sh as PID 1 ignores SIGTERM: without a short grace period each restart waits out the default 30 s.
    flaky = pod("flaky", image, ["sh", "-c", "touch /tmp/alive; sleep 4; rm /tmp/alive; sleep 3600"],
                terminationGracePeriodSeconds=1)
    flaky["spec"]["containers"][0]["livenessProbe"] = {
        "exec": {"command": ["test", "-f", "/tmp/alive"]}, "periodSeconds": 1, "failureThreshold": 2}
    apply(cluster, namespace, flaky)
    wait_for("a liveness restart", lambda: get_json(cluster, "-n", namespace, "pod", "flaky").get("status", {})
             .get("containerStatuses", [{}])[0].get("restartCount", 0) >= 1, timeout=120)


def test_local_xfs_claims_are_real_filesystems_that_grow_online_and_go_with_their_claim(cluster, namespace):
    """A claim of the class local-xfs (hack/local_volumes.py) is an XFS filesystem of its size: `df` shows it, a
    file larger than it fails with "No space left on device"; growing the claim grows the filesystem under the
    running pod; deleting the claim leaves no mount, loop device or file."""
    image = images()["POSTGRES_IMAGE"]
    claim = {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "data"},
             "spec": {"storageClassName": "local-xfs", "accessModes": ["ReadWriteOnce"],
                      "resources": {"requests": {"storage": "1Gi"}}}}
    holder = pod("holder", image, ["sleep", "3600"], terminationGracePeriodSeconds=1,
                 securityContext={"runAsUser": 999, "runAsNonRoot": True, "fsGroup": 999},
                 volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "data"}}])
    holder["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    apply(cluster, namespace, claim, holder)
    uid = wait_running(cluster, namespace, "holder")["metadata"]["uid"]

    def in_pod(line: str) -> subprocess.CompletedProcess:
        return cluster.kubectl("exec", "-n", namespace, "holder", "--", "sh", "-c", line, check=False)

    def size() -> int:
        return int(in_pod("df -B1 --output=size /data").stdout.split()[-1])
    assert 0.9 * 2**30 <= size() <= 2**30, size()
    too_big = in_pod("fallocate -l 1100M /data/big")
    assert too_big.returncode != 0 and "No space left on device" in too_big.stderr, too_big
    in_pod("rm -f /data/big")

    cluster.kubectl("patch", "-n", namespace, "pvc", "data", "-p",
                    '{"spec": {"resources": {"requests": {"storage": "2Gi"}}}}')
    wait_for("the claim at 2Gi", lambda: get_json(cluster, "-n", namespace, "pvc", "data")["status"]
             .get("capacity", {}).get("storage") == "2Gi", timeout=60)
    assert 0.9 * 2 * 2**30 <= size() <= 2 * 2**30, size()
    assert in_pod("fallocate -l 1100M /data/big").returncode == 0
    assert get_json(cluster, "-n", namespace, "pod", "holder")["metadata"]["uid"] == uid

    volume = get_json(cluster, "-n", namespace, "pvc", "data")["spec"]["volumeName"]
    volume_dir = cluster.kubeconfig.parent / "state" / "local-volumes"
    assert (volume_dir / f"{volume}.xfs").is_file() and os.path.ismount(volume_dir / volume)
    # Its loop device writes straight to the file (no second copy in the host's page cache), grown or not;
    # on a host whose filesystem refuses O_DIRECT, the provisioner's log says so.
    devices = subprocess.run(["losetup", "--list", "--noheadings", "--raw", "--output", "DIO,BACK-FILE"],
                             capture_output=True, text=True, check=True).stdout.splitlines()
    modes = [line.split()[0] for line in devices if line.endswith(f"/{volume}.xfs")]
    provisioner = (cluster.kubeconfig.parent / "logs" / "local-volumes.log").read_text()
    assert modes == ["1"] or (modes == ["0"] and f"{volume}.xfs: the loop device copies" in provisioner), devices
    cluster.kubectl("delete", "-n", namespace, "pod", "holder", "--wait=true")
    cluster.kubectl("delete", "-n", namespace, "pvc", "data", "--wait=true")
    wait_for("the volume gone", lambda: not get_json(cluster, "pv", volume), timeout=60)
    assert not (volume_dir / f"{volume}.xfs").exists() and not (volume_dir / volume).exists()
    loops = subprocess.run(["losetup", "--list", "--noheadings", "--output", "BACK-FILE"], capture_output=True,
                           text=True, check=True).stdout
    assert volume not in loops, loops


def test_images_come_only_from_the_local_registry(cluster, namespace):
    """Every registry name resolves to the loopback registry: docker.io's postgres is the local image,
    and an image the registry lacks is answered 'not found' there, never looked up online."""
    version = images()["POSTGRES_IMAGE"].rsplit(":", 1)[1]
    hub = pod("hub-name", f"docker.io/library/postgres:{version}", ["postgres", "--version"], restartPolicy="Never")
    hub["spec"]["containers"][0]["imagePullPolicy"] = "Always"  # pulled even when containerd's kept store has it
    apply(cluster, namespace, hub, pod("elsewhere", "docker.io/library/not-here:1", ["true"]))
    wait_for("docker.io/library/postgres ran", lambda: phase(cluster, namespace, "hub-name") == "Succeeded",
             timeout=120)

    def events(name: str, reason: str) -> list[str]:
        found = get_json(cluster, "-n", namespace, "events")["items"]
        return [e["message"] for e in found if e["involvedObject"]["name"] == name and e["reason"] == reason]
    assert wait_for("the pull of docker.io/library/postgres", lambda: events("hub-name", "Pulled"), timeout=30)

    def pull_error():
        return [message for message in events("elsewhere", "Failed") if "not-here" in message]
    messages = wait_for("a pull failure", pull_error, timeout=90)
    assert all("not found" in message and "lookup" not in message and "dial tcp" not in message
               for message in messages), messages


# ------------------------------------------------------------------- safety


def test_pod_range_is_blackholed_on_the_host_and_every_node():
    """The whole 198.18.0.0/15 is unreachable from the host and from every node but for the nodes' bridge /24 and
    each node's pods (through that node); no node has a default route."""
    unreachable = subprocess.run(["ip", "route", "show", "type", "unreachable"], capture_output=True,
                                 text=True, check=True).stdout
    assert "198.18.0.0/15" in unreachable
    lookup = subprocess.run(["ip", "route", "get", "198.19.200.7"], capture_output=True, text=True)
    assert lookup.returncode != 0 or "unreachable" in lookup.stdout
    bridge = subprocess.run(["ip", "route", "get", "198.18.128.20"], capture_output=True, text=True, check=True)
    assert "dev mydb0" in bridge.stdout
    for node in REAL_NODES:
        pods = subprocess.run(["ip", "route", "get", node.pod_gateway], capture_output=True, text=True, check=True)
        assert f"via {node.ip} dev mydb0" in pods.stdout
        routes = subprocess.run(["ip", "-n", node.netns, "route", "show", "table", "all"], capture_output=True,
                                text=True, check=True).stdout
        assert "default" not in routes, routes
        assert "unreachable 198.18.0.0/15" in routes, routes
        outside = subprocess.run(["ip", "-n", node.netns, "route", "get", "192.0.2.1"], capture_output=True,
                                 text=True)
        assert outside.returncode != 0, outside.stdout


def test_no_nat_towards_the_outside():
    """In every node the only masquerade is kube-proxy's, for marked Service traffic, and a guard drops whatever is
    forwarded outside the range; the host does no NAT and no forwarding, and its guard drops all forwarding off
    the nodes' bridge."""
    for node in REAL_NODES:
        nat = subprocess.run(["ip", "netns", "exec", node.netns, "iptables-save", "-t", "nat"], capture_output=True,
                             text=True, check=True).stdout
        rewriting = [line for line in nat.splitlines()
                     if line.startswith("-A") and ("MASQUERADE" in line or "SNAT" in line)]
        assert all(line.startswith("-A KUBE-POSTROUTING ") for line in rewriting), rewriting
        postrouting = [line for line in nat.splitlines() if line.startswith("-A POSTROUTING")]
        assert all("-j KUBE-POSTROUTING" in line for line in postrouting), postrouting
        mangle = subprocess.run(["ip", "netns", "exec", node.netns, "iptables-save", "-t", "mangle"],
                                capture_output=True, text=True, check=True).stdout
        forward = [line for line in mangle.splitlines() if line.startswith("-A FORWARD")]
        assert forward and forward[0] == "-A FORWARD -j MYDB-GUARD", forward
        assert "-A MYDB-GUARD ! -d 198.18.0.0/15 -j DROP" in mangle, mangle
    nat = subprocess.run(["iptables-save", "-t", "nat"], capture_output=True, text=True, check=True).stdout
    assert not [line for line in nat.splitlines() if "MASQUERADE" in line or "SNAT" in line]
    mangle = subprocess.run(["iptables-save", "-t", "mangle"], capture_output=True, text=True, check=True).stdout
    forward = [line for line in mangle.splitlines() if line.startswith("-A FORWARD")]
    assert forward and forward[0] == "-A FORWARD -j MYDB-GUARD"
    assert "-A MYDB-GUARD -i mydb0 -j DROP" in mangle and "-A MYDB-GUARD -o mydb0 -j DROP" in mangle
    with open("/proc/sys/net/ipv4/conf/all/forwarding") as all_interfaces:
        assert all_interfaces.read().strip() == "0", "the host must not forward"
    with open(f"/proc/sys/net/ipv4/conf/{HOST_BRIDGE}/forwarding") as bridge:
        assert bridge.read().strip() == "0", "the host must not forward between the nodes: they route themselves"


def dns_query(name: str) -> tuple[int, list[str]]:
    """Ask CoreDNS (on the bridge address) for NAME's A record: (rcode, addresses)."""
    ident = random.randrange(1 << 16)
    question = b"".join(bytes([len(part)]) + part.encode() for part in name.split(".")) + b"\0"
    packet = struct.pack(">HHHHHH", ident, 0x0100, 1, 0, 0, 0) + question + struct.pack(">HH", 1, 1)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as udp:
        udp.settimeout(5)
        udp.sendto(packet, (HOST_IP, 53))
        answer = udp.recv(4096)
    rcode, count = struct.unpack(">H", answer[2:4])[0] & 0xF, struct.unpack(">H", answer[6:8])[0]
    addresses, offset = [], 12 + len(question) + 4
    for _ in range(count):
        offset += 2 if answer[offset] & 0xC0 == 0xC0 else len(question)
        kind, _, _, length = struct.unpack(">HHIH", answer[offset:offset + 10])
        offset += 10
        if kind == 1:
            addresses.append(socket.inet_ntoa(answer[offset:offset + length]))
        offset += length
    return rcode, addresses


def test_coredns_answers_the_cluster_and_refuses_the_rest(cluster):
    """kubernetes.default resolves to the first Service address; any outside name is REFUSED, never forwarded."""
    rcode, addresses = dns_query("kubernetes.default.svc.cluster.local")
    assert (rcode, addresses) == (0, ["198.19.0.1"])
    for outside in ("outside.example.org", "example.com", "localhost"):
        assert dns_query(outside)[0] == 5, outside  # REFUSED


# ------------------------------------------------------ down and recovery


def test_a_second_cluster_leaves_the_real_node_to_the_first(cluster, tmp_path):
    """The host has one real node: a second cluster's `up` refuses while ours runs it, naming ours and how to pause
    it, and that cluster's `down` leaves our node alone."""
    ours = str(cluster.kubeconfig.parent.resolve())
    env = {**os.environ, "MYDB_CLUSTER_DIR": str(tmp_path / "second"), "MYDB_CLUSTER_PORT_BASE": "17500"}
    owner = subprocess.run([sys.executable, str(CLUSTER_PY), "real-node-owner"], env=env, capture_output=True,
                           text=True)
    assert owner.returncode == 0 and f"MYDB_CLUSTER_DIR={ours}" in owner.stdout.split(), owner.stdout
    up = subprocess.run([sys.executable, str(CLUSTER_PY), "up"], env=env, capture_output=True, text=True, timeout=300)
    assert up.returncode != 0
    assert f"belongs to the running cluster in {ours}" in up.stderr and "hack/cluster.py stop" in up.stderr, up.stderr
    down = subprocess.run([sys.executable, str(CLUSTER_PY), "down"], env=env, capture_output=True, text=True,
                          timeout=300)
    assert down.returncode == 0 and "leaving the real node alone" in down.stderr, down.stderr
    assert all(any(c["type"] == "Ready" and c["status"] == "True"
                   for c in get_json(cluster, "node", name)["status"]["conditions"]) for name in NODE_NAMES)
    assert subprocess.run([sys.executable, str(CLUSTER_PY), "status"], capture_output=True).returncode == 0


@pytest.mark.restarts_cluster
def test_stop_keeps_a_database_and_up_resumes_it(cluster, real_operator, namespace):
    """`stop` pauses the whole cluster (nothing of the real node left on the host) with its state kept; `up`
    resumes it: the same database comes back Ready on the real node with its rows, PostgreSQL having shut down
    cleanly (SIGTERM before the kill), and its credentials unchanged."""
    from .conftest import wait_ready
    from .test_real_postgres import ROW_FACTS, container_log, ready_with_rows, rows

    name = "paused"
    ready_with_rows(cluster, namespace, name)
    secret_uid = get_json(cluster, "-n", namespace, "secret", f"{name}-credentials")["metadata"]["uid"]

    real_operator.stop()  # it would only log the API server's absence meanwhile
    stop = subprocess.run([sys.executable, str(CLUSTER_PY), "stop"], capture_output=True, text=True, timeout=300)
    assert stop.returncode == 0, stop.stderr
    left = subprocess.run([sys.executable, str(CLUSTER_PY), "leftovers"], capture_output=True, text=True)
    assert left.returncode == 0 and left.stdout == "", left.stdout
    assert (cluster.kubeconfig.parent / "state" / "etcd").is_dir()

    up = subprocess.run([sys.executable, str(CLUSTER_PY), "up"], capture_output=True, text=True, timeout=900)
    assert up.returncode == 0, up.stderr
    assert "resuming the cluster" in up.stderr
    real_operator.start()
    wait_ready(cluster, namespace, name, timeout=300)
    assert get_json(cluster, "-n", namespace, "secret", f"{name}-credentials")["metadata"]["uid"] == secret_uid
    for pod_name in (f"{name}-0", f"{name}-1"):
        assert get_json(cluster, "-n", namespace, "pod", pod_name)["spec"]["nodeName"] in NODE_NAMES
        wait_for(f"the rows on {pod_name}", lambda: rows(cluster, namespace, pod_name) == ROW_FACTS, timeout=60)
    log = container_log(cluster, namespace, f"{name}-0")
    assert "database system was shut down at" in log and "database system was interrupted" not in log, log


@pytest.mark.restarts_cluster
@pytest.mark.leaves_cluster_down
def test_down_leaves_nothing_and_up_recovers_from_a_kill(cluster, operator_kubeconfig):
    """A killed kubelet is noticed by `up`, which stops the rest and resumes with the kept state; `down` leaves no
    process, mount, network namespace, link, iptables chain or route of the node behind. (`up` after `down` is a
    start from nothing, which every run's bring-up is.)"""
    from .conftest import stop_the_shared_operator

    stop_the_shared_operator()
    pid = int((cluster.kubeconfig.parent / "state" / "pids" / "kubelet-2.pid").read_text())
    subprocess.run(["kill", "-9", str(pid)], check=True)
    time.sleep(0.5)
    up = subprocess.run([sys.executable, str(CLUSTER_PY), "up"], capture_output=True, text=True, timeout=900)
    assert up.returncode == 0, up.stderr
    assert "stopping the rest first" in up.stderr and "resuming the cluster" in up.stderr
    assert get_json(cluster, "crd", "mydatabases.myapp.example.com"), "the kept state was lost"
    wait_for("the nodes Ready again", lambda: all(any(
        c["type"] == "Ready" and c["status"] == "True"
        for c in get_json(cluster, "node", name).get("status", {}).get("conditions", [])) for name in NODE_NAMES),
        timeout=120)

    down = subprocess.run([sys.executable, str(CLUSTER_PY), "down"], capture_output=True, text=True, timeout=300)
    assert down.returncode == 0, down.stderr
    left = subprocess.run([sys.executable, str(CLUSTER_PY), "leftovers"], capture_output=True, text=True)
    assert left.returncode == 0 and left.stdout == "", left.stdout
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert "cni-" not in netns
    # It runs last (leaves_cluster_down): the run's end takes the cluster down anyway, so it starts it again only
    # for a run that keeps it.
    if os.environ.get("MYDB_KEEP_CLUSTER"):
        again = subprocess.run([sys.executable, str(CLUSTER_PY), "up"], capture_output=True, text=True, timeout=900)
        assert again.returncode == 0, again.stderr


CLUSTER_PY = REPO / "hack" / "cluster.py"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
