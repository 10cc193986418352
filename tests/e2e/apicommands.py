"""The kubectl commands the e2e tests run most, made straight to the API server from the test's own process.

A kubectl run costs about 0.08 s of CPU (its start, its cached discovery, a TLS handshake; an apply reads
the server's OpenAPI document too) and the API server 6-14 ms more: some 700 runs a pass, on 2 cores that
the cluster under test needs. Taken here, only where the outcome is the one kubectl gives:
- `apply -n NS -f -` of one object that does not exist yet: created as kubectl creates it (its
  last-applied annotation, its field manager, strict field validation), so that a later `kubectl apply`
  patches it exactly as if kubectl had made it;
- `patch [-n NS] KIND/NAME (or KIND NAME) --type=merge|json -p PATCH [--subresource=status]`;
- `logs -n NS POD [-c CONTAINER]`;
- `wait --for=condition=C` on one object (wait_for_condition), by one watch as kubectl waits.
Whatever the API server refuses (an object that exists, an invalid one, a patch that does not apply) goes
to kubectl after all, so a test sees kubectl's own message and exit code."""

from __future__ import annotations

import json
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .apireads import ApiReads, Resource, reads_for, split_args

LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
VALUED = {"-n": "namespace", "--namespace": "namespace", "-f": "filename", "--filename": "filename",
          "--type": "type", "-p": "patch", "--patch": "patch", "-c": "container", "--container": "container",
          "--subresource": "subresource"}
PATCH_TYPES = {"merge": "application/merge-patch+json", "json": "application/json-patch+json"}


@dataclass(frozen=True)
class Command:
    words: tuple[str, ...]  # the verb, then what it acts on
    flags: dict[str, str] = field(default_factory=dict)


def parse(args: tuple[str, ...]) -> Command | None:
    """ARGS as words and valued flags, or None when a flag is one this module does not take."""
    split = split_args(args, VALUED)
    return Command(tuple(split[0]), split[1]) if split and split[0] else None


def run(kubeconfig: Path, args: tuple[str, ...], stdin: str | None) -> subprocess.CompletedProcess | None:
    """What kubectl ARGS would give, made in-process; None to leave the command to kubectl."""
    command = parse(args)
    if command is None:
        return None
    verb, *what = command.words
    api = reads_for(kubeconfig)
    if verb == "apply" and not what and command.flags.keys() == {"namespace", "filename"} \
            and command.flags["filename"] == "-" and stdin is not None:
        return _create(api, args, command.flags["namespace"], stdin)
    if verb == "patch" and command.flags.get("type") in PATCH_TYPES and "patch" in command.flags \
            and command.flags.keys() <= {"namespace", "type", "patch", "subresource"} \
            and command.flags.get("subresource", "status") == "status":
        target = what[0].split("/", 1) if len(what) == 1 else what
        return _patch(api, args, command, *target) if len(target) == 2 else None
    if verb == "logs" and len(what) == 1 and "/" not in what[0] and "namespace" in command.flags \
            and command.flags.keys() <= {"namespace", "container"}:
        return _logs(api, args, command.flags["namespace"], what[0], command.flags.get("container"))
    return None


def printed_name(resource: Resource, name: str) -> str:
    """How kubectl names an object in what it prints: `pod/x`, `mydatabase.myapp.example.com/x`."""
    group = resource.api_version.rpartition("/")[0]
    return f"{resource.kind.lower()}{'.' + group if group else ''}/{name}"


def last_applied(manifest: dict[str, Any]) -> str:
    """The annotation kubectl apply records: the manifest as given, its namespace set and an annotations map
    (without this annotation), as compact JSON with sorted keys."""
    recorded = json.loads(json.dumps(manifest))
    annotations = recorded["metadata"].setdefault("annotations", {})
    annotations.pop(LAST_APPLIED, None)
    return json.dumps(recorded, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def _create(api: ApiReads, args: tuple[str, ...], namespace: str, stdin: str) -> subprocess.CompletedProcess | None:
    try:
        manifest = yaml.safe_load(stdin)
    except yaml.YAMLError:  # more than one document, say: kubectl's
        return None
    if not isinstance(manifest, dict) or not isinstance(manifest.get("metadata"), dict) \
            or not manifest["metadata"].get("name") or manifest["metadata"].get("namespace", namespace) != namespace:
        return None
    resource = api.resource(str(manifest.get("kind", "")).lower())
    if resource is None or not resource.namespaced or resource.api_version != manifest.get("apiVersion"):
        return None
    manifest = {**manifest, "metadata": {**manifest["metadata"], "namespace": namespace}}
    body = json.loads(json.dumps(manifest))
    body["metadata"]["annotations"] = {**(manifest["metadata"].get("annotations") or {}),
                                       LAST_APPLIED: last_applied(manifest)}
    response = api.send("POST", resource.path(namespace, None), (
        ("fieldManager", "kubectl-client-side-apply"), ("fieldValidation", "Strict")), body=body)
    response.read()
    if response.status != 201:
        return None  # it exists (kubectl patches it), or kubectl says why the API server refused it
    return subprocess.CompletedProcess(args, 0, f"{printed_name(resource, manifest['metadata']['name'])} created\n", "")


def _patch(api: ApiReads, args: tuple[str, ...], command: Command, kind: str,
           name: str) -> subprocess.CompletedProcess | None:
    resource = api.resource(kind.lower())
    namespace = command.flags.get("namespace")
    if resource is None or (resource.namespaced and not namespace):
        return None
    try:
        patch = json.loads(command.flags["patch"])
    except ValueError:  # a YAML patch: kubectl's
        return None
    path = resource.path(namespace, name)
    before = api.send("GET", path)
    if before.status != 200:
        return None
    subresource = command.flags.get("subresource")
    response = api.send("PATCH", f"{path}/{subresource}" if subresource else path,
                        (("fieldManager", "kubectl-patch"),), body=patch,
                        content_type=PATCH_TYPES[command.flags["type"]])
    after = response.read()
    if response.status != 200:
        return None
    changed = json.loads(after) != json.loads(before.read())
    return subprocess.CompletedProcess(
        args, 0, f"{printed_name(resource, name)} patched{'' if changed else ' (no change)'}\n", "")


def _logs(api: ApiReads, args: tuple[str, ...], namespace: str, pod: str,
          container: str | None) -> subprocess.CompletedProcess | None:
    query = (("container", container),) if container else ()
    response = api.send("GET", f"/api/v1/namespaces/{namespace}/pods/{pod}/log", query)
    text = response.read()
    if response.status != 200:
        return None
    return subprocess.CompletedProcess(args, 0, text.decode(errors="replace"), "")


def condition_met(found: dict[str, Any], condition: str) -> bool:
    """kubectl wait --for=condition=C: the first condition of type C is True, and not older than the object's
    generation (the condition's observedGeneration, else the status's)."""
    status = found.get("status") or {}
    for entry in status.get("conditions") or []:
        if str(entry.get("type", "")).lower() != condition.lower():
            continue
        generation = (found.get("metadata") or {}).get("generation")
        observed = entry.get("observedGeneration", status.get("observedGeneration"))
        if generation is not None and observed is not None and observed < generation:
            return False
        return str(entry.get("status", "")).lower() == "true"
    return False


def wait_for_condition(kubeconfig: Path, kind: str, namespace: str, name: str, condition: str,
                       timeout: float) -> tuple[bool, str]:
    """`kubectl wait -n NAMESPACE --for=condition=CONDITION KIND/NAME`: (met, why not) within TIMEOUT, by
    reading the object once and then watching it from that version."""
    api = reads_for(kubeconfig)
    resource = api.resource(kind.lower())
    if resource is None:
        return False, f"no kind {kind}"
    deadline = time.monotonic() + timeout
    while True:
        response = api.send("GET", resource.path(namespace, name))
        body = response.read()
        if response.status != 200:
            return False, f"GET {name}: {response.status}: {body[:300]!r}"
        found = json.loads(body)
        if condition_met(found, condition):
            return True, ""
        left = deadline - time.monotonic()
        if left <= 0:
            return False, f"timed out after {timeout:.0f}s"
        if _watch_until(api, resource, namespace, name, found["metadata"]["resourceVersion"], condition, left):
            return True, ""


def _watch_until(api: ApiReads, resource: Resource, namespace: str, name: str, version: str, condition: str,
                 seconds: float) -> bool:
    """Watch NAME from VERSION for at most SECONDS: True once the condition holds; False when the watch ends
    (its time is up, or it broke off: the caller reads the object again)."""
    query = (("watch", "true"), ("fieldSelector", f"metadata.name={name}"), ("resourceVersion", version),
             ("allowWatchBookmarks", "false"), ("timeoutSeconds", str(max(1, int(seconds)))))
    response = api.send("GET", resource.path(namespace, None), query, timeout=seconds + 10)
    stream = response.response
    if response.status != 200:
        response.read()
        return False
    for line in stream:
        event = json.loads(line) if line.strip() else {}
        if event.get("type") in ("ADDED", "MODIFIED") and condition_met(event["object"], condition):
            stream.close()  # left mid-stream: the connection cannot serve another request
            return True
        if event.get("type") in ("DELETED", "ERROR"):
            stream.close()
            return False
    stream.release_conn()
    return False
