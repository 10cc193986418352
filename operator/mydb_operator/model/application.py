"""spec.application: the role and the database an application uses, made by the operator on the primary. Pure.

Every database gets them (CloudNativePG's `app` owner and database): clients connect as a role that owns
its database and nothing else, not as the superuser. The names are PostgreSQL identifiers the operator uses
unquoted in its documentation and quoted in its statements; the CRD refuses the same names at admission."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .errors import SpecError

APPLICATION_OWNER = APPLICATION_DATABASE = "app"
IDENTIFIER = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
RESERVED_ROLES = ("postgres", "replicator", "public")
RESERVED_DATABASES = ("postgres", "template0", "template1")


@dataclass(frozen=True)
class Application:
    owner: str = APPLICATION_OWNER
    database: str = APPLICATION_DATABASE


def parse_application(section: Mapping[str, Any] | None) -> Application:
    """spec.application, its defaults filled in; SpecError for a name PostgreSQL or the operator keeps."""
    given = section or {}
    found = Application(
        owner=str(given.get("owner") or APPLICATION_OWNER), database=str(given.get("database") or APPLICATION_DATABASE)
    )
    for field_path, value in (("application.owner", found.owner), ("application.database", found.database)):
        if not IDENTIFIER.match(value):
            raise SpecError(field_path, f"{value!r} is not a lower-case PostgreSQL name (a-z, 0-9, _; 63 at most)")
    if found.owner in RESERVED_ROLES or found.owner.startswith("pg_"):
        raise SpecError("application.owner", f"{found.owner!r} is a role the server or the operator keeps")
    if found.database in RESERVED_DATABASES:
        raise SpecError("application.database", f"{found.database!r} is a database the server keeps")
    return found
