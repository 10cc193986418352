#!/usr/bin/env python3
"""The real nodes' volumes: an XFS file per claim, loop-mounted, served as a `local` PersistentVolume.

A claim of the StorageClass `local-xfs` (hack/storage.yaml: WaitForFirstConsumer, expansion allowed) that
the scheduler placed on a real node (annotation volume.kubernetes.io/selected-node) gets, as a CSI
driver's provisioner and node plugin would give it:
- a sparse file VOLUME_DIR/pvc-<claim uid>.xfs of the claim's size (at least XFS's smallest, 300 MiB),
  formatted XFS and loop-mounted on VOLUME_DIR/pvc-<claim uid>, whose root is writable by the pods;
- a PersistentVolume pvc-<claim uid> whose `local.path` is that mount, with node affinity to the real node
  the claim was placed on (the files are on this machine's disk; the affinity makes them that node's
  local disk): the kubelet reports the usage of `local` volumes (summary API, kubelet_volume_stats_*),
  never of hostPath ones, and a full volume is really full.
A bound claim asking for more than its volume has is grown online, as an external resizer would: the file
grows, the loop device re-reads its size, `xfs_growfs` grows the mounted filesystem, then the PV's
capacity and the claim's status say so (the pods keep running). A Released PV of ours whose reclaim policy
is Delete is unmounted, its file removed, and the PV deleted.

    python3 hack/local_volumes.py --kubeconfig PATH --volume-dir DIR --node NAME [--node NAME ...]

The node mounts every existing volume before its kubelet starts (mount_existing) and `down` unmounts them
(node_containers.unmount_all: every mount under the state folder); a loop device mounted with `-o loop`
is freed by its unmount. kwok nodes keep the simulated volumes of hack/kwok/. The decisions are pure
functions, tested in tests/hack/test_local_volumes.py; the rest runs commands from xfsprogs and util-linux.
Only the standard library is used, as by hack/volume_agent.py, whose API access this shares.
"""

from __future__ import annotations

import argparse
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from types import FrameType
from typing import NoReturn

from volume_agent import (
    RETRY_SECONDS,
    ApiError,
    Gone,
    Json,
    Server,
    Stop,
    list_objects,
    log,
    server_from_kubeconfig,
    watch_objects,
)

PROVISIONER = "local-xfs.mydb.local"
SELECTED_NODE = "volume.kubernetes.io/selected-node"
STORAGE_PROVISIONER = "volume.kubernetes.io/storage-provisioner"
PROVISIONED_BY = "pv.kubernetes.io/provisioned-by"
# mkfs.xfs refuses a filesystem under 300 MiB: a smaller claim gets that much (a volume may exceed its claim).
SMALLEST_BYTES = 300 * 2**20
SMALLEST = "300Mi"
# The pods' users differ (PostgreSQL runs as 999): the filesystem's root is open to them, as hostPath folders are.
ROOT_MODE = 0o777
UNITS = {
    "": 1,
    "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15,
    "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50,
}  # fmt: skip
QUANTITY = re.compile(r"^([0-9]+(?:\.[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P|)$")
CLAIMS_PATH = "/api/v1/persistentvolumeclaims"
PVS_PATH = "/api/v1/persistentvolumes"


# ------------------------------------------------------------------ decisions


def quantity_bytes(text: str) -> int:
    """Bytes in a storage quantity such as 1Gi, 500M or 1.5Gi (rounded up)."""
    match = QUANTITY.match(text.strip())
    if not match:
        raise ValueError(f"not a storage quantity: {text!r}")
    number, unit = str(match.group(1)), str(match.group(2))
    whole, _, fraction = number.partition(".")
    scale = UNITS[unit]
    denominator: int = 10 ** len(fraction)
    return int(whole) * scale + -(-int(fraction or "0") * scale // denominator)


def volume_capacity(request: str) -> str:
    """The capacity of the volume a claim asking for `request` gets: that, or XFS's smallest."""
    return request if quantity_bytes(request) >= SMALLEST_BYTES else SMALLEST


def claim_request(claim: Json) -> str | None:
    return (((claim.get("spec") or {}).get("resources") or {}).get("requests") or {}).get("storage")


def volume_name(claim: Json) -> str:
    return f"pvc-{claim['metadata']['uid']}"


def wants_volume(claim: Json, nodes: frozenset[str]) -> bool:
    """A claim of ours, placed on one of NODES by the scheduler, with no volume yet."""
    metadata, spec = claim.get("metadata") or {}, claim.get("spec") or {}
    annotations = metadata.get("annotations") or {}
    return (
        annotations.get(STORAGE_PROVISIONER) == PROVISIONER
        and annotations.get(SELECTED_NODE) in nodes
        and not metadata.get("deletionTimestamp")
        and not spec.get("volumeName")
        and claim_request(claim) is not None
    )


def persistent_volume(claim: Json, node: str, volume_dir: str) -> Json:
    """The `local` PersistentVolume for a claim, pre-bound to it (the PV controller completes the binding)."""
    metadata, spec = claim["metadata"], claim["spec"]
    name = volume_name(claim)
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "annotations": {PROVISIONED_BY: PROVISIONER}},
        "spec": {
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "capacity": {"storage": volume_capacity(claim_request(claim) or SMALLEST)},
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": spec.get("storageClassName") or "",
            "volumeMode": "Filesystem",
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "name": metadata["name"],
                "namespace": metadata["namespace"],
                "uid": metadata["uid"],
            },
            "local": {"path": os.path.join(volume_dir, name), "fsType": "xfs"},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
                    ]
                }
            },
        },
    }


def ours(pv: Json, volume_dir: str) -> str | None:
    """The volume's name (pvc-<uid>) when this PV is one of ours under volume_dir, else None."""
    metadata, spec = pv.get("metadata") or {}, pv.get("spec") or {}
    if (metadata.get("annotations") or {}).get(PROVISIONED_BY) != PROVISIONER:
        return None
    path = (spec.get("local") or {}).get("path")
    if not isinstance(path, str) or os.path.dirname(os.path.normpath(path)) != os.path.normpath(volume_dir):
        return None
    name = os.path.basename(os.path.normpath(path))
    return name if name.startswith("pvc-") else None


def growth(claim: Json, pv: Json) -> str | None:
    """The capacity a bound claim's volume must grow to, when the claim asks for more than the PV has."""
    request = claim_request(claim)
    capacity = ((pv.get("spec") or {}).get("capacity") or {}).get("storage")
    if request is None or capacity is None or (claim.get("spec") or {}).get("volumeName") != pv["metadata"]["name"]:
        return None
    return request if quantity_bytes(request) > quantity_bytes(capacity) else None


def claim_status_behind(claim: Json, pv: Json) -> bool:
    """The claim's status still shows less than its bound volume has (a grow whose last step was lost)."""
    shown = ((claim.get("status") or {}).get("capacity") or {}).get("storage")
    capacity = ((pv.get("spec") or {}).get("capacity") or {}).get("storage")
    if not shown or not capacity or (claim.get("status") or {}).get("phase") != "Bound":
        return False
    return quantity_bytes(shown) < quantity_bytes(capacity)


def releasable(pv: Json) -> bool:
    spec, status = pv.get("spec") or {}, pv.get("status") or {}
    return spec.get("persistentVolumeReclaimPolicy") == "Delete" and status.get("phase") == "Released"


def orphans(files: Iterable[str], pvs: Iterable[Json], volume_dir: str) -> list[str]:
    """Volumes (names) with a file under volume_dir that no PV of ours names any more, sorted."""
    named = {ours(pv, volume_dir) for pv in pvs}
    return sorted(set(files) - named)


# ------------------------------------------------------------------ the volumes


def sh(*args: str) -> str:
    result = subprocess.run(args, text=True, capture_output=True)
    if result.returncode != 0:
        raise OSError(f"{' '.join(args)}: {(result.stderr or result.stdout).strip()}")
    return result.stdout


def image(volume_dir: str, name: str) -> Path:
    return Path(volume_dir) / f"{name}.xfs"


def volume_files(volume_dir: str) -> set[str]:
    return {path.name.removesuffix(".xfs") for path in Path(volume_dir).glob("pvc-*.xfs")}


def mounted(point: Path) -> bool:
    return os.path.ismount(point)


def mount(volume_dir: str, name: str) -> None:
    point = Path(volume_dir) / name
    point.mkdir(exist_ok=True)
    if not mounted(point):
        sh("mount", "-o", "loop", "-t", "xfs", str(image(volume_dir, name)), str(point))
        direct_io(image(volume_dir, name))


def direct_io(file: Path) -> None:
    """The loop device writes through to its file, as a disk would, rather than copying every block into the
    host's page cache a second time (docs/real-node.md#storage). A host whose filesystem refuses O_DIRECT keeps
    the copy: the volume works either way."""
    try:
        sh("losetup", "--direct-io=on", loop_device(file))
    except OSError as error:
        log(f"{file}: the loop device copies through the page cache ({error})")


def make_volume(volume_dir: str, name: str, size: int) -> None:
    """A formatted, mounted volume of `size` bytes; a file left by an interrupted run is formatted again."""
    file = image(volume_dir, name)
    if not file.exists():
        temp = file.with_suffix(".formatting")
        with open(temp, "wb") as handle:
            handle.truncate(size)  # sparse: the host's disk holds only what is written
        sh("mkfs.xfs", "-q", "-f", str(temp))
        temp.rename(file)
    mount(volume_dir, name)
    os.chmod(Path(volume_dir) / name, ROOT_MODE)
    log(f"made {file} ({size} bytes, XFS) mounted on {Path(volume_dir) / name}")


def loop_device(file: Path) -> str:
    """The loop device backing `file` (losetup -j prints `/dev/loopN: []: (file)`)."""
    found = sh("losetup", "-j", str(file)).split(":", 1)[0].strip()
    if not found:
        raise OSError(f"no loop device backs {file}")
    return found


def grow_volume(volume_dir: str, name: str, size: int) -> None:
    """Grow the file, then the loop device, then the mounted filesystem: online, as `xfs_growfs` allows."""
    file = image(volume_dir, name)
    if file.stat().st_size < size:
        os.truncate(file, size)
    sh("losetup", "-c", loop_device(file))
    sh("xfs_growfs", "-d", str(Path(volume_dir) / name))
    log(f"grew {file} to {size} bytes, and its filesystem online")


def remove_volume(volume_dir: str, name: str) -> None:
    point = Path(volume_dir) / name
    if not point.exists() and not image(volume_dir, name).exists():
        return
    if mounted(point):
        sh("umount", str(point))
    image(volume_dir, name).unlink(missing_ok=True)
    if point.is_dir():
        point.rmdir()
    log(f"removed volume {name}: unmounted, file deleted")


def mount_existing(volume_dir: str) -> None:
    """Mount every volume file (the node does this before its kubelet starts, so no pod sees an empty folder)."""
    Path(volume_dir).mkdir(parents=True, exist_ok=True)
    for name in sorted(volume_files(volume_dir)):
        try:
            mount(volume_dir, name)
        except OSError as error:
            log(f"could not mount {name}: {error}")


def our_loop_devices(root: str) -> list[str]:
    """Loop devices backed by a file under root: none once the node is down."""
    listing = json.loads(sh("losetup", "--json", "--list") or '{"loopdevices": []}')
    return sorted(d["name"] for d in listing.get("loopdevices") or [] if str(d.get("back-file") or "").startswith(root))


# ------------------------------------------------------------------ API writes


def send(server: Server, method: str, path: str, body: Json | None = None) -> int:
    """One write; returns the HTTP status (409 and 404 are for the caller to judge), raises on the others."""
    headers = server.headers()
    payload = None
    if body is not None:
        payload = json.dumps(body).encode()
        headers["Content-Type"] = "application/merge-patch+json" if method == "PATCH" else "application/json"
    connection = server.connect(timeout=30)
    try:
        connection.request(method, path, body=payload, headers=headers)
        response = connection.getresponse()
        text = response.read()
    finally:
        connection.close()
    if response.status >= 300 and response.status not in (404, 409):
        raise ApiError(f"{method} {path}: HTTP {response.status}: {text[:300]!r}")
    return response.status


# ------------------------------------------------------------------ the provisioner


class Provisioner:
    def __init__(self, server: Server, volume_dir: str, nodes: frozenset[str]) -> None:
        self.server, self.volume_dir, self.nodes = server, volume_dir, nodes
        self.claims: dict[str, Json] = {}  # uid -> claim
        self.pvs: dict[str, Json] = {}  # name -> PV
        self.listed: set[str] = set()  # the kinds listed at least once: orphans are judged only on both lists
        self.events: queue.Queue[tuple[str, str, Json | list[Json]]] = queue.Queue()

    def provision(self, claim: Json) -> None:
        pv = persistent_volume(claim, claim["metadata"]["annotations"][SELECTED_NODE], self.volume_dir)
        name = pv["metadata"]["name"]
        make_volume(self.volume_dir, name, quantity_bytes(pv["spec"]["capacity"]["storage"]))
        if send(self.server, "POST", PVS_PATH, pv) != 409:
            log(f"PersistentVolume {name} for claim {claim['metadata']['namespace']}/{claim['metadata']['name']}")
        self.pvs[name] = pv

    def grow(self, claim: Json, pv: Json, capacity: str) -> None:
        name = pv["metadata"]["name"]
        grow_volume(self.volume_dir, name, quantity_bytes(capacity))
        send(self.server, "PATCH", f"{PVS_PATH}/{name}", {"spec": {"capacity": {"storage": capacity}}})
        pv["spec"]["capacity"]["storage"] = capacity
        self.report_capacity(claim, capacity)

    def report_capacity(self, claim: Json, capacity: str) -> None:
        metadata = claim["metadata"]
        path = f"/api/v1/namespaces/{metadata['namespace']}/persistentvolumeclaims/{metadata['name']}/status"
        patch = {"capacity": {"storage": capacity}, "allocatedResources": {"storage": capacity}, "conditions": None}
        send(self.server, "PATCH", path, {"status": {**patch, "allocatedResourceStatuses": None}})
        log(f"claim {metadata['namespace']}/{metadata['name']} now has {capacity}")

    def release(self, pv: Json, name: str) -> None:
        remove_volume(self.volume_dir, name)
        send(self.server, "DELETE", f"{PVS_PATH}/{pv['metadata']['name']}")
        self.pvs.pop(pv["metadata"]["name"], None)

    def settle_claim(self, claim: Json) -> None:
        if wants_volume(claim, self.nodes) and volume_name(claim) not in self.pvs:
            self.provision(claim)
            return
        pv = self.pvs.get((claim.get("spec") or {}).get("volumeName") or "")
        if pv is None or ours(pv, self.volume_dir) is None:
            return
        capacity = growth(claim, pv)
        if capacity:
            self.grow(claim, pv, capacity)
        elif claim_status_behind(claim, pv):
            self.report_capacity(claim, pv["spec"]["capacity"]["storage"])

    def settle_pv(self, pv: Json) -> None:
        name = ours(pv, self.volume_dir)
        if name and releasable(pv):
            self.release(pv, name)

    def settle_all(self) -> None:
        for pv in list(self.pvs.values()):
            self.settle_pv(pv)
        for claim in list(self.claims.values()):
            self.settle_claim(claim)
        if self.listed != {"claim", "pv"}:
            return
        for name in orphans(volume_files(self.volume_dir), self.pvs.values(), self.volume_dir):
            remove_volume(self.volume_dir, name)

    def apply(self, kind: str, change: str, item: Json | list[Json]) -> None:
        """Record one list or watch event in the caches, then act on what it touched."""
        if change == "LIST":
            assert isinstance(item, list)
            keyed = {(o["metadata"]["uid"] if kind == "claim" else o["metadata"]["name"]): o for o in item}
            if kind == "claim":
                self.claims = keyed
            else:
                self.pvs = keyed
            self.listed.add(kind)
            self.settle_all()
            return
        assert isinstance(item, dict)
        key = item["metadata"]["uid"] if kind == "claim" else item["metadata"]["name"]
        cache = self.claims if kind == "claim" else self.pvs
        if change == "DELETED":
            cache.pop(key, None)
            return
        cache[key] = item
        if kind == "claim":
            self.settle_claim(item)
        else:
            self.settle_pv(item)
            claim_ref = (item.get("spec") or {}).get("claimRef") or {}
            claim = self.claims.get(claim_ref.get("uid") or "")
            if claim is not None:
                self.settle_claim(claim)  # a growth waits for the binding's PV to be seen

    def follow(self, kind: str, path: str) -> None:
        """List then watch one collection forever, handing every event to the main thread."""
        failures = 0
        while True:
            try:
                items, version = list_objects(self.server, path)
                self.events.put((kind, "LIST", items))
                while True:
                    for event in watch_objects(self.server, version, path):
                        if event.get("type") == "ERROR":
                            raise Gone(str(event.get("object")))
                        obj = event.get("object") or {}
                        version = (obj.get("metadata") or {}).get("resourceVersion") or version
                        if event.get("type") in ("ADDED", "MODIFIED", "DELETED"):
                            self.events.put((kind, event["type"], obj))
                        failures = 0
            except (Gone, OSError, ApiError, ValueError, KeyError) as error:
                delay = RETRY_SECONDS[min(failures, len(RETRY_SECONDS) - 1)]
                failures += 1
                log(f"{kind} watch: {type(error).__name__}: {error}; relisting in {delay}s")
                time.sleep(delay)

    def run(self) -> None:
        for kind, path in (("pv", PVS_PATH), ("claim", CLAIMS_PATH)):
            threading.Thread(target=self.follow, args=(kind, path), daemon=True).start()
        while True:
            kind, change, item = self.events.get()
            try:
                self.apply(kind, change, item)
            except (OSError, ApiError, ValueError, KeyError) as error:
                # Looked at again at the next event of that object, or the next relist.
                log(f"could not settle a {kind} ({change}): {type(error).__name__}: {error}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--volume-dir", required=True)
    parser.add_argument("--node", required=True, action="append", help="a node whose volumes this serves; repeated")
    args = parser.parse_args(argv)

    def stop(signum: int, _frame: FrameType | None) -> NoReturn:
        raise Stop(signal.Signals(signum).name)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    volume_dir = os.path.abspath(args.volume_dir)
    try:
        mount_existing(volume_dir)
        provisioner = Provisioner(server_from_kubeconfig(args.kubeconfig), volume_dir, frozenset(args.node))
        log(f"local volumes for the nodes {', '.join(args.node)}: XFS files under {volume_dir}")
        provisioner.run()
    except Stop as reason:
        log(f"stopping ({reason})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
