#!/usr/bin/env python3
"""A real local Kubernetes control plane, run as plain processes.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok (which
simulates nodes, pods and volumes) are started from the binaries that
hack/build-tools.sh builds.  Nothing here needs a container runtime.

    python3 hack/cluster.py up        # idempotent: a healthy cluster is left alone
    python3 hack/cluster.py down      # stops what `up` started (by pid) and removes state
    python3 hack/cluster.py status
    python3 hack/cluster.py restart-apiserver   # for reconnection tests
    python3 hack/cluster.py sa-kubeconfig -n NS -s SA -o FILE

Only the standard library is used so that this runs before any venv exists.
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import signal
import ssl
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

HACK_DIR = Path(__file__).resolve().parent
REPO_DIR = HACK_DIR.parent
CLUSTER_DIR = Path(os.environ.get("MYDB_CLUSTER_DIR", REPO_DIR / ".cluster"))
STATE_DIR = CLUSTER_DIR / "state"  # removed by `down`
LOG_DIR = CLUSTER_DIR / "logs"  # kept by `down`, for debugging
PKI_DIR = STATE_DIR / "pki"
PID_DIR = STATE_DIR / "pids"
ADMIN_KUBECONFIG = CLUSTER_DIR / "admin.kubeconfig"

# All ports hang off one base so that a second cluster (the test of `down`)
# can run beside the first with another MYDB_CLUSTER_DIR and base.
PORT_BASE = int(os.environ.get("MYDB_CLUSTER_PORT_BASE", "16400"))
APISERVER_PORT = PORT_BASE + 43
KWOK_PORT = PORT_BASE + 47
CONTROLLER_MANAGER_PORT = PORT_BASE + 57
SCHEDULER_PORT = PORT_BASE + 59
ETCD_CLIENT_PORT = PORT_BASE + 79
ETCD_PEER_PORT = PORT_BASE + 80
SERVICE_CIDR = "10.96.0.0/16"  # room for hundreds of databases' Services
SERVICE_FIRST_IP = "10.96.0.1"
POD_CIDR = "10.244.0.0/16"  # apart from the service range
NODE_COUNT = 3
# kwok stages shipped in its module that we use as they are.
KWOK_MODULE_STAGES = [
    "node/fast/node-initialize.yaml",
    "node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
    "pod/fast/pod-ready.yaml",
    "pod/fast/pod-complete.yaml",
    "pod/fast/pod-delete.yaml",
]
COMPONENTS = ["etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"]
OPERATOR = "mydb-operator"  # started by `make demo`; stopped with the cluster
START = time.monotonic()


def log(message: str) -> None:
    print(f"[cluster {time.monotonic() - START:5.1f}s] {message}", file=sys.stderr, flush=True)


def bin_dir() -> Path:
    """Build the binaries if needed (a cache hit is instant) and return their folder."""
    out = subprocess.run(
        ["bash", str(HACK_DIR / "build-tools.sh")], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return Path(out.strip().splitlines()[-1])


# --------------------------------------------------------------------- PKI


def openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


def make_cert(name: str, subject: str, *, server_sans: str | None = None) -> None:
    """Write PKI_DIR/name.{key,crt}, signed by the local CA."""
    key, csr, crt = (PKI_DIR / f"{name}.{ext}" for ext in ("key", "csr", "crt"))
    openssl("genrsa", "-out", str(key), "2048")
    openssl("req", "-new", "-key", str(key), "-subj", subject, "-out", str(csr))
    ext = PKI_DIR / f"{name}.ext"
    usage = "serverAuth" if server_sans else "clientAuth"
    lines = ["basicConstraints=CA:FALSE", "keyUsage=digitalSignature,keyEncipherment", f"extendedKeyUsage={usage}"]
    if server_sans:
        lines.append(f"subjectAltName={server_sans}")
    ext.write_text("\n".join(lines) + "\n")
    openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(PKI_DIR / "ca.crt"), "-CAkey", str(PKI_DIR / "ca.key"),
        "-CAcreateserial", "-days", "3650", "-sha256", "-extfile", str(ext), "-out", str(crt),
    )


def make_pki() -> None:
    PKI_DIR.mkdir(parents=True, exist_ok=True)
    openssl("genrsa", "-out", str(PKI_DIR / "ca.key"), "2048")
    openssl(
        "req", "-x509", "-new", "-key", str(PKI_DIR / "ca.key"), "-subj", "/CN=mydb-local-ca",
        "-days", "3650", "-sha256", "-out", str(PKI_DIR / "ca.crt"),
    )
    sans = ",".join(
        ["IP:127.0.0.1", f"IP:{SERVICE_FIRST_IP}", "DNS:localhost", "DNS:kubernetes",
         "DNS:kubernetes.default", "DNS:kubernetes.default.svc", "DNS:kubernetes.default.svc.cluster.local"]
    )
    make_cert("apiserver", "/CN=kube-apiserver", server_sans=sans)
    make_cert("admin", "/O=system:masters/CN=mydb-admin")
    make_cert("controller-manager", "/CN=system:kube-controller-manager")
    make_cert("scheduler", "/CN=system:kube-scheduler")
    # kwok plays every kubelet; it needs broad rights, like the kubelets it stands in for.
    make_cert("kwok", "/O=system:masters/CN=kwok")
    openssl("genrsa", "-out", str(PKI_DIR / "sa.key"), "2048")
    openssl("rsa", "-in", str(PKI_DIR / "sa.key"), "-pubout", "-out", str(PKI_DIR / "sa.pub"))


def b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def kubeconfig_yaml(user: str, credentials: dict[str, str]) -> str:
    """A kubeconfig as JSON (which is valid YAML) for the local API server."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "mydb-local", "cluster": {
            "server": f"https://127.0.0.1:{APISERVER_PORT}",
            "certificate-authority-data": b64(PKI_DIR / "ca.crt"),
        }}],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": "mydb-local", "context": {"cluster": "mydb-local", "user": user}}],
        "current-context": "mydb-local",
    }
    return json.dumps(config, indent=2) + "\n"


def cert_kubeconfig(name: str) -> str:
    return kubeconfig_yaml(name, {
        "client-certificate-data": b64(PKI_DIR / f"{name}.crt"),
        "client-key-data": b64(PKI_DIR / f"{name}.key"),
    })


def write_kubeconfigs() -> None:
    for name in ("controller-manager", "scheduler", "kwok"):
        (STATE_DIR / f"{name}.kubeconfig").write_text(cert_kubeconfig(name))
    ADMIN_KUBECONFIG.write_text(cert_kubeconfig("admin"))
    ADMIN_KUBECONFIG.chmod(0o600)


# --------------------------------------------------------------- processes


def pid_file(name: str) -> Path:
    return PID_DIR / f"{name}.pid"


def running_pid(name: str) -> int | None:
    """The pid of component `name` if it is alive and is really that program (pids get reused)."""
    try:
        pid = int(pid_file(name).read_text())
        args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
    except (FileNotFoundError, ValueError, ProcessLookupError):
        return None
    ours = Path(args[0]).name == name or (name == OPERATOR and "mydb_operator.cli" in args)
    return pid if ours else None


def start(name: str, args: list[str]) -> None:
    log_file = open(LOG_DIR / f"{name}.log", "ab")
    process = subprocess.Popen(
        args, stdout=log_file, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True
    )
    pid_file(name).write_text(str(process.pid))
    log(f"started {name} (pid {process.pid}, log {LOG_DIR / (name + '.log')})")


def stop(name: str) -> None:
    pid = running_pid(name)
    if pid is None:
        return
    os.kill(pid, signal.SIGTERM)
    for _ in range(100):
        if running_pid(name) is None or not Path(f"/proc/{pid}").exists():
            break
        time.sleep(0.1)
    else:
        os.kill(pid, signal.SIGKILL)
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass
    log(f"stopped {name} (pid {pid})")


def http_ok(url: str, *, client_cert: bool = False, timeout: float = 2.0) -> bool:
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if client_cert:
        context.load_cert_chain(PKI_DIR / "admin.crt", PKI_DIR / "admin.key")
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            return response.status == 200
    except OSError:
        return False


def wait_until(what: str, check, timeout: float = 120.0, process: str | None = None) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            log(f"{what} is ready")
            return
        if process and running_pid(process) is None:
            raise SystemExit(f"{process} exited while starting; see {LOG_DIR / (process + '.log')}")
        time.sleep(0.2)
    raise SystemExit(f"{what} not ready after {timeout:.0f}s; see the logs in {LOG_DIR}")


# ---------------------------------------------------------------- commands


def start_etcd(bins: Path) -> None:
    start("etcd", [
        str(bins / "etcd"), "--name=local", f"--data-dir={STATE_DIR / 'etcd'}",
        f"--listen-client-urls=http://127.0.0.1:{ETCD_CLIENT_PORT}",
        f"--advertise-client-urls=http://127.0.0.1:{ETCD_CLIENT_PORT}",
        f"--listen-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}",
        f"--initial-advertise-peer-urls=http://127.0.0.1:{ETCD_PEER_PORT}",
        f"--initial-cluster=local=http://127.0.0.1:{ETCD_PEER_PORT}",
        "--listen-metrics-urls=", "--log-level=warn",
        # A throwaway test cluster: skipping fsync keeps 2 cores free for the rest.
        "--unsafe-no-fsync=true",
    ])
    wait_until("etcd", lambda: http_ok(f"http://127.0.0.1:{ETCD_CLIENT_PORT}/health"), process="etcd")


def start_apiserver(bins: Path) -> None:
    start("kube-apiserver", [
        str(bins / "kube-apiserver"),
        f"--etcd-servers=http://127.0.0.1:{ETCD_CLIENT_PORT}",
        "--bind-address=127.0.0.1", "--advertise-address=127.0.0.1", f"--secure-port={APISERVER_PORT}",
        f"--tls-cert-file={PKI_DIR / 'apiserver.crt'}", f"--tls-private-key-file={PKI_DIR / 'apiserver.key'}",
        f"--client-ca-file={PKI_DIR / 'ca.crt'}",
        "--authorization-mode=Node,RBAC",
        "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
        f"--service-account-key-file={PKI_DIR / 'sa.pub'}",
        f"--service-account-signing-key-file={PKI_DIR / 'sa.key'}",
        f"--service-cluster-ip-range={SERVICE_CIDR}",
        "--allow-privileged=true",
        "--profiling=false",
    ])
    wait_until(
        "kube-apiserver",
        lambda: http_ok(f"https://127.0.0.1:{APISERVER_PORT}/readyz", client_cert=True),
        process="kube-apiserver",
    )


def start_controllers(bins: Path) -> None:
    start("kube-controller-manager", [
        str(bins / "kube-controller-manager"),
        f"--kubeconfig={STATE_DIR / 'controller-manager.kubeconfig'}",
        f"--authentication-kubeconfig={STATE_DIR / 'controller-manager.kubeconfig'}",
        f"--authorization-kubeconfig={STATE_DIR / 'controller-manager.kubeconfig'}",
        "--bind-address=127.0.0.1", f"--secure-port={CONTROLLER_MANAGER_PORT}",
        f"--service-account-private-key-file={PKI_DIR / 'sa.key'}",
        f"--root-ca-file={PKI_DIR / 'ca.crt'}",
        f"--cluster-signing-cert-file={PKI_DIR / 'ca.crt'}",
        f"--cluster-signing-key-file={PKI_DIR / 'ca.key'}",
        "--use-service-account-credentials=true",
        f"--service-cluster-ip-range={SERVICE_CIDR}", f"--cluster-cidr={POD_CIDR}",
        "--leader-elect=false",
        # Many databases at once: do not throttle the controllers below the API server's limits.
        "--kube-api-qps=200", "--kube-api-burst=400",
    ])
    start("kube-scheduler", [
        str(bins / "kube-scheduler"),
        f"--kubeconfig={STATE_DIR / 'scheduler.kubeconfig'}",
        f"--authentication-kubeconfig={STATE_DIR / 'scheduler.kubeconfig'}",
        f"--authorization-kubeconfig={STATE_DIR / 'scheduler.kubeconfig'}",
        "--bind-address=127.0.0.1", f"--secure-port={SCHEDULER_PORT}",
        "--leader-elect=false",
    ])
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
    documents += [path.read_text() for path in sorted((HACK_DIR / "kwok").glob("*.yaml"))]
    config = STATE_DIR / "kwok.yaml"
    config.write_text("\n---\n".join(doc.strip() for doc in documents) + "\n")
    return config


def start_kwok(bins: Path) -> None:
    start("kwok", [
        str(bins / "kwok"),
        f"--kubeconfig={STATE_DIR / 'kwok.kubeconfig'}",
        f"--config={write_kwok_config(bins)}",
        "--manage-all-nodes=false",
        "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
        "--node-ip=10.0.0.1", f"--cidr={POD_CIDR}",
        f"--server-address=127.0.0.1:{KWOK_PORT}",
        "--node-lease-duration-seconds=40",
    ])
    wait_until("kwok", lambda: http_ok(f"http://127.0.0.1:{KWOK_PORT}/healthz"), process="kwok")


def kubectl(bins: Path, *args: str, stdin: str | None = None, kubeconfig: Path = ADMIN_KUBECONFIG) -> str:
    result = subprocess.run(
        [str(bins / "kubectl"), f"--kubeconfig={kubeconfig}", *args],
        input=stdin, text=True, capture_output=True,
    )
    if result.returncode != 0:
        raise SystemExit(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
    return result.stdout


def node_manifest(index: int) -> dict:
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
        # Simulated capacity: enough for a benchmark of hundreds of databases.
        "status": {
            "allocatable": {"cpu": "1000", "memory": "4Ti", "pods": "2000"},
            "capacity": {"cpu": "1000", "memory": "4Ti", "pods": "2000"},
        },
    }


def install_cluster_objects(bins: Path) -> None:
    nodes = {"apiVersion": "v1", "kind": "List", "items": [node_manifest(i) for i in range(NODE_COUNT)]}
    kubectl(bins, "apply", "-f", "-", stdin=json.dumps(nodes))
    kubectl(bins, "apply", "-f", str(HACK_DIR / "storage.yaml"))
    kubectl(bins, "wait", "--for=condition=Ready", "node", "--all", "--timeout=120s")
    log(f"{NODE_COUNT} simulated nodes are Ready")
    # Pods need the namespace's default ServiceAccount, which a controller creates.
    wait_until("default ServiceAccount", lambda: subprocess.run(
        [str(bins / "kubectl"), f"--kubeconfig={ADMIN_KUBECONFIG}", "get", "serviceaccount", "default"],
        capture_output=True).returncode == 0)


def healthy() -> bool:
    return all(running_pid(name) for name in COMPONENTS) and http_ok(
        f"https://127.0.0.1:{APISERVER_PORT}/readyz", client_cert=True
    )


def cmd_up(_: argparse.Namespace) -> None:
    bins = bin_dir()
    if healthy():
        log("already running")
        print_usage(bins)
        return
    if any(running_pid(name) for name in COMPONENTS):
        log("a partial cluster is running: stopping it first")
        cmd_down(argparse.Namespace())
    for folder in (STATE_DIR, LOG_DIR, PID_DIR):
        folder.mkdir(parents=True, exist_ok=True)
    make_pki()
    write_kubeconfigs()
    start_etcd(bins)
    start_apiserver(bins)
    start_controllers(bins)
    start_kwok(bins)
    install_cluster_objects(bins)
    log("cluster is up")
    print_usage(bins)


def print_usage(bins: Path) -> None:
    """On stdout, always: callers (the test fixtures, the demo) read the kubeconfig path from here."""
    print(f"export KUBECONFIG={ADMIN_KUBECONFIG}")
    print(f"export PATH={bins}:$PATH    # kubectl, helm, kwok of the pinned versions")


def cmd_down(_: argparse.Namespace) -> None:
    for name in [OPERATOR, *reversed(COMPONENTS)]:
        stop(name)
    if STATE_DIR.exists():
        subprocess.run(["rm", "-rf", str(STATE_DIR)], check=True)
    ADMIN_KUBECONFIG.unlink(missing_ok=True)
    log(f"cluster is down (logs kept in {LOG_DIR})")


def cmd_restart_apiserver(_: argparse.Namespace) -> None:
    """Stop and start the API server alone (etcd keeps the state): for tests of reconnection."""
    bins = bin_dir()
    stop("kube-apiserver")
    start_apiserver(bins)


def cmd_status(_: argparse.Namespace) -> None:
    for name in COMPONENTS:
        pid = running_pid(name)
        print(f"{name:24} {'running, pid ' + str(pid) if pid else 'stopped'}")
    sys.exit(0 if healthy() else 1)


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
    commands.add_parser("status").set_defaults(func=cmd_status)
    commands.add_parser("restart-apiserver").set_defaults(func=cmd_restart_apiserver)
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
