"""Decisions Helm cannot make: storage growth, version changes, drift, roles, backups, retries. Pure."""
