"""The DBOS runtime: the executor, the agent-run workflow and its steps.

Its public names are re-exported by :mod:`helix_dbos`. A regular package (not a namespace one) so
that the API reference reads its modules and renders those names.
"""
