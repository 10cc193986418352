"""The MyDatabase operator: PostgreSQL databases declared as Kubernetes resources, run through Helm."""

__version__ = "0.1.0"
