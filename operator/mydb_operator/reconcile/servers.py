"""One database's PostgreSQL servers, as a pass talks to them: its login, their addresses, what they say."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from .. import names
from ..desired.values import tls_secret_name
from ..instances import probe as instance_probe
from ..instances.connection import FAILURES, Login, Server, failure_text
from ..instances.logins import login_from
from ..model.instances import InstanceFacts, Probe, Unreachable
from ..model.pods import serves_tls
from ..model.secrets import secret_files
from ..model.spec import DatabaseSpec
from ..policy.members import serving
from ..telemetry import metrics
from .runtime import Runtime

log = logging.getLogger(__name__)
# What a server says when the Secrets the login came from changed: the password, or the CA.
CHANGED_SECRET = ("password authentication failed", "certificate verify failed")
Object = dict[str, Any]


class Servers:
    """The servers of one database's pods, asked as its superuser (the login read once from its Secret)."""

    def __init__(self, namespace: str, name: str, spec: DatabaseSpec | None, runtime: Runtime):
        self.namespace, self.name, self.runtime = namespace, name, runtime
        self.secret = (spec.existing_secret if spec else "") or names.credentials_secret_name(name)
        self.tls_secret = tls_secret_name(name, spec) if spec is not None and spec.tls else ""
        self.port = runtime.port

    async def login(self) -> Login | None:
        """The superuser's login, and the CA its servers' certificate is verified with while TLS is on."""
        key = (self.namespace, self.secret)
        known = self.runtime.logins.get(key)
        if known is not None and (known.ca or not self.tls_secret):  # TLS turned on since: read the CA
            return known
        secret = await self.runtime.api.read_secret(self.namespace, self.secret)
        found = login_from(secret) if secret else None
        if found is not None and self.tls_secret:
            found = dataclasses.replace(found, ca=await self.trusted())
        if found is not None:
            self.runtime.logins.remember(key, found)
        return found

    async def trusted(self) -> bytes:
        """The CAs a server's certificate may come from: the certificate Secret's, and the operator's own when
        that Secret is the user's (while the pods move from one to the other, some present each)."""
        bundle = secret_files(await self.runtime.api.read_secret(self.namespace, self.tls_secret)).get("ca.crt", b"")
        if self.tls_secret != names.server_tls_secret_name(self.name):
            own = await self.runtime.api.read_secret(self.namespace, names.ca_secret_name(self.name))
            bundle = bundle.rstrip(b"\n") + b"\n" + secret_files(own).get("ca.crt", b"")
        return bundle.strip()

    def server(self, pods: list[Object], pod: str) -> Server | None:
        found = next((p for p in pods if p["metadata"]["name"] == pod), None)
        address = ((found or {}).get("status") or {}).get("podIP")
        if not address:
            return None
        host = names.pod_host(self.namespace, self.name, pod)
        return Server(pod, address, self.port, host, serves_tls((found or {}).get("spec")))

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
        probes = await instance_probe.probe_all(servers, login)
        for probe in probes.values():
            metrics.INSTANCE_PROBES.labels("answered" if isinstance(probe, InstanceFacts) else "unreachable").inc()
            if isinstance(probe, Unreachable) and any(why in probe.error for why in CHANGED_SECRET):
                self.runtime.logins.forget((self.namespace, self.secret))  # a Secret changed: read it again
        return probes

    async def ask_one(self, pods: list[Object], pod: str, connect_seconds: float) -> Probe | None:
        """POD's server, whatever its readiness says (None: it has no address, or there is no login)."""
        server, login = self.server(pods, pod), await self.login()
        if server is None or login is None:
            return None
        answer = await instance_probe.probe(server, login, connect_seconds)
        metrics.INSTANCE_PROBES.labels("answered" if isinstance(answer, InstanceFacts) else "unreachable").inc()
        return answer

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
