"""`crcr gate`: decide from one relay dispatch whether to run, what to test and why (`configs/crcr.yaml`)."""
