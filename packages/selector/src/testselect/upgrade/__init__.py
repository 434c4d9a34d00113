"""`testselect upgrade`: the delta between two test trees or two torch versions, and only that re-evaluated."""
