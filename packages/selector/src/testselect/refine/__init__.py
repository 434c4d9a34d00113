"""Step 5, refinement from execution: a run on the device recorded as facts, and the configs re-bucketed by them."""
