"""`testselect truth`: every case of an upstream tree run on a privateuse1 device with every rule mandatory, the
ground truth `testselect score --truth` measures a selection's precision and recall against."""
