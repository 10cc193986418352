"""The MyDatabase operator benchmark: how fast and how cheaply databases converge.

    python -m bench [--sizes 10,100,300] [--idle 120] ...     (or: make bench)

For each size N it runs the operator as a process under its ServiceAccount,
creates N MyDatabases at once and measures convergence time, Helm runs, API
requests (the operator's share apart, through API Priority and Fairness flow
schemas), CPU and memory; then an idle window (steady state), an update wave,
and "the floor": the same rendered manifests applied directly with kubectl.
docs/benchmarks.md describes the method.
"""
