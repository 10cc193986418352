"""The command line's concerns, one module each: its arguments, the settings they make, the
start-up check, the leader election, and the commands (run; render and values)."""
