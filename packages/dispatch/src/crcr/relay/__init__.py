"""A local Cross-Repository CI Relay: dispatches, OIDC-checked callbacks, their state machine, storage and a HUD.

It behaves like pytorch/test-infra's `cross_repo_ci_relay` for one downstream setup, so the whole CRCR loop can run
and be tested on one machine. The entry points are `crcr relay serve` and `crcr.relay.server.running_relay`.
"""
