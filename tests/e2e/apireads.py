"""`kubectl get ARGS -o json` read straight from the API server, over one kept connection per process.

The tests wait on the cluster by polling it every half second, and a kubectl process costs about 0.1 s
of CPU each time (its start, its cached discovery, its TLS handshake): on 2 cores with three workers
polling, that was CPU the cluster under test needed. The same read from here costs a few milliseconds.
Only plain reads are taken (a kind, a name, -n, -l, --field-selector, -A); anything else is kubectl's."""

from __future__ import annotations

import functools
import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubernetes import config

ALL_NAMESPACES = object()


@dataclass(frozen=True)
class Resource:
    base: str  # "/api/v1" or "/apis/GROUP/VERSION"
    plural: str
    kind: str
    api_version: str
    namespaced: bool

    def path(self, namespace: object, name: str | None) -> str:
        within = f"/namespaces/{namespace}" if self.namespaced and isinstance(namespace, str) else ""
        return f"{self.base}{within}/{self.plural}" + (f"/{name}" if name else "")


@dataclass(frozen=True)
class GetArgs:
    kind: str
    name: str | None
    namespace: object  # a name, ALL_NAMESPACES, or None (the kubeconfig's: "default")
    query: tuple[tuple[str, str], ...]


FLAGS = {"-n": "namespace", "--namespace": "namespace", "-l": "labelSelector", "--selector": "labelSelector",
         "--field-selector": "fieldSelector"}


def split_args(args: tuple[str, ...], valued: dict[str, str],
               switches: dict[str, tuple[str, object]] | None = None) -> tuple[list[str], dict[str, Any]] | None:
    """kubectl ARGS as words and flags: a flag of VALUED (`-n NS`, `--type=merge`) gives its value under its
    name, a switch of SWITCHES (`-A`) its (name, value); None when ARGS hold any other flag."""
    words: list[str] = []
    values: dict[str, Any] = {}
    rest = list(args)
    while rest:
        word = rest.pop(0)
        flag, equals, value = word.partition("=")
        if switches and word in switches:
            name, meant = switches[word]
            values[name] = meant
        elif flag in valued and (equals or rest):
            values[valued[flag]] = value if equals else rest.pop(0)
        elif word.startswith("-"):
            return None
        else:
            words.append(word)
    return words, values


def parse_get(args: tuple[str, ...]) -> GetArgs | None:
    """The read `kubectl get ARGS` makes, or None when ARGS say more than a plain read."""
    if not args or args[0] != "get":
        return None
    split = split_args(args[1:], FLAGS, {flag: ("namespace", ALL_NAMESPACES) for flag in ("-A", "--all-namespaces")})
    if split is None:
        return None
    words, values = split
    if len(words) == 1 and "/" in words[0]:
        words = words[0].split("/", 1)
    if not 1 <= len(words) <= 2 or "," in words[0]:
        return None
    query = tuple((key, str(values[key])) for key in ("labelSelector", "fieldSelector") if key in values)
    return GetArgs(words[0].lower(), words[1] if len(words) == 2 else None, values.get("namespace"), query)


class ApiReads:
    def __init__(self, kubeconfig: Path) -> None:
        self._api = config.new_client_from_config(config_file=str(kubeconfig))
        self._resources: dict[str, Resource] = {}
        self._lock = threading.Lock()

    def get(self, args: tuple[str, ...]) -> dict[str, Any] | None:
        """What `kubectl get ARGS -o json` prints ({} for a missing object), or None to leave it to kubectl."""
        wanted = parse_get(args)
        resource = wanted and self.resource(wanted.kind)
        if wanted is None or resource is None or (wanted.name and wanted.namespace is ALL_NAMESPACES):
            return None
        namespace = "default" if wanted.namespace is None else wanted.namespace
        status, body = self._request(resource.path(namespace, wanted.name), wanted.query)
        if status == 404:
            return {}
        if status != 200:
            raise AssertionError(f"kubectl {' '.join(args)}: {status}: {body[:500]!r}")
        found: dict[str, Any] = json.loads(body)
        for item in found.get("items") or []:  # a list's items carry their kind, as kubectl prints them
            item.setdefault("apiVersion", resource.api_version)
            item.setdefault("kind", resource.kind)
        for printed in [found, *(found.get("items") or [])]:  # kubectl leaves out who wrote which field
            (printed.get("metadata") or {}).pop("managedFields", None)
        return found

    def resource(self, name: str) -> Resource | None:
        """The kind kubectl means by NAME (plural, singular, short name, kind or plural.group)."""
        return self._resource(name) or self._resource(name, rediscover=True)

    def _resource(self, name: str, rediscover: bool = False) -> Resource | None:
        with self._lock:
            if rediscover or not self._resources:
                self._resources = self._discover()
            return self._resources.get(name)

    def _discover(self) -> dict[str, Resource]:
        """Every name kubectl accepts for a kind (plural, singular, short names, kind, plural.group), the core
        group's first and then the groups in the server's order, as kubectl resolves them."""
        bases = [("/api/v1", "v1")]
        for group in self._read("/apis")["groups"]:
            version = group["preferredVersion"]["groupVersion"]
            bases.append((f"/apis/{version}", version))
        found: dict[str, Resource] = {}
        for base, api_version in bases:
            for listed in self._read(base)["resources"]:
                if "/" in listed["name"] or "get" not in listed.get("verbs", []):
                    continue
                resource = Resource(base, listed["name"], listed["kind"], api_version, listed["namespaced"])
                group = api_version.rpartition("/")[0]
                names = [listed["name"], listed.get("singularName") or "", listed["kind"].lower(),
                         *listed.get("shortNames", []), f"{listed['name']}.{group}" if group else ""]
                for name in filter(None, names):
                    found.setdefault(name.lower(), resource)
        return found

    def _read(self, path: str) -> dict[str, Any]:
        status, body = self._request(path, ())
        assert status == 200, f"GET {path}: {status}: {body[:500]!r}"
        read: dict[str, Any] = json.loads(body)
        return read

    def _request(self, path: str, query: tuple[tuple[str, str], ...]) -> tuple[int, bytes]:
        response = self.send("GET", path, query)
        return response.status, response.read()

    def send(self, method: str, path: str, query: tuple[tuple[str, str], ...] = (), body: object = None,
             content_type: str | None = None, timeout: float = 60) -> Any:
        """One request; the response unread (its status, read(), and the urllib3 response to stream lines from)."""
        headers = {"Accept": "application/json", **({"Content-Type": content_type} if content_type else {})}
        method, url, headers, body, _ = self._api.param_serialize(
            method, path, query_params=list(query), header_params=headers, body=body, auth_settings=["BearerToken"])
        return self._api.call_api(method, url, header_params=headers, body=body, _request_timeout=timeout)


@functools.lru_cache(maxsize=4)
def _reads(kubeconfig: str, written: float) -> ApiReads:
    return ApiReads(Path(kubeconfig))


def reads_for(kubeconfig: Path) -> ApiReads:
    """One reader per kubeconfig as it is now: a cluster brought up again writes new credentials."""
    return _reads(str(kubeconfig), kubeconfig.stat().st_mtime)
