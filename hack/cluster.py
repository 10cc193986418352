"""A real local Kubernetes cluster, run as plain processes.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (which
simulates three nodes, their pods and volumes) are started from the binaries
that hack/build-tools.sh builds; hack/node.py adds real nodes beside them
(each a network namespace with containerd, kubelet, kube-proxy and kube-router; CoreDNS and a registry on the
host), and
hack/volume_agent.py gives volumes real folders.

    python3 hack/cluster.py up        # idempotent: a healthy cluster is left alone, a stopped one resumes
    python3 hack/cluster.py stop      # stops what `up` started (by pid), keeps the state (databases included)
    python3 hack/cluster.py down      # stops what `up` started (by pid) and removes the state
    python3 hack/cluster.py status
    python3 hack/cluster.py real-node-owner   # which other running cluster has the real node, if any
    python3 hack/cluster.py leftovers # what of the real node is still on this host (none after down)
    python3 hack/cluster.py restart-apiserver   # for reconnection tests
    python3 hack/cluster.py node lose|freeze|cut|drain|back N   # a fault on real node N (1-3, or its name)
    python3 hack/cluster.py sa-kubeconfig -n NS -s SA -o FILE

Clusters are told apart by MYDB_CLUSTER_DIR (default .cluster) and
MYDB_CLUSTER_PORT_BASE (default 16400); the tests use their own (.cluster/tests,
16500). The real nodes' network is the host's, so only one running cluster has
them; `up` refuses while another one does, naming it. MYDB_REAL_NODE=0 leaves
the real nodes out (a second cluster beside the first); MYDB_REAL_NODES=N runs N of them (3 by default).
Only the standard library is used so that this runs before any venv exists.
"""

from __future__ import annotations

import argparse
import base64
import concurrent.futures
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import node
import node_policies
from harness import (
    ADMIN_KUBECONFIG,
    HACK_DIR,
    KWOK_POD_CIDR,
    LOG_DIR,
    PID_DIR,
    PKI_DIR,
    POD_CIDR,
    PORT_BASE,
    SERVICE_CIDR,
    SERVICE_FIRST_IP,
    STATE_DIR,
    http_ok,
    log,
    make_cert,
    make_key,
    openssl,
    running_pid,
    start,
    stop,
    wait_until,
)

APISERVER_PORT = PORT_BASE + 43
KWOK_PORT = PORT_BASE + 47
CONTROLLER_MANAGER_PORT = PORT_BASE + 57
SCHEDULER_PORT = PORT_BASE + 59
ETCD_CLIENT_PORT = PORT_BASE + 79
ETCD_PEER_PORT = PORT_BASE + 80
VOLUME_DIR = (STATE_DIR / "volumes").absolute()  # the folders behind every PersistentVolume
NODE_COUNT = 3
# kwok stages shipped in its module that we use as they are.
KWOK_MODULE_STAGES = [
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
]
CONTROL_PLANE = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "volume-agent"]
OPERATOR = "mydb-operator"  # started by `make demo`; stopped with the cluster


def components() -> list[str]:
    return CONTROL_PLANE + (node.components() if node.enabled() else [])


def bin_dir() -> Path:
    """Build the binaries if needed (a cache hit is instant) and return their folder."""
    out = subprocess.run(
        ["bash", str(HACK_DIR / "build-tools.sh")], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return Path(out.strip().splitlines()[-1])


# --------------------------------------------------------------------- PKI


def make_pki() -> None:
    """The CA, the components' certificates and the ServiceAccount key: made once, kept while the state is."""
    PKI_DIR.mkdir(parents=True, exist_ok=True)
    if not (PKI_DIR / "ca.crt").exists():
        make_key(PKI_DIR / "ca.key")
        openssl(
            "req",
            "-x509",
            "-new",
            "-key",
            str(PKI_DIR / "ca.key"),
            "-subj",
            "/CN=mydb-local-ca",
            "-days",
            "3650",
            "-sha256",
            "-out",
            str(PKI_DIR / "ca.crt"),
        )
    sans = ",".join(
        [
            "IP:127.0.0.1",
            f"IP:{SERVICE_FIRST_IP}",
            f"IP:{node.HOST_IP}",
            "DNS:localhost",
            "DNS:kubernetes",
            "DNS:kubernetes.default",
            "DNS:kubernetes.default.svc",
            "DNS:kubernetes.default.svc.cluster.local",
        ]
    )
    make_cert("apiserver", "/CN=kube-apiserver", server_sans=sans)
    make_cert("apiserver-kubelet-client", "/O=system:masters/CN=kube-apiserver-kubelet-client")
    make_cert("admin", "/O=system:masters/CN=mydb-admin")
    make_cert("controller-manager", "/CN=system:kube-controller-manager")
    make_cert("scheduler", "/CN=system:kube-scheduler")
    # kwok plays every kubelet; it needs broad rights, like the kubelets it stands in for.
    # The volume agent reads PersistentVolumes only, but is a harness part like kwok.
    make_cert("kwok", "/O=system:masters/CN=kwok")
    make_cert("volume-agent", "/O=system:masters/CN=mydb-volume-agent")
    if not (PKI_DIR / "sa.pub").exists():
        make_key(PKI_DIR / "sa.key")  # ServiceAccount tokens are signed ES256
        openssl("pkey", "-in", str(PKI_DIR / "sa.key"), "-pubout", "-out", str(PKI_DIR / "sa.pub"))


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig_yaml(user: str, credentials: dict[str, str], api_host: str = "127.0.0.1") -> str:
    """A kubeconfig as JSON (which is valid YAML) for the local API server, reached at API_HOST."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "mydb-local",
                "cluster": {
                    "server": f"https://{api_host}:{APISERVER_PORT}",
                    "certificate-authority-data": b64(PKI_DIR / "ca.crt"),
                },
            }
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "mydb-local", "context": {"cluster": "mydb-local", "user": user}}],
        "current-context": "mydb-local",
    }
    return json.dumps(config, indent=2) + "\n"


def cert_kubeconfig(name: str, api_host: str = "127.0.0.1") -> str:
    return kubeconfig_yaml(
        name,
        {
            "client-certificate-data": b64(PKI_DIR / f"{name}.crt"),
            "client-key-data": b64(PKI_DIR / f"{name}.key"),
        },
        api_host,
    )


def kubeconfig_for(name: str, api_host: str = "127.0.0.1") -> Path:
    """A kubeconfig for the client certificate PKI_DIR/name.crt and the API server at API_HOST (the real
    nodes reach it on the host's bridge address), written under the state folder."""
    path = STATE_DIR / f"{name}.kubeconfig"
    path.write_text(cert_kubeconfig(name, api_host))
    path.chmod(0o600)
    return path


def write_kubeconfigs() -> None:
    for name in ("controller-manager", "scheduler", "kwok", "volume-agent"):
        kubeconfig_for(name)
    ADMIN_KUBECONFIG.write_text(cert_kubeconfig("admin"))
    ADMIN_KUBECONFIG.chmod(0o600)


# ---------------------------------------------------------------- commands


def start_etcd(bins: Path) -> None:
    start(
        "etcd",
        [
            str(bins / "etcd"),
            "--name=local",
            f"--data-dir={STATE_DIR / 'etcd'}",
            f"--listen-client-urls=http://127.0.0.1:{ETCD_CLIENT_PORT}",
            f"--advertise-client-urls=http://127.0.0.1:{ETCD_CLIENT_PORT}",
            f"--listen-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}",
            f"--initial-advertise-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}",
            f"--initial-cluster=local=http://127.0.0.1:{ETCD_PEER_PORT}",
            "--listen-metrics-urls=",
            "--log-level=warn",
            # A throwaway test cluster: skipping fsync keeps 2 cores free for the rest.
            "--unsafe-no-fsync=true",
        ],
    )
    wait_until("etcd", lambda: http_ok(f"http://127.0.0.1:{ETCD_CLIENT_PORT}/health"), process="etcd")


def start_apiserver(bins: Path) -> None:
    # With real nodes, pods reach the API server through the `kubernetes`
    # Service, whose endpoint is the host's address on the nodes' bridge.
    if node.enabled():
        listen = ["--bind-address=0.0.0.0", f"--advertise-address={node.HOST_IP}"]
    else:
        listen = ["--bind-address=127.0.0.1", "--advertise-address=127.0.0.1"]
    start(
        "kube-apiserver",
        [
            str(bins / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{ETCD_CLIENT_PORT}",
            *listen,
            f"--secure-port={APISERVER_PORT}",
            f"--tls-cert-file={PKI_DIR / 'apiserver.crt'}",
            f"--tls-private-key-file={PKI_DIR / 'apiserver.key'}",
            f"--client-ca-file={PKI_DIR / 'ca.crt'}",
            # logs, exec and port-forward: the API server calls the kubelet, and checks its certificate.
            f"--kubelet-client-certificate={PKI_DIR / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={PKI_DIR / 'apiserver-kubelet-client.key'}",
            f"--kubelet-certificate-authority={PKI_DIR / 'ca.crt'}",
            "--kubelet-preferred-address-types=InternalIP",  # the node's name resolves nowhere
            "--authorization-mode=Node,RBAC",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={PKI_DIR / 'sa.pub'}",
            f"--service-account-signing-key-file={PKI_DIR / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--allow-privileged=true",
            "--profiling=false",
        ],
    )
    wait_until(
        "kube-apiserver",
        lambda: http_ok(f"https://127.0.0.1:{APISERVER_PORT}/readyz", client_cert=True),
        process="kube-apiserver",
    )


def start_controllers(bins: Path) -> None:
    start(
        "kube-controller-manager",
        [
            str(bins / "kube-controller-manager"),
            f"--kubeconfig={STATE_DIR / 'controller-manager.kubeconfig'}",
            f"--authentication-kubeconfig={STATE_DIR / 'controller-manager.kubeconfig'}",
            f"--authorization-kubeconfig={STATE_DIR / 'controller-manager.kubeconfig'}",
            "--bind-address=127.0.0.1",
            f"--secure-port={CONTROLLER_MANAGER_PORT}",
            f"--service-account-private-key-file={PKI_DIR / 'sa.key'}",
            f"--root-ca-file={PKI_DIR / 'ca.crt'}",
            f"--cluster-signing-cert-file={PKI_DIR / 'ca.crt'}",
            f"--cluster-signing-key-file={PKI_DIR / 'ca.key'}",
            "--use-service-account-credentials=true",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--cluster-cidr={POD_CIDR}",
            "--leader-elect=false",
            # Many databases at once: do not throttle the controllers below the API server's limits.
            "--kube-api-qps=200",
            "--kube-api-burst=400",
        ],
    )
    start(
        "kube-scheduler",
        [
            str(bins / "kube-scheduler"),
            f"--kubeconfig={STATE_DIR / 'scheduler.kubeconfig'}",
            f"--authentication-kubeconfig={STATE_DIR / 'scheduler.kubeconfig'}",
            f"--authorization-kubeconfig={STATE_DIR / 'scheduler.kubeconfig'}",
            "--bind-address=127.0.0.1",
            f"--secure-port={SCHEDULER_PORT}",
            "--leader-elect=false",
        ],
    )
    wait_until(
        "kube-controller-manager",
        lambda: http_ok(f"https://127.0.0.1:{CONTROLLER_MANAGER_PORT}/healthz"),
        process="kube-controller-manager",
    )
    wait_until(
        "kube-scheduler", lambda: http_ok(f"https://127.0.0.1:{SCHEDULER_PORT}/healthz"), process="kube-scheduler"
    )


def write_kwok_config(bins: Path) -> Path:
    """kwok v0.8 takes its stages through --config: the module's stages plus ours."""
    documents = [(bins / "kwok-stages" / stage).read_text() for stage in KWOK_MODULE_STAGES]
    documents += [
        path.read_text().replace("__VOLUME_DIR__", str(VOLUME_DIR))
        for path in sorted((HACK_DIR / "kwok").glob("*.yaml"))
    ]
    config = STATE_DIR / "kwok.yaml"
    config.write_text("\n---\n".join(doc.strip() for doc in documents) + "\n")
    return config


def start_kwok(bins: Path) -> None:
    start(
        "kwok",
        [
            str(bins / "kwok"),
            f"--kubeconfig={STATE_DIR / 'kwok.kubeconfig'}",
            f"--config={write_kwok_config(bins)}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--node-ip=198.18.129.1",
            f"--cidr={KWOK_POD_CIDR}",
            f"--server-address=127.0.0.1:{KWOK_PORT}",
            "--node-lease-duration-seconds=40",
        ],
    )
    wait_until("kwok", lambda: http_ok(f"http://127.0.0.1:{KWOK_PORT}/healthz"), process="kwok")


def start_volume_agent() -> None:
    VOLUME_DIR.mkdir(parents=True, exist_ok=True)
    start(
        "volume-agent",
        [
            sys.executable,
            str(HACK_DIR / "volume_agent.py"),
            f"--kubeconfig={STATE_DIR / 'volume-agent.kubeconfig'}",
            f"--volume-dir={VOLUME_DIR}",
        ],
    )


def kubectl(bins: Path, *args: str, stdin: str | None = None, kubeconfig: Path = ADMIN_KUBECONFIG) -> str:
    result = subprocess.run(
        [str(bins / "kubectl"), f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        text=True,
        capture_output=True,
    )
    if result.returncode != 0:
        raise SystemExit(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def node_manifest(index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": f"kwok-node-{index}",
            "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
            "labels": {
                "kubernetes.io/hostname": f"kwok-node-{index}",
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": f"zone-{index}",
                "type": "kwok",
            },
        },
        "status": node_capacity(),
    }


def node_capacity() -> dict[str, Any]:
    """Simulated capacity: enough for a benchmark of hundreds of databases. Ephemeral storage too: a
    pod that requests some (the chart's presets do) never fits a node that reports none."""
    resources = {"cpu": "1000", "memory": "4Ti", "ephemeral-storage": "100Ti", "pods": "2000"}
    return {"allocatable": resources, "capacity": resources}


def set_node_capacity(bins: Path) -> None:
    """apply sets a node's status only when it creates the node: a cluster kept from an older
    checkout gets today's capacity too."""
    for index in range(NODE_COUNT):
        kubectl(
            bins,
            "patch",
            "node",
            f"kwok-node-{index}",
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": node_capacity()}),
        )


def install_cluster_objects(bins: Path) -> None:
    nodes = {"apiVersion": "v1", "kind": "List", "items": [node_manifest(i) for i in range(NODE_COUNT)]}
    kubectl(bins, "apply", "-f", "-", stdin=json.dumps(nodes))
    set_node_capacity(bins)
    kubectl(bins, "apply", "-f", str(HACK_DIR / "storage.yaml"))
    kubectl(bins, "wait", "--for=condition=Ready", "node", "--all", "--timeout=120s")
    log(f"{NODE_COUNT} simulated nodes are Ready")
    # Pods need the namespace's default ServiceAccount, which a controller creates.
    wait_until(
        "default ServiceAccount",
        lambda: (
            subprocess.run(
                [str(bins / "kubectl"), f"--kubeconfig={ADMIN_KUBECONFIG}", "get", "serviceaccount", "default"],
                capture_output=True,
            ).returncode
            == 0
        ),
    )


def healthy() -> bool:
    return all(running_pid(name) for name in components()) and http_ok(
        f"https://127.0.0.1:{APISERVER_PORT}/readyz", client_cert=True
    )


def real_node_taken() -> str | None:
    """Why this cluster must leave the real node alone: another running cluster has it."""
    other = node.running_elsewhere() if node.enabled() else None
    if not other:
        return None
    env = f"MYDB_CLUSTER_DIR={other['cluster_dir']} MYDB_CLUSTER_PORT_BASE={other['port_base']}"
    return (
        f"the host's real node belongs to the running cluster in {other['cluster_dir']}; one cluster at a time "
        f"can have it. Pause that one with `{env} python3 hack/cluster.py stop` (`up` resumes it, its databases "
        f"kept), or start this one without a real node (MYDB_REAL_NODE=0)."
    )


def cmd_up(_: argparse.Namespace) -> None:
    bins = bin_dir()
    if healthy():
        log("already running")
        set_node_capacity(bins)
        print_usage(bins)
        return
    taken = real_node_taken()
    if taken:
        raise SystemExit(taken)
    if any(running_pid(name) for name in components()) or (node.enabled() and node.leftovers()):
        log("a partial cluster is running (or one was killed): stopping the rest first")
        stop_processes()
    if (STATE_DIR / "etcd").exists():
        log(f"resuming the cluster kept in {STATE_DIR}")
    for folder in (STATE_DIR, LOG_DIR, PID_DIR):
        folder.mkdir(parents=True, exist_ok=True)
    make_pki()
    write_kubeconfigs()
    # The real node's host part (network, registry, images, containerd) needs no API server: it is done
    # beside the control plane's start, which it used to follow (about 3 of a start's 11 s).
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as beside:
        host = beside.submit(node.prepare_host, bins) if node.enabled() else None
        start_etcd(bins)
        start_apiserver(bins)
        start_controllers(bins)
        start_kwok(bins)
        start_volume_agent()
        install_cluster_objects(bins)
        if host is not None:
            node.join(host.result(), bins, lambda *args, stdin=None: kubectl(bins, *args, stdin=stdin), kubeconfig_for)
    log("cluster is up")
    print_usage(bins)


def print_usage(bins: Path) -> None:
    """On stdout, always: callers (the test fixtures, the demo) read the kubeconfig path from here."""
    print(f"export KUBECONFIG={ADMIN_KUBECONFIG}")
    print(f"export PATH={bins}:$PATH    # kubectl, helm, kwok of the pinned versions")
    if node.enabled():
        names = ", ".join(n.name for n in node.real_nodes())
        print(f"# real nodes {names}: pods tolerate {node.NODE_LABEL}=true:NoSchedule; images: {node.REGISTRY}")


def stop_processes(grace: float = 0, pause: bool = False) -> None:
    stop(OPERATOR)
    taken = real_node_taken()
    if taken:
        log(f"leaving the real node alone: {taken}")
    elif node.enabled():
        node.down(grace, pause)
    for name in reversed(CONTROL_PLANE):
        stop(name)


def cmd_stop(_: argparse.Namespace) -> None:
    """Pause: every process goes (the real node's network too), the state stays; `up` resumes it.
    The containers get 30 s to end on SIGTERM, so that PostgreSQL shuts down cleanly."""
    stop_processes(grace=30, pause=True)
    log(f"cluster is stopped; its state is kept in {STATE_DIR}: `up` resumes it, `down` removes it")


def cmd_down(_: argparse.Namespace) -> None:
    stop_processes()
    if STATE_DIR.exists():
        subprocess.run(["rm", "-rf", str(STATE_DIR)], check=True)
    ADMIN_KUBECONFIG.unlink(missing_ok=True)
    log(f"cluster is down (logs kept in {LOG_DIR})")


def cmd_real_node_owner(_: argparse.Namespace) -> None:
    """Print MYDB_CLUSTER_DIR and MYDB_CLUSTER_PORT_BASE of another running cluster that has the real node; exit 1
    if none does."""
    other = node.running_elsewhere()
    if not other:
        sys.exit(1)
    print(f"MYDB_CLUSTER_DIR={other['cluster_dir']}")
    print(f"MYDB_CLUSTER_PORT_BASE={other['port_base']}")


def cmd_restart_apiserver(_: argparse.Namespace) -> None:
    """Stop and start the API server alone (etcd keeps the state): for tests of reconnection."""
    bins = bin_dir()
    stop("kube-apiserver")
    start_apiserver(bins)


def cmd_status(_: argparse.Namespace) -> None:
    for name in components():
        pid = running_pid(name)
        print(f"{name:24} {'running, pid ' + str(pid) if pid else 'stopped'}")
    sys.exit(0 if healthy() else 1)


def cmd_leftovers(_: argparse.Namespace) -> None:
    """List what the real node left on this host; exit 1 if anything."""
    found = node.leftovers()
    for item in found:
        print(item)
    sys.exit(1 if found else 0)


def cmd_node(args: argparse.Namespace) -> None:
    """A fault on real node N (lose, freeze, cut, drain), or `back` to undo it."""
    found = [n for n in node.real_nodes() if args.node in (str(n.index), n.name)]
    if not found:
        raise SystemExit(f"no real node {args.node}: {', '.join(n.name for n in node.real_nodes())}")
    target = found[0]
    current = node.fault(target)
    if args.action != "back" and current:
        raise SystemExit(f"{target.name} is {current} already: `node back {args.node}` first")
    # The faults act at once: the binaries (a build cache's check) only for what needs them.
    if args.action == "lose":
        node.lose(target)
    elif args.action == "freeze":
        node.freeze(target)
    elif args.action == "cut":
        node.cut_off(target)
    else:
        bins = bin_dir()

        def admin(*words: str, stdin: str | None = None) -> str:
            return kubectl(bins, *words, stdin=stdin)

        if args.action == "drain":
            node.drain(target, admin)
        else:
            node.bring_back(target, node_policies.binary(), bins, admin)


def cmd_sa_kubeconfig(args: argparse.Namespace) -> None:
    """Mint a kubeconfig for a ServiceAccount from the TokenRequest API."""
    bins = bin_dir()
    token = kubectl(
        bins, "create", "token", args.serviceaccount, "-n", args.namespace, f"--duration={args.duration}"
    ).strip()
    out = Path(args.output)
    out.write_text(kubeconfig_yaml(f"system:serviceaccount:{args.namespace}:{args.serviceaccount}", {"token": token}))
    out.chmod(0o600)
    log(f"wrote {out} for ServiceAccount {args.namespace}/{args.serviceaccount}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("up").set_defaults(func=cmd_up)
    commands.add_parser("down").set_defaults(func=cmd_down)
    commands.add_parser("stop").set_defaults(func=cmd_stop)
    commands.add_parser("real-node-owner").set_defaults(func=cmd_real_node_owner)
    commands.add_parser("status").set_defaults(func=cmd_status)
    commands.add_parser("leftovers").set_defaults(func=cmd_leftovers)
    commands.add_parser("restart-apiserver").set_defaults(func=cmd_restart_apiserver)
    fault = commands.add_parser("node")
    fault.add_argument("action", choices=["lose", "freeze", "cut", "drain", "back"])
    fault.add_argument("node", help="the real node's number (1, 2, ...) or name")
    fault.set_defaults(func=cmd_node)
    sa = commands.add_parser("sa-kubeconfig")
    sa.add_argument("-n", "--namespace", required=True)
    sa.add_argument("-s", "--serviceaccount", required=True)
    sa.add_argument("-o", "--output", required=True)
    sa.add_argument("--duration", default="24h")
    sa.set_defaults(func=cmd_sa_kubeconfig)
    args = parser.parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
