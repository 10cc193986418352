"""kopf wiring: thin handlers that hand each MyDatabase to a long-lived reconcile loop.

Each MyDatabase gets one daemon (daemon.py). It reconciles when poked (its spec
changed, or the informers saw one of its pods, claims, StatefulSet, Services,
CronJob or Jobs change: wakeups.py) and every resync interval otherwise; between
pokes it sleeps. Helm runs only when the values hash differs from the applied
one, or when a child object drifted. Importing this package registers every handler.
"""

from . import daemon, deletion, startup, wakeups

__all__ = ["daemon", "deletion", "startup", "wakeups"]
