"""What the operator tells its operators: Prometheus metrics and log lines."""
