"""Shard planning: a durations store, a planner that balances shards, and the selection each shard runs.

Plain functions with no pytest import, so the planning is tested directly and can run before any collection.
"""
