"""The recording privateuse1 device (`recorder.cpp`), loaded in the pytest processes of `testselect evidence`."""
