"""Pure orchestration: the agent loop's decisions, with no I/O (seed 004 "Why Pure Functions?").

The durable runtime calls these from workflow code, where determinism on replay matters; keeping
them free of clocks, ids and I/O is what makes that safe.
"""
