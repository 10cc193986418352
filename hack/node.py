"""One real node beside the kwok nodes: containerd + runc, CNI, kubelet,
kube-proxy, CoreDNS and a loopback OCI registry, run as processes on this
machine (root needed).

The network follows one rule: no packet for a pod or Service address ever
leaves this machine.
- Pods and Services take their addresses from 198.18.0.0/15, for which the
  host has an unreachable route; the pod bridge's own /24 is more specific.
- Pods route only that /15 (no default route), the bridge does no NAT, and a
  guard in the mangle table drops anything forwarded from the bridge to
  another interface (or back), whatever kube-proxy programs.
- CoreDNS answers cluster.local and the reverse zones of the /15 only:
  every other name is REFUSED, nothing is forwarded upstream.
- containerd resolves every registry name to the loopback registry.

`down` removes all of it: processes (containers included), mounts, network
namespaces, links, iptables chains, the route, and the sysctls it changed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import signal
import subprocess
import time
from pathlib import Path

from harness import (
    CACHE_DIR,
    CLUSTER_DIR,
    HACK_DIR,
    PKI_DIR,
    POD_CIDR,
    PORT_BASE,
    SAFE_RANGE,
    STATE_DIR,
    http_ok,
    log,
    make_cert,
    run,
    running_pid,
    start,
    stop,
    wait_until,
)

NODE_NAME = "mydb-real-node"
NODE_LABEL = "node.mydb.local/real"  # label and taint key: only pods that ask land here
BRIDGE = "mydb0"
NODE_SUBNET = "198.18.128.0/24"  # the real node's pods, apart from kwok's 198.18.0.0/17
NODE_IP = "198.18.128.1"  # the host on the bridge: kubelet, CoreDNS, the API server for pods
# Locally administered, spelling NODE_IP. A bridge without an address of its
# own takes its lowest port's, so a pod leaving changed the gateway's MAC under
# every other pod: their DNS and Service traffic went nowhere until ARP gave up
# on the old one, 10-40 s later.
BRIDGE_MAC = "02:00:c6:12:80:01"
CLUSTER_DOMAIN = "cluster.local"
REGISTRY = f"127.0.0.1:{PORT_BASE}"
KUBELET_PORT = PORT_BASE + 50
KUBELET_HEALTHZ_PORT = PORT_BASE + 51
PROXY_HEALTHZ_PORT = PORT_BASE + 52
PROXY_METRICS_PORT = PORT_BASE + 53
COREDNS_READY_PORT = PORT_BASE + 54
COREDNS_HEALTH_PORT = PORT_BASE + 55
# Unix sockets have a 108-byte path limit: keep them out of a deep checkout.
RUN_DIR = Path(f"/run/mydb-cluster-{PORT_BASE}")
CONTAINERD_SOCKET = RUN_DIR / "containerd.sock"
REGISTRY_DIR = CACHE_DIR / "registry"  # outlives `down`: images are pushed once
GUARD_CHAIN = "MYDB-GUARD"
COMPONENTS = ["registry", "containerd", "coredns", "kubelet", "kube-proxy"]
# What the node needs from the host, and the Debian package that brings it.
HOST_COMMANDS = {
    "ip": "iproute2",
    "iptables": "iptables",
    "iptables-save": "iptables",
    "conntrack": "conntrack",
    "containerd": "containerd",
    "runc": "runc",
    "ctr": "containerd",
}
CNI_BIN_DIR = Path("/usr/lib/cni")
CNI_PLUGINS = ["bridge", "host-local", "loopback"]
# The bridge, the pod addresses, kube-proxy's chains and CoreDNS's address are
# the host's, so one cluster at a time runs the real node. This file names it;
# in /run, it goes with a reboot as the network state does.
OWNER_FILE = Path("/run/mydb-real-node.json")


def enabled() -> bool:
    """MYDB_REAL_NODE=0 runs the control plane with kwok nodes only (a second cluster beside the first)."""
    return os.environ.get("MYDB_REAL_NODE", "1") != "0"


# -------------------------------------------------------------- ownership


def owner() -> dict | None:
    """{"cluster_dir": ..., "port_base": ...} of the cluster that last started the real node, if any."""
    try:
        return json.loads(OWNER_FILE.read_text())
    except (OSError, ValueError):
        return None


def running_elsewhere() -> dict | None:
    """The owner, when it is another cluster whose kubelet is still running: this one must not touch the node."""
    found = owner()
    if not found or Path(found["cluster_dir"]).resolve() == CLUSTER_DIR.resolve():
        return None
    return found if running_pid("kubelet", Path(found["cluster_dir"]) / "state" / "pids") else None


def claim() -> None:
    OWNER_FILE.write_text(json.dumps({"cluster_dir": str(CLUSTER_DIR.resolve()), "port_base": PORT_BASE}) + "\n")


def release() -> None:
    if not running_elsewhere():
        OWNER_FILE.unlink(missing_ok=True)


# ------------------------------------------------------------ host checks


def host_problems() -> list[str]:
    """What this host lacks for a real node, each with what to do about it."""
    problems = []
    if os.geteuid() != 0:
        problems.append("the real node needs root (network namespaces, mounts, iptables)")
    for command, package in HOST_COMMANDS.items():
        if not shutil.which(command):
            problems.append(f"`{command}` is missing: apt-get install {package} (hack/install-node-packages.sh)")
    for plugin in CNI_PLUGINS:
        if not (CNI_BIN_DIR / plugin).exists():
            problems.append(
                f"CNI plugin {CNI_BIN_DIR / plugin} is missing: apt-get install containernetworking-plugins"
            )
    if not Path("/sys/fs/cgroup/memory").is_dir() and not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        problems.append(
            "no memory cgroup at /sys/fs/cgroup/memory (v1) nor a cgroup v2 root: the kubelet cannot run pods"
        )
    if not Path("/proc/sys/net/bridge/bridge-nf-call-iptables").exists():
        problems.append(
            "br_netfilter is not loaded (modprobe br_netfilter): Services between pods of the bridge need it"
        )
    return problems


def cgroup_v1() -> bool:
    return not Path("/sys/fs/cgroup/cgroup.controllers").exists()


# ---------------------------------------------------------------- network


def link_exists(name: str) -> bool:
    return run("ip", "link", "show", name, check=False).returncode == 0


def sysctl_path(name: str) -> Path:
    return Path("/proc/sys") / name.replace(".", "/")


def setup_network() -> None:
    run("ip", "route", "replace", "unreachable", SAFE_RANGE)
    if not link_exists(BRIDGE):
        run("ip", "link", "add", BRIDGE, "type", "bridge")
    run("ip", "link", "set", BRIDGE, "address", BRIDGE_MAC)
    run("ip", "addr", "replace", f"{NODE_IP}/24", "dev", BRIDGE)
    run("ip", "link", "set", BRIDGE, "up")
    # Forwarding only for packets that arrive on the bridge (pod -> Service
    # -> pod); the host's other interfaces keep forwarding off.
    sysctl_path(f"net.ipv4.conf.{BRIDGE}.forwarding").write_text("1")
    # kube-proxy's DNAT must see replies bridged between two pods; the old
    # value is put back by `down`.
    saved = STATE_DIR / "sysctl.json"
    nf = "net.bridge.bridge-nf-call-iptables"
    if not saved.exists():
        saved.write_text(json.dumps({nf: sysctl_path(nf).read_text().strip()}))
    sysctl_path(nf).write_text("1")
    install_guard()
    log(f"network: bridge {BRIDGE} {NODE_IP}/24, unreachable route for {SAFE_RANGE}, forward guard {GUARD_CHAIN}")


def install_guard() -> None:
    """Drop whatever is forwarded between the bridge and any other interface.

    In the mangle table, which runs before kube-proxy's filter rules, so no
    Service endpoint outside the range (and no masquerade) can open a way out."""
    run("iptables", "-t", "mangle", "-N", GUARD_CHAIN, check=False)
    run("iptables", "-t", "mangle", "-F", GUARD_CHAIN)
    for rule in ([f"-i {BRIDGE} -o {BRIDGE} -j RETURN"], [f"-i {BRIDGE} -j DROP"], [f"-o {BRIDGE} -j DROP"]):
        run("iptables", "-t", "mangle", "-A", GUARD_CHAIN, *rule[0].split())
    if run("iptables", "-t", "mangle", "-C", "FORWARD", "-j", GUARD_CHAIN, check=False).returncode != 0:
        run("iptables", "-t", "mangle", "-I", "FORWARD", "1", "-j", GUARD_CHAIN)


def write_cni_config() -> Path:
    conf_dir = STATE_DIR / "cni" / "net.d"
    conf_dir.mkdir(parents=True, exist_ok=True)
    network = {
        "cniVersion": "1.0.0",
        "name": "mydb",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                # The harness owns the bridge address; the plugin neither takes
                # the gateway address nor turns on forwarding host-wide.
                "isGateway": False,
                "ipMasq": False,
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "dataDir": str(STATE_DIR / "cni" / "ipam"),
                    "ranges": [[{"subnet": NODE_SUBNET, "rangeStart": "198.18.128.10", "gateway": NODE_IP}]],
                    "routes": [{"dst": SAFE_RANGE, "gw": NODE_IP}],
                },
            }
        ],
    }
    (conf_dir / "10-mydb.conflist").write_text(json.dumps(network, indent=2) + "\n")
    return conf_dir


# --------------------------------------------------------------- registry


def start_registry(bins: Path) -> None:
    REGISTRY_DIR.mkdir(parents=True, exist_ok=True)
    config = STATE_DIR / "registry.yaml"
    config.write_text(
        json.dumps(
            {
                "version": 0.1,
                "log": {"level": "warn", "accesslog": {"disabled": True}},
                "storage": {"filesystem": {"rootdirectory": str(REGISTRY_DIR)}, "delete": {"enabled": True}},
                "http": {"addr": REGISTRY},
            }
        )
        + "\n"
    )
    start("registry", [str(bins / "registry"), "serve", str(config)])
    wait_until("registry", lambda: http_ok(f"http://{REGISTRY}/v2/"), process="registry")


def push_images() -> dict[str, str]:
    """Build what is missing (cached), push it to the registry, and return KEY -> image reference."""
    subprocess.run(["bash", str(HACK_DIR / "images.sh"), "push", REGISTRY], check=True)
    listed = run("bash", str(HACK_DIR / "images.sh"), "list").stdout
    return {key: f"{REGISTRY}/{ref}" for key, ref in (line.split("=", 1) for line in listed.split() if "=" in line)}


# ------------------------------------------------------------- containerd


def write_containerd_config(pause_image: str, cni_conf_dir: Path) -> Path:
    hosts = STATE_DIR / "containerd" / "certs.d" / "_default"
    hosts.mkdir(parents=True, exist_ok=True)
    # Every registry name, docker.io included, resolves to the loopback registry.
    # containerd 1.6 cannot parse a hosts.toml without a [host] table, and
    # then silently falls back to the registry's own address:
    # tests/e2e/test_real_node.py proves this one is read.
    (hosts / "hosts.toml").write_text(
        f'server = "http://{REGISTRY}"\n\n[host."http://{REGISTRY}"]\n  capabilities = ["pull", "resolve"]\n'
    )
    cri = 'plugins."io.containerd.grpc.v1.cri"'
    config = STATE_DIR / "containerd.toml"
    config.write_text(f"""version = 2
root = "{STATE_DIR / "containerd" / "root"}"
state = "{RUN_DIR / "containerd"}"
[grpc]
  address = "{CONTAINERD_SOCKET}"
[{cri}]
  sandbox_image = "{pause_image}"
  # This sandbox lacks CAP_SYS_RESOURCE: runc cannot lower oom_score_adj below ours.
  restrict_oom_score_adj = true
  disable_apparmor = true
  netns_mounts_under_state_dir = true
[{cri}.containerd]
  snapshotter = "overlayfs"
  default_runtime_name = "runc"
[{cri}.containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
[{cri}.containerd.runtimes.runc.options]
  SystemdCgroup = false
[{cri}.cni]
  bin_dir = "{CNI_BIN_DIR}"
  conf_dir = "{cni_conf_dir}"
[{cri}.registry]
  config_path = "{STATE_DIR / "containerd" / "certs.d"}"
""")
    return config


def start_containerd(config: Path) -> None:
    RUN_DIR.mkdir(parents=True, exist_ok=True)
    start("containerd", ["containerd", "--config", str(config)])
    wait_until(
        "containerd",
        lambda: run("ctr", "--address", str(CONTAINERD_SOCKET), "version", check=False).returncode == 0,
        process="containerd",
    )


# ---------------------------------------------------------------- CoreDNS


REVERSE_ZONES = "18.198.in-addr.arpa 19.198.in-addr.arpa"


def start_coredns(bins: Path, kubeconfig: Path) -> None:
    corefile = STATE_DIR / "Corefile"
    # One server block for the cluster's zones and nothing else: a query for
    # any other name matches no zone and is REFUSED.
    corefile.write_text(f"""{CLUSTER_DOMAIN} {REVERSE_ZONES} {{
    bind {NODE_IP}
    errors
    health 127.0.0.1:{COREDNS_HEALTH_PORT}
    ready 127.0.0.1:{COREDNS_READY_PORT}
    kubernetes {CLUSTER_DOMAIN} {REVERSE_ZONES} {{
        kubeconfig {kubeconfig} mydb-local
        pods insecure
    }}
    cache 30
}}
""")
    start("coredns", [str(bins / "coredns"), "-conf", str(corefile)])
    wait_until("coredns", lambda: http_ok(f"http://127.0.0.1:{COREDNS_READY_PORT}/ready"), process="coredns")


# ------------------------------------------------------ kubelet, kube-proxy


def make_node_pki() -> None:
    make_cert("kubelet", f"/O=system:nodes/CN=system:node:{NODE_NAME}")
    make_cert("kubelet-serving", f"/CN={NODE_NAME}", server_sans=f"IP:{NODE_IP},DNS:{NODE_NAME}")
    make_cert("kube-proxy", "/CN=system:kube-proxy")
    make_cert("coredns", "/CN=mydb:coredns")


def start_kubelet(bins: Path, kubeconfig: Path) -> None:
    resolv = STATE_DIR / "resolv.conf"
    resolv.write_text("# no upstream: pods resolve through CoreDNS only\n")
    config = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": NODE_IP,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": KUBELET_HEALTHZ_PORT,
        "tlsCertFile": str(PKI_DIR / "kubelet-serving.crt"),
        "tlsPrivateKeyFile": str(PKI_DIR / "kubelet-serving.key"),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(PKI_DIR / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{CONTAINERD_SOCKET}",
        "cgroupDriver": "cgroupfs",
        # This host mounts the cgroup v1 hierarchy, which the kubelet refuses by default.
        "failCgroupV1": False,
        "failSwapOn": False,
        "clusterDNS": [NODE_IP],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(resolv),
        "registerWithTaints": [{"key": NODE_LABEL, "value": "true", "effect": "NoSchedule"}],
        # A test machine's disk is shared with everything else: evict only when it is really full.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
            "nodefs.inodesFree": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
    }
    path = STATE_DIR / "kubelet.yaml"
    path.write_text(json.dumps(config, indent=2) + "\n")
    root = RUN_DIR / "kubelet"
    root.mkdir(parents=True, exist_ok=True)
    start(
        "kubelet",
        [
            str(bins / "kubelet"),
            f"--config={path}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={root}",
            f"--hostname-override={NODE_NAME}",
            f"--node-ip={NODE_IP}",
            f"--node-labels={NODE_LABEL}=true",
            "--v=1",
        ],
    )
    wait_until("kubelet", lambda: http_ok(f"http://127.0.0.1:{KUBELET_HEALTHZ_PORT}/healthz"), process="kubelet")


def start_kube_proxy(bins: Path, kubeconfig: Path) -> None:
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": NODE_NAME,
        "bindAddress": NODE_IP,
        "clusterCIDR": POD_CIDR,
        "healthzBindAddress": f"127.0.0.1:{PROXY_HEALTHZ_PORT}",
        "metricsBindAddress": f"127.0.0.1:{PROXY_METRICS_PORT}",
        # NodePorts only on the bridge address; none on loopback, which would
        # need route_localnet.
        "nodePortAddresses": [f"{NODE_IP}/32"],
        "iptables": {"localhostNodePorts": False},
        # Leave the host's conntrack table size and timeouts as they are.
        "conntrack": {"maxPerCore": 0, "min": 0},
    }
    path = STATE_DIR / "kube-proxy.yaml"
    path.write_text(json.dumps(config, indent=2) + "\n")
    start("kube-proxy", [str(bins / "kube-proxy"), f"--config={path}"])
    wait_until("kube-proxy", lambda: http_ok(f"http://127.0.0.1:{PROXY_HEALTHZ_PORT}/healthz"), process="kube-proxy")


def coredns_rbac() -> dict:
    name = "mydb:coredns"
    return {
        "apiVersion": "v1",
        "kind": "List",
        "items": [
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRole",
                "metadata": {"name": name},
                "rules": [
                    {"apiGroups": [""], "resources": ["services", "pods", "namespaces"], "verbs": ["list", "watch"]},
                    {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
                ],
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": name},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": name}],
            },
        ],
    }


def up(bins: Path, kubectl, kubeconfig_for) -> None:
    """Start the real node on a running control plane.

    kubectl(*args, stdin=...) runs the admin kubectl; kubeconfig_for(name)
    writes a kubeconfig for PKI_DIR/name.{crt,key} and returns its path."""
    problems = host_problems()
    if problems:
        raise SystemExit(
            "this host cannot run the real node (MYDB_REAL_NODE=0 runs without it):\n- " + "\n- ".join(problems)
        )
    claim()
    make_node_pki()
    setup_network()
    start_registry(bins)
    images = push_images()
    start_containerd(write_containerd_config(images["PAUSE_IMAGE"], write_cni_config()))
    kubectl("apply", "-f", "-", stdin=json.dumps(coredns_rbac()))
    start_coredns(bins, kubeconfig_for("coredns"))
    start_kubelet(bins, kubeconfig_for("kubelet"))
    start_kube_proxy(bins, kubeconfig_for("kube-proxy"))
    kubectl("wait", "--for=condition=Ready", f"node/{NODE_NAME}", "--timeout=120s")
    log(f"real node {NODE_NAME} is Ready (pods need the toleration {NODE_LABEL}=true:NoSchedule)")


# -------------------------------------------------------------------- down


def our_processes(shims: bool = True) -> list[int]:
    """Containers of the node and (with SHIMS) their shims: found by cgroup and by containerd address, not by pid
    file."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        try:
            cgroups = (proc / "cgroup").read_text()
            args = (proc / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        shim = bool(args) and args[0].endswith(b"containerd-shim-runc-v2") and str(CONTAINERD_SOCKET).encode() in args
        if (shims and shim) or "/kubepods" in cgroups:
            found.append(int(proc.name))
    return found


def terminate_containers(grace: float) -> None:
    """Ask every container process to end (SIGTERM: PostgreSQL's postmaster then shuts down cleanly once its
    backends, which get it too, are gone), and wait up to GRACE seconds for them. The shims stay until the
    containers are gone: they carry the containers' output to the logs, and a shim that ends takes its
    container with it."""
    for pid in our_processes(shims=False):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while our_processes(shims=False) and time.monotonic() < deadline:
        time.sleep(0.2)


def kill_containers() -> None:
    for _ in range(50):
        pids = our_processes()
        if not pids:
            return
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    raise SystemExit(f"container processes survive SIGKILL: {our_processes()}")


def our_mounts() -> list[str]:
    """Mount points of the node (container rootfs, kubelet volumes, netns), deepest first."""
    roots = (str(RUN_DIR), str(STATE_DIR))
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].encode().decode("unicode_escape")
        if point.startswith(roots):
            points.append(point)
    return sorted(set(points), key=lambda p: p.count("/"), reverse=True)


def unmount_all() -> None:
    for point in our_mounts():
        if run("umount", point, check=False).returncode != 0:
            run("umount", "-l", point, check=False)


def our_links() -> list[str]:
    """The bridge and every link enslaved to it (the pods' veth ends)."""
    out = run("ip", "-j", "link", "show", check=False).stdout or "[]"
    return [link["ifname"] for link in json.loads(out) if link["ifname"] == BRIDGE or link.get("master") == BRIDGE]


def remove_links() -> None:
    for link in sorted(our_links(), key=lambda name: name == BRIDGE):  # the bridge last
        run("ip", "link", "delete", link, check=False)


OUR_CHAIN = re.compile(r"^:((KUBE|MYDB)-[A-Z0-9-]+) ", re.M)


def our_chains() -> dict[str, list[str]]:
    """table -> the KUBE-* (kube-proxy, kubelet) and MYDB-* chains in it."""
    chains: dict[str, list[str]] = {}
    if not shutil.which("iptables-save"):  # not installed yet (make node-packages): no chain of ours either
        return chains
    for table in ("filter", "nat", "mangle", "raw"):
        dump = run("iptables-save", "-t", table, check=False).stdout
        found = OUR_CHAIN.findall(dump)
        if found:
            chains[table] = [name for name, _ in found]
    return chains


def remove_chains() -> None:
    for table, chains in our_chains().items():
        dump = run("iptables-save", "-t", table).stdout
        # Rules in built-in chains that jump to ours go first, then ours.
        for line in dump.splitlines():
            match = re.match(r"^-A (\S+) (.*-j (?:KUBE|MYDB)-\S+.*)$", line)
            if match and match.group(1) not in chains:
                run("iptables", "-t", table, "-D", match.group(1), *shlex.split(match.group(2)), check=False)
        for chain in chains:
            run("iptables", "-t", table, "-F", chain, check=False)
        for chain in chains:
            run("iptables", "-t", table, "-X", chain, check=False)


def route_present() -> bool:
    return SAFE_RANGE in run("ip", "route", "show", "type", "unreachable", check=False).stdout


def remove_cgroups() -> None:
    """The kubelet's kubepods hierarchy in every controller, deepest first (a cgroup goes once empty)."""
    folders = [p for top in Path("/sys/fs/cgroup").glob("*/kubepods*") for p in [top, *top.rglob("*")] if p.is_dir()]
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        with contextlib.suppress(OSError):
            folder.rmdir()


def cni_namespaces() -> list[str]:
    """Pod network namespaces that containerd left in /run/netns (where netns_mounts_under_state_dir is unknown)."""
    folder = Path("/run/netns")
    return sorted(p.name for p in folder.glob("cni-*")) if folder.is_dir() else []


def down(grace: float = 0) -> None:
    """Remove everything `up` made on this host; safe to run on a half-started or half-dead node.
    GRACE: seconds the containers get to end on SIGTERM before they are killed (a pause keeps their data)."""
    stop("kubelet")
    if grace:
        terminate_containers(grace)
    kill_containers()
    for name in ("kube-proxy", "coredns", "containerd", "registry"):
        stop(name)
    unmount_all()
    for namespace in cni_namespaces():
        run("ip", "netns", "delete", namespace, check=False)
    remove_links()
    remove_chains()
    if route_present():
        run("ip", "route", "del", "unreachable", SAFE_RANGE, check=False)
    saved = STATE_DIR / "sysctl.json"
    if saved.exists():
        for name, value in json.loads(saved.read_text()).items():
            sysctl_path(name).write_text(value)
    remove_cgroups()
    shutil.rmtree(RUN_DIR, ignore_errors=True)
    release()


def leftovers() -> list[str]:
    """Everything of the node still on this host: empty after `down`."""
    found = [f"process {name} (pid {running_pid(name)})" for name in COMPONENTS if running_pid(name)]
    found += [f"container process {pid}" for pid in our_processes()]
    found += [f"mount {point}" for point in our_mounts()]
    found += [f"network namespace {name}" for name in cni_namespaces()]
    found += [f"link {link}" for link in our_links()]
    found += [f"iptables {table} chain {chain}" for table, chains in our_chains().items() for chain in chains]
    if route_present():
        found.append(f"route unreachable {SAFE_RANGE}")
    if RUN_DIR.exists():
        found.append(f"folder {RUN_DIR}")
    if owner():
        found.append(f"file {OWNER_FILE}")
    return found
