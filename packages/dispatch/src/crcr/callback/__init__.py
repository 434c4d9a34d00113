"""`crcr callback`: report a downstream job to the relay (schema version 1), once per state, always completed.

`body` builds the callback body, `from_run` reads a `crcr ci` run directory into results and a triage verdict,
`ledger` keeps the per-job state that makes the pair exactly-once, `send` posts it, `command` is the CLI.
"""
