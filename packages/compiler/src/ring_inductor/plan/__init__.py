"""The planning layer: a kernel-graph IR and the passes that map it onto the 32-core ring device.

Independent of Inductor: graphs are built by hand (tests, benchmarks) or fed from the Inductor integration, planned
(layout, work division, tiling, scratchpad placement, co-optimisation) and emitted as `ringsim-program/1` programs.
"""
