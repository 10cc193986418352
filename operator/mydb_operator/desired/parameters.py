"""The postgresql.conf settings a MyDatabase may not set (spec.postgresql.parameters): the scripts and the chart
own them, or they trade durability away. A platform may deny more (desired/platform.py). Pure data."""

from __future__ import annotations

DENIED_PARAMETERS = frozenset(
    {
        "listen_addresses",
        "port",
        "data_directory",
        "hba_file",
        "ident_file",
        "config_file",
        "external_pid_file",
        "unix_socket_directories",
        "unix_socket_permissions",
        "unix_socket_group",
        "primary_conninfo",
        "primary_slot_name",
        "restore_command",
        "recovery_target",
        "recovery_target_time",
        "recovery_target_lsn",
        "recovery_target_xid",
        "recovery_target_name",
        "hot_standby",
        "wal_level",
        "fsync",
        "full_page_writes",
        "synchronous_commit",
        "synchronous_standby_names",  # spec.replication.synchronous
        "wal_log_hints",  # pg_rewind of a former primary needs it
        "max_slot_wal_keep_size",  # backup.maxRetainedWal (the chart's value)
        "recovery_target_timeline",  # a replica follows a promoted one onto its new timeline
        "ssl",  # spec.tls
        "ssl_cert_file",
        "ssl_key_file",
        "ssl_ca_file",
        "archive_command",
        "archive_mode",
    }
)
