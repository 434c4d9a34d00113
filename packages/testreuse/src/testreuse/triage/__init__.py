"""Triage of a run's results record: each failing case's root cause with its evidence, and the config change it
implies, as a diff of the config files."""
