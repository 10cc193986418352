"""The real nodes' Kubernetes side: their certificates, each node's kubelet and kube-proxy (in its network
namespace), and CoreDNS, the only DNS server their pods have (on the host).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness import PKI_DIR, POD_CIDR, PORT_BASE, STATE_DIR, http_ok, make_cert, start, user_cluster_role, wait_until
from node_layout import HOST_IP, NODE_LABEL, RealNode

CLUSTER_DOMAIN = "cluster.local"
KUBELET_PORT = PORT_BASE + 50
KUBELET_HEALTHZ_PORT = PORT_BASE + 51
PROXY_HEALTHZ_PORT = PORT_BASE + 52
PROXY_METRICS_PORT = PORT_BASE + 53
COREDNS_READY_PORT = PORT_BASE + 54
COREDNS_HEALTH_PORT = PORT_BASE + 55


# ---------------------------------------------------------------- CoreDNS

REVERSE_ZONES = "18.198.in-addr.arpa 19.198.in-addr.arpa"


def start_coredns(bins: Path, kubeconfig: Path) -> None:
    corefile = STATE_DIR / "Corefile"
    # One server block for the cluster's zones and nothing else: a query for
    # any other name matches no zone and is REFUSED.
    corefile.write_text(f"""{CLUSTER_DOMAIN} {REVERSE_ZONES} {{
    bind {HOST_IP}
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


def coredns_rbac() -> dict[str, Any]:
    return user_cluster_role(
        "mydb:coredns",
        [
            {"apiGroups": [""], "resources": ["services", "pods", "namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ],
    )


# ------------------------------------------------------ kubelet, kube-proxy


def make_node_pki(nodes: list[RealNode]) -> None:
    for node in nodes:
        make_cert(node.component("kubelet"), f"/O=system:nodes/CN=system:node:{node.name}")
        make_cert(node.component("kubelet-serving"), f"/CN={node.name}", server_sans=f"IP:{node.ip},DNS:{node.name}")
    make_cert("kube-proxy", "/CN=system:kube-proxy")
    make_cert("coredns", "/CN=mydb:coredns")


def kubelet_config(node: RealNode) -> dict[str, Any]:
    serving = PKI_DIR / node.component("kubelet-serving")
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": node.ip,
        "port": KUBELET_PORT,
        "readOnlyPort": 0,
        # On the node's address: the host, which waits for it, cannot reach the namespace's loopback.
        "healthzBindAddress": node.ip,
        "healthzPort": KUBELET_HEALTHZ_PORT,
        # How often volume usage is measured (default 1m): storageAutoGrow's e2e fills a volume in seconds.
        "volumeStatsAggPeriod": "10s",
        # How often each pod is synced (default 1m), which is also when a changed Secret reaches its files: a
        # renewed certificate reaches the servers within seconds, not a minute (the TLS rotation e2e waits on it).
        "syncFrequency": "10s",
        "tlsCertFile": f"{serving}.crt",
        "tlsPrivateKeyFile": f"{serving}.key",
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(PKI_DIR / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "containerRuntimeEndpoint": f"unix://{node.containerd_socket}",
        "cgroupDriver": "cgroupfs",
        # Each kubelet under a cgroup of its own: one removes the pod cgroups it does not know.
        "cgroupRoot": node.cgroup_root,
        # This host mounts the cgroup v1 hierarchy, which the kubelet refuses by default.
        "failCgroupV1": False,
        "failSwapOn": False,
        "podLogsDir": str(node.pod_logs),
        "clusterDNS": [HOST_IP],
        "clusterDomain": CLUSTER_DOMAIN,
        "resolvConf": str(STATE_DIR / "resolv.conf"),
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


def start_kubelet(node: RealNode, bins: Path, kubeconfig: Path) -> None:
    (STATE_DIR / "resolv.conf").write_text("# no upstream: pods resolve through CoreDNS only\n")
    path = node.state_dir / "kubelet.yaml"
    path.write_text(json.dumps(kubelet_config(node), indent=2) + "\n")
    root = node.run_dir / "kubelet"
    root.mkdir(parents=True, exist_ok=True)
    name = node.component("kubelet")
    start(
        name,
        node.in_netns(
            str(bins / "kubelet"),
            f"--config={path}",
            f"--kubeconfig={kubeconfig}",
            f"--root-dir={root}",
            f"--hostname-override={node.name}",
            f"--node-ip={node.ip}",
            f"--node-labels={NODE_LABEL}=true",
            "--v=1",
        ),
    )
    wait_until(name, lambda: http_ok(f"http://{node.ip}:{KUBELET_HEALTHZ_PORT}/healthz"), process=name)


def start_kube_proxy(node: RealNode, bins: Path, kubeconfig: Path) -> None:
    config = {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "iptables",
        "clientConnection": {"kubeconfig": str(kubeconfig)},
        "hostnameOverride": node.name,
        "bindAddress": node.ip,
        "clusterCIDR": POD_CIDR,
        "healthzBindAddress": f"{node.ip}:{PROXY_HEALTHZ_PORT}",
        "metricsBindAddress": f"{node.ip}:{PROXY_METRICS_PORT}",
        # NodePorts only on the node's address; none on loopback, which would need route_localnet.
        "nodePortAddresses": [f"{node.ip}/32"],
        "iptables": {"localhostNodePorts": False},
        # Leave the conntrack table size and timeouts as they are.
        "conntrack": {"maxPerCore": 0, "min": 0},
    }
    path = node.state_dir / "kube-proxy.yaml"
    path.write_text(json.dumps(config, indent=2) + "\n")
    name = node.component("kube-proxy")
    start(name, node.in_netns(str(bins / "kube-proxy"), f"--config={path}"))
    wait_until(name, lambda: http_ok(f"http://{node.ip}:{PROXY_HEALTHZ_PORT}/healthz"), process=name)
