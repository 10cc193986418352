"""Prometheus text exposition: parse the few counters the benchmark reads, diff them, group them.

Pure functions (no I/O). The API server's /metrics is megabytes of histograms,
so lines are filtered by metric name before they are parsed.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable

Labels = tuple[tuple[str, str], ...]  # sorted (name, value) pairs: hashable
Samples = dict[tuple[str, Labels], float]

_LINE = re.compile(r"^([A-Za-z_:][A-Za-z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$")
_LABEL = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"')

WRITE_VERBS = frozenset({"POST", "PUT", "PATCH", "DELETE", "DELETECOLLECTION", "APPLY", "CREATE", "UPDATE"})


def parse(text: str, names: Iterable[str]) -> Samples:
    """The samples of the metrics named (exact sample names, e.g. apiserver_request_total)."""
    wanted = tuple(names)
    samples: Samples = {}
    for line in text.splitlines():
        if not line.startswith(wanted):
            continue
        match = _LINE.match(line)
        if not match or match.group(1) not in wanted:
            continue
        labels = tuple(
            sorted((k, v.replace('\\"', '"').replace("\\\\", "\\")) for k, v in _LABEL.findall(match.group(2) or ""))
        )
        samples[(match.group(1), labels)] = float(match.group(3))
    return samples


def diff(after: Samples, before: Samples) -> Samples:
    """Counter increase per series; a series new in `after` counts from zero. Zero deltas dropped."""
    out = {}
    for key, value in after.items():
        delta = value - before.get(key, 0.0)
        if delta:
            out[key] = delta
    return out


def total(samples: Samples, name: str, **match: str) -> float:
    """Sum of the series of `name` whose labels include every `match` pair."""
    return sum(
        v
        for (n, labels), v in samples.items()
        if n == name and all(dict(labels).get(k) == val for k, val in match.items())
    )


def by_label(samples: Samples, name: str, label: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for (n, labels), value in samples.items():
        if n == name:
            out[dict(labels).get(label, "")] += value
    return dict(out)


def resource_of(labels: dict[str, str]) -> str:
    """'pods', 'mydatabases/status', ...; '' for non-resource URLs (/healthz, /apis, ...)."""
    resource = labels.get("resource", "")
    if not resource:
        return ""
    sub = labels.get("subresource", "")
    return f"{resource}/{sub}" if sub else resource


def requests_by_verb_resource(samples: Samples) -> dict[str, dict[str, float]]:
    """apiserver_request_total grouped {verb: {resource: count}}; non-resource requests left out."""
    out: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for (name, labels), value in samples.items():
        if name != "apiserver_request_total":
            continue
        as_dict = dict(labels)
        resource = resource_of(as_dict)
        if resource:
            out[as_dict.get("verb", "")][resource] += value
    return {verb: dict(resources) for verb, resources in out.items()}


def split_reads_writes(by_verb: dict[str, dict[str, float]]) -> tuple[float, float]:
    """(reads, writes) from {VERB: {resource: n}}; verbs in any case."""
    reads = writes = 0.0
    for verb, resources in by_verb.items():
        count = sum(resources.values())
        if verb.upper() in WRITE_VERBS:
            writes += count
        else:
            reads += count
    return reads, writes
