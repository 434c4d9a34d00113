"""The registry is the single source of truth: well-formed, device-shaped dtypes, and every entry really exists."""

from __future__ import annotations

import pytest
import torch
from ringsim.ops.registry import BYTES, FLOATS, OPINFO_NEEDS, SPECS, Kind, by_name, by_packet, opinfo_dtypes
from ringsim.ops.variants import all_variants, variants

NO_DATA_ARITHMETIC = {Kind.DATA_MOVEMENT, Kind.CREATION}


def test_the_op_set_has_at_least_80_aten_operators() -> None:
    assert len(SPECS) >= 80
    assert len(by_name()) == sum(len(spec.names) for spec in SPECS)


def test_no_float64_or_complex_anywhere() -> None:
    for spec in SPECS:
        assert not {torch.float64, torch.complex64, torch.complex128} & set(spec.dtypes), spec.aten


def test_every_float_op_covers_the_three_float_dtypes() -> None:
    for spec in SPECS:
        assert set(FLOATS) <= set(spec.dtypes), spec.aten


def test_integer_and_bool_data_only_where_no_arithmetic_happens() -> None:
    logical = {"logical_and", "logical_or", "logical_xor", "logical_not"}
    for spec in SPECS:
        extra = set(spec.dtypes) - set(FLOATS)
        if spec.kind not in NO_DATA_ARITHMETIC and spec.aten not in logical:
            assert not extra, spec.aten
        assert extra <= set(BYTES) - set(FLOATS), spec.aten


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
    direct = {"fill_", "zero_", "arange", "uniform_", "normal_"}  # test_ops_creation.py
    assert {spec.aten for spec in SPECS} - covered <= direct
