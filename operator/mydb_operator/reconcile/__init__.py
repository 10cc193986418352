"""One reconcile of one database: observe, decide, act (only when needed), report.

orchestrator.py runs the steps in order; each step is a module of its own."""
