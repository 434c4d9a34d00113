"""The registry is the single source of truth: well-formed, device-shaped dtypes, and every entry really exists."""

from __future__ import annotations

import pytest
import torch
from ringsim.ops.registry import FLOATS, HELD, INTS, OPINFO_NEEDS, SPECS, by_name, by_packet, opinfo_dtypes
from ringsim.ops.variants import all_variants, variants
from ringsim.torchbridge import OpOverload, schema

#: The only arithmetic float64 is held for: torch's printing divides two float64 extremes on the device.
FLOAT64_ARITHMETIC = {"div"}


def test_the_op_set_has_at_least_80_aten_operators() -> None:
    assert len(SPECS) >= 80
    assert len(by_name()) == sum(len(spec.names) for spec in SPECS)


def test_no_complex_anywhere_and_float64_only_held() -> None:
    for spec in SPECS:
        assert not {torch.complex64, torch.complex128} & set(spec.dtypes), spec.aten
        if torch.float64 in spec.dtypes:
            assert spec.tolerance == "exact" or spec.aten in FLOAT64_ARITHMETIC, spec.aten


def test_every_float_op_covers_the_three_float_dtypes() -> None:
    for spec in SPECS:
        if set(FLOATS) & set(spec.dtypes):
            assert set(FLOATS) <= set(spec.dtypes), spec.aten


def test_dtypes_are_device_dtypes() -> None:
    for spec in SPECS:
        assert set(spec.dtypes) <= set(HELD), spec.aten


def test_integer_work_is_declared_where_torch_test_helpers_need_it() -> None:
    """assert_close, make_tensor and printing run these on the device under test for integer and bool tensors."""
    needed = {"eq": (*INTS, torch.bool), "mul": (torch.bool,), "sub": INTS, "abs": INTS, "all": (torch.bool,)}
    for packet, dtypes in needed.items():
        assert set(dtypes) <= set(by_packet()[packet].dtypes), packet
    for packet in ("random_", "sum", "amax", "bitwise_and", "logical_and", "index_select", "where"):
        assert set(INTS) <= set(by_packet()[packet].dtypes), packet


@pytest.mark.parametrize("spec", SPECS, ids=lambda spec: spec.aten)
def test_every_overload_exists_in_torch(spec) -> None:
    found = variants(spec)
    assert {v.qualname for v in found if v.role == "functional"} == set(spec.names)


def test_variants_are_unique_and_stable() -> None:
    names = [v.qualname for v in all_variants()]
    assert len(names) == len(set(names))
    assert names == [v.qualname for v in all_variants()]


def test_opinfo_mapping_only_needs_registered_ops() -> None:
    for name, needs in OPINFO_NEEDS.items():
        assert needs, name
        for packet in needs:
            assert packet in by_packet(), f"{name} needs unregistered {packet}"
        assert opinfo_dtypes(name), name


def test_every_registry_entry_is_served_to_an_opinfo_or_tested_directly() -> None:
    covered = {packet for needs in OPINFO_NEEDS.values() for packet in needs}
    direct = {  # test_ops_creation.py and test_grown_op_set.py
        "fill_", "zero_", "arange", "range", "linspace", "logspace", "uniform_", "normal_", "random_", "bernoulli_",
        "exponential_", "geometric_", "cauchy_", "log_normal_", "randperm", "__lshift__", "__rshift__",
    }  # fmt: skip
    assert {spec.aten for spec in SPECS} - covered <= direct


def test_every_in_place_variant_takes_its_functional_s_arguments() -> None:
    # `pow_.Scalar` (a tensor to a scalar power) shares an overload name with `pow.Scalar` (a scalar to a tensor
    # power): matched by name it ran the wrong functional, and `int_tensor **= 2` failed
    def arguments(op: OpOverload) -> list[tuple[str, str]]:
        return [(a.name, str(a.type)) for a in schema(op).arguments if not a.is_out]

    wrong = [v.qualname for v in all_variants() if v.role == "inplace" and arguments(v.op) != arguments(v.functional)]
    assert wrong == []


def test_an_in_place_power_of_an_integer_tensor_runs_and_refuses_as_cpu_does() -> None:
    t = torch.tensor([2, 3]).to("ring")
    t **= 2
    assert t.cpu().tolist() == [4, 9]
    with pytest.raises(RuntimeError, match="Integers to negative integer powers are not allowed"):
        t.pow_(-2)
