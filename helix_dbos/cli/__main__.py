"""``python -m helix_dbos.cli``: the same as the ``helix-dbos`` console script."""

from helix_dbos.cli import main

main()
