"""Steps 3 and 4 of issue 11: scope (which files) and buckets (which mode per test case) for a backend profile."""
