"""Helm, through pyhelm3: the chart's source and start-up check, the commands, the object-patch post-renderer.

Kept light: `python -m mydb_operator.helm.postrender` imports this package on every Helm run."""
