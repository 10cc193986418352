"""One database's PostgreSQL servers, as a pass talks to them: its login, their addresses, what they say."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .. import names
from ..instances.connection import FAILURES, Login, Server, failure_text
from ..instances.logins import login_from
from ..instances.probe import probe_all
from ..model.instances import InstanceFacts, Probe, Unreachable
from ..model.spec import DatabaseSpec
from ..policy.members import serving
from ..telemetry import metrics
from .runtime import Runtime

log = logging.getLogger(__name__)
Object = dict[str, Any]


class Servers:
    """The servers of one database's pods, asked as its superuser (the login read once from its Secret)."""

    def __init__(self, namespace: str, name: str, spec: DatabaseSpec | None, runtime: Runtime):
        self.namespace, self.name, self.runtime = namespace, name, runtime
        self.secret = (spec.existing_secret if spec else "") or names.credentials_secret_name(name)
        self.port = runtime.port

    async def login(self) -> Login | None:
        key = (self.namespace, self.secret)
        known = self.runtime.logins.get(key)
        if known is not None:
            return known
        secret = await self.runtime.api.read_secret(self.namespace, self.secret)
        found = login_from(secret) if secret else None
        if found is not None:
            self.runtime.logins.remember(key, found)
        return found

    def server(self, pods: list[Object], pod: str) -> Server | None:
        found = next((p for p in pods if p["metadata"]["name"] == pod), None)
        address = ((found or {}).get("status") or {}).get("podIP")
        return Server(pod, address, self.port) if address else None

    async def ask(self, pods: list[Object]) -> dict[str, Probe]:
        """Each ready pod's server, all at once. One that is not ready is not asked: a hung server would
        hold the pass for the whole connect timeout, and nothing is decided on an unready pod's answer."""
        asked = [p["metadata"]["name"] for p in pods if serving(p)]
        servers = [s for s in (self.server(pods, name) for name in asked) if s is not None]
        if not servers:
            return {}
        login = await self.login()
        if login is None:
            return {s.pod: Unreachable(s.pod, f"no superuser login in Secret {self.secret}") for s in servers}
        probes = await probe_all(servers, login)
        for probe in probes.values():
            metrics.INSTANCE_PROBES.labels("answered" if isinstance(probe, InstanceFacts) else "unreachable").inc()
            if isinstance(probe, Unreachable) and "password authentication failed" in probe.error:
                self.runtime.logins.forget((self.namespace, self.secret))  # the Secret changed: read it again
        return probes

    async def command(
        self, pods: list[Object], pod: str, what: str, run: Callable[..., Awaitable[Any]], *args: Any
    ) -> bool:
        """RUN against POD's server; False (and one log line) when it could not, or did not in time."""
        server, login = self.server(pods, pod), await self.login()
        if server is None or login is None:
            log.warning("%s/%s: cannot %s (%s): no address or no login", self.namespace, self.name, what, pod)
            return False
        try:
            result = await run(server, login, *args)
        except FAILURES as error:
            log.warning("%s/%s: cannot %s (%s): %s", self.namespace, self.name, what, pod, failure_text(error))
            return False
        if result is False:
            log.warning("%s/%s: could not %s (%s) in time; trying again", self.namespace, self.name, what, pod)
        return result is not False
