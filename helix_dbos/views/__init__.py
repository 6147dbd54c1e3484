"""Read models both faces show: a session's timeline and its usage, built from the store's records.

The command line (``helix-dbos sessions show``) and the HTTP inspector (``/v1/sessions/{id}/timeline``)
import these, so the terminal and the browser never disagree; neither face imports the other.

- :mod:`.timeline`: a session's runs and their steps, with durations, tokens and cost (no I/O);
- :mod:`.usage_view`: tokens, tool durations and cost per step, the one place that reads usage.
"""
