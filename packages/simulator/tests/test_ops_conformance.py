"""Every served OpInfo entry, every supported dtype, its first samples: ring against a float64 CPU reference.

The bound per op is the documented one from ringsim.ops.numerics (not CPU eager's tolerance): the device rounds
differently from CPU, but never by more than it promises.
"""

from __future__ import annotations

import pytest
from ringsim.ops import conformance
from ringsim.ops.registry import OPINFO_NEEDS


@pytest.fixture(scope="module")
def served() -> dict:
    return conformance.opinfos()


@pytest.mark.parametrize("name", sorted(OPINFO_NEEDS))
def test_matches_float64_reference_within_documented_bound(name: str, served: dict) -> None:
    assert name in served, f"{name} is not an op_db entry"
    failures = []
    count = 0
    for case in conformance.cases([name], samples=2):
        count += 1
        why = conformance.check(case)
        if why:
            failures.append(f"{case.id}: {why}")
    assert count, f"no samples for {name}"
    assert not failures, "\n".join(failures)


def test_a_wrong_result_breaks_the_bound(served: dict) -> None:
    """The check can fail: the same comparison rejects an output that is off by one float16 ulp too many."""
    import torch
    from ringsim.ops.numerics import bound
    from ringsim.ops.registry import Tolerance

    reference = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    limit = bound(Tolerance.ROUNDED, torch.float16)
    assert limit.violations(reference.half(), reference) == 0
    assert limit.violations((reference * (1 + 4 * 2**-11)).half(), reference) == 3
