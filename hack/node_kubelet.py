"""The real node's Kubernetes side: its certificates, the kubelet, kube-proxy,
and CoreDNS, the only DNS server its pods have.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from harness import PKI_DIR, POD_CIDR, PORT_BASE, STATE_DIR, http_ok, make_cert, start, user_cluster_role, wait_until
from node_containers import CONTAINERD_SOCKET, RUN_DIR
from node_network import NODE_IP

NODE_NAME = "mydb-real-node"
NODE_LABEL = "node.mydb.local/real"  # label and taint key: only pods that ask land here
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


def coredns_rbac() -> dict[str, Any]:
    return user_cluster_role(
        "mydb:coredns",
        [
            {"apiGroups": [""], "resources": ["services", "pods", "namespaces"], "verbs": ["list", "watch"]},
            {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["list", "watch"]},
        ],
    )


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
        # How often volume usage is measured (default 1m): storageAutoGrow's e2e fills a volume in seconds.
        "volumeStatsAggPeriod": "10s",
        # How often each pod is synced (default 1m), which is also when a changed Secret reaches its files: a
        # renewed certificate reaches the servers within seconds, not a minute (the TLS rotation e2e waits on it).
        "syncFrequency": "10s",
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
