"""The application's role, database and Secret (spec.application): made and kept on the primary by the operator.

A pass whose primary answered reads the Secret (one GET: the user may have changed the password), writes the
keys that follow from it when they differ, and runs SQL on the primary only when something changed since the
last time it did (status.application.appliedFrom: the Secret's version, the primary's timeline and the names;
no secret material). A failover re-checks on the new primary; the roles replicate with everything else, so
that finds nothing to do. Nothing is ever dropped: a role or database the spec no longer names stays."""

from __future__ import annotations

import hashlib
import logging
from dataclasses import dataclass, field
from typing import Any

from .. import names
from ..desired.application import application_changes, application_keys, application_secret
from ..desired.credentials import new_password
from ..instances import commands
from ..instances.connection import FAILURES, failure_text
from ..model.instances import InstanceFacts
from ..model.record import PrimaryRecord, recorded_primary
from ..model.secrets import name_taken_message, secret_files, taken
from ..model.spec import DatabaseSpec
from ..status.warnings import Event
from .runtime import Runtime
from .servers import Servers

log = logging.getLogger(__name__)


@dataclass
class ApplicationState:
    status: dict[str, Any]
    events: list[Event] = field(default_factory=list)


def _fingerprint(*parts: object) -> str:
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()[:16]


def _trouble(known: dict[str, Any], status: dict[str, Any], reason: str, message: str) -> ApplicationState:
    """Not ready, and why; one Warning while the same message stands."""
    events: list[Event] = [] if known.get("message") == message else [("Warning", reason, message)]
    return ApplicationState({**status, "ready": False, "message": message}, events)


async def keep_application(
    namespace: str,
    name: str,
    spec: DatabaseSpec | None,
    previous: dict[str, Any],
    record: PrimaryRecord | None,
    probes: dict[str, Any],
    pods: list[dict[str, Any]],
    runtime: Runtime,
) -> ApplicationState:
    known = dict(previous.get("application") or {})
    primary = recorded_primary(name, record)
    facts = probes.get(primary)
    if spec is None or spec.hibernate or not isinstance(facts, InstanceFacts) or facts.in_recovery:
        return ApplicationState(known)  # looked at once the primary answers
    servers = Servers(namespace, name, spec, runtime)
    login, server = await servers.login(), servers.server(pods, primary)
    if login is None or server is None:
        return ApplicationState(known)
    wanted, secret_name = spec.application, names.application_secret_name(name)
    status: dict[str, Any] = {"owner": wanted.owner, "database": wanted.database, "secretName": secret_name}
    found = await runtime.api.read_secret(namespace, secret_name)
    if taken({secret_name: found}, name):
        return _trouble(known, status, "SecretNameTaken", name_taken_message(namespace, [secret_name]))
    events: list[Event] = []
    password = secret_files(found).get("password", b"").decode(errors="replace") or new_password()
    hosts = (
        names.service_host(namespace, names.read_write_service(name)),
        names.service_host(namespace, names.read_only_service(name)),
    )
    keys = application_keys(wanted.owner, password, wanted.database, hosts, runtime.port, login.ca if spec.tls else b"")
    if found is None:
        await runtime.api.write_secret(application_secret(namespace, name, keys), replacing=None)
        events.append(("Normal", "ApplicationSecretCreated", f"Secret {secret_name}: the login of role {wanted.owner}"))
        version = "created"
    else:
        changes = application_changes(secret_files(found), keys)
        if changes:
            await runtime.api.update_secret_data(found, changes)
        version = found["metadata"].get("resourceVersion", "")
    applied = _fingerprint(version, facts.timeline, wanted.owner, wanted.database)
    if known.get("appliedFrom") == applied and known.get("ready"):
        return ApplicationState({**status, "ready": True, "appliedFrom": applied}, events)
    try:
        done = await commands.keep_owner(server, login, wanted.owner, wanted.database, password)
    except FAILURES as error:
        why = f"role {wanted.owner} and database {wanted.database} not kept on {primary}: {failure_text(error)}"
        trouble = _trouble(known, status, "ApplicationNotKept", why)
        trouble.events = events + trouble.events
        return trouble
    for what in done:
        log.info("%s/%s: %s on %s", namespace, name, what, primary)
        events.append(("Normal", "ApplicationKept", f"{what} on {primary}"))
    return ApplicationState({**status, "ready": True, "appliedFrom": applied}, events)
