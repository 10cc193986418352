"""How long to wait before the next try after failures in a row: one policy, doubling up to a ceiling. Pure.

A database's daemon waits 5 s, 10 s, ... up to 300 s (the defaults); an informer whose watch broke
lists again after 2 s, 4 s, ... up to 30 s (cluster/informers.py). Both count with `Backoff`."""

from __future__ import annotations

from dataclasses import dataclass

BACKOFF_FIRST, BACKOFF_MAX = 5.0, 300.0
# Problems that wait on something a user makes (a Secret, a StorageClass, a restore's source): looking again
# costs one read, and a user who just made it should not wait out a 5-minute back-off.
WAITING_ON_A_USER = frozenset(
    {
        "CredentialsMissing",
        "CredentialsInvalid",
        "StorageClassNotFound",
        "RestoreSourceMissing",
        "TLSSecretMissing",
        "TLSSecretInvalid",
        "SecretNameTaken",
    }
)
# The namespace is being deleted: its controller marks the database for deletion within seconds, and the look
# after that lets it go (reconcile/namespace_deletion.py). The pods' Events woke the daemon into a few failed
# passes in a row, which doubled the back-off to 40 s and more: the namespace stayed Terminating that long.
WAITING_ON_THE_NAMESPACE = "NamespaceDeleting"


def problem_retry_delay(reason: str, backed_off: float, resync: float) -> float:
    """The wait after a problem: the back-off's, but never longer than a resync for one a user fixes, and the
    first step's alone for a namespace being deleted."""
    if reason == WAITING_ON_THE_NAMESPACE:
        return min(BACKOFF_FIRST, backed_off)
    return min(backed_off, resync) if reason in WAITING_ON_A_USER else backed_off


def retry_delay(failures: int, first: float = BACKOFF_FIRST, ceiling: float = BACKOFF_MAX) -> float:
    """FIRST, twice that, four times ... up to CEILING after the 1st, 2nd, 3rd ... failure in a row
    (by default 5 s, 10 s, 20 s, ... up to 300 s)."""
    return min(first * 2.0 ** (failures - 1), ceiling)


@dataclass
class Backoff:
    """Failures in a row: each failure lengthens the wait, a success resets it."""

    failures: int = 0
    first: float = BACKOFF_FIRST
    ceiling: float = BACKOFF_MAX

    def failed(self) -> float:
        """Count one more failure; the seconds to wait before the next try."""
        self.failures += 1
        return retry_delay(self.failures, self.first, self.ceiling)

    def succeeded(self) -> None:
        self.failures = 0
