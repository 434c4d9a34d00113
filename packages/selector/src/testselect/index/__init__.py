"""Repository memory: the upstream test tree parsed (never imported) into an embedded SQLite store."""
