"""The operator's I/O with the Kubernetes API: shared clients, reads, writes and the informers' cache."""
