"""Agent session logs: one file (or subagent file) of an agent's events is one conversation."""
