"""Op evidence: which aten ops each upstream test case really runs on a reference device, as a reverse index."""
