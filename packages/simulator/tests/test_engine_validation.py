"""Each rule of the program format refuses a program that breaks it, with a message naming core and instruction."""

from __future__ import annotations

import copy
import json
import pathlib
from typing import Any

import pytest
from ringsim.engine import DEFAULT_MODEL, ProgramError, plan
from ringsim.engine.program import parse_program

STICK = DEFAULT_MODEL.stick_bytes


def tile(offset: int, shape: list[int], dtype: str = "float16") -> dict[str, Any]:
    return {"offset": offset, "dtype": dtype, "shape": shape}


def program(cores: list[dict[str, Any]], buffers: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "format": "ringsim-program/1",
        "name": "case",
        "buffers": buffers if buffers is not None else {"x": {"dtype": "float16", "shape": [64, 64]}},
        "cores": cores,
    }


def core(number: int, instructions: list[dict[str, Any]], tiles: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "core": number,
        "tiles": tiles if tiles is not None else {"a": tile(0, [64, 64])},
        "instructions": instructions,
    }


def refuse(document: dict[str, Any]) -> ProgramError:
    with pytest.raises(ProgramError) as caught:
        plan(parse_program(document))
    assert "\n" not in str(caught.value)
    return caught.value


def dma_in(offset: int = 0, buffer: str = "x", name: str = "a") -> dict[str, Any]:
    return {"op": "dma_in", "buffer": buffer, "offset": offset, "tile": name}


def test_a_well_formed_program_is_accepted() -> None:
    accepted = plan(
        parse_program(program([core(0, [dma_in(), {"op": "dma_out", "tile": "a", "buffer": "x", "offset": 0}])]))
    )
    assert accepted.report.bytes_moved == 2 * 64 * 64 * 2


def test_scratchpad_overflow() -> None:
    usable = DEFAULT_MODEL.usable_scratchpad_bytes
    error = refuse(program([core(0, [], tiles={"big": tile(usable - STICK, [128])})]))
    assert "scratchpad overflow" in str(error)
    assert error.core == 0
    assert error.path == "$.cores[0].tiles.big"


def test_tile_offset_must_be_stick_aligned() -> None:
    error = refuse(program([core(0, [], tiles={"a": tile(64, [8])})]))
    assert "not aligned" in str(error)


def test_dma_offset_must_be_stick_aligned() -> None:
    error = refuse(program([core(0, [dma_in(), dma_in(offset=STICK // 2)], tiles={"a": tile(0, [64])})]))
    assert (error.core, error.index, error.op) == (0, 1, "dma_in")
    assert str(error).startswith("core 0 instruction 1 (dma_in): buffer offset 64 is not aligned")
    assert error.path == "$.cores[0].instructions[1].offset"


def test_dma_past_the_end_of_its_buffer_is_out_of_span() -> None:
    error = refuse(program([core(0, [dma_in(offset=STICK)])]))
    assert "out of span" in str(error)
    assert error.index == 0


def test_a_core_may_not_touch_more_than_its_addressable_span() -> None:
    span = DEFAULT_MODEL.addressable_span_bytes
    buffers = {"x": {"dtype": "uint8", "shape": [span + 4096]}}
    instructions = [dma_in(0, name="b"), dma_in(span, name="b")]
    error = refuse(program([core(0, instructions, tiles={"b": tile(0, [4096], "uint8")})], buffers))
    assert "addressable span" in str(error)
    assert (error.core, error.index) == (0, 1)


def test_ring_transfers_go_to_neighbours_only() -> None:
    cores = [core(0, [{"op": "send", "to": 2, "tile": "a"}]), core(2, [{"op": "recv", "from": 0, "tile": "a"}])]
    error = refuse(program(cores))
    assert "not a ring neighbour" in str(error)
    assert (error.core, error.index) == (0, 0)


def test_the_ring_wraps_round() -> None:
    cores = [core(0, [{"op": "send", "to": 31, "tile": "a"}]), core(31, [{"op": "recv", "from": 0, "tile": "a"}])]
    assert plan(parse_program(program(cores))).report.ring_bytes == 64 * 64 * 2


def test_unpaired_send() -> None:
    send = {"op": "send", "to": 1, "tile": "a"}
    cores = [core(0, [send, send]), core(1, [{"op": "recv", "from": 0, "tile": "a"}])]
    error = refuse(program(cores))
    assert "unpaired send" in str(error)
    assert (error.core, error.index) == (0, 1)


def test_unpaired_recv() -> None:
    cores = [core(0, [dma_in()]), core(1, [{"op": "recv", "from": 0, "tile": "a"}])]
    error = refuse(program(cores))
    assert "unpaired recv" in str(error)
    assert error.core == 1


def test_recv_must_match_the_size_of_its_send() -> None:
    cores = [
        core(0, [{"op": "send", "to": 1, "tile": "a"}]),
        core(1, [{"op": "recv", "from": 0, "tile": "s"}], tiles={"s": tile(0, [8])}),
    ]
    assert "sends 8192 bytes" in str(refuse(program(cores)))


def test_unequal_barrier_counts() -> None:
    error = refuse(program([core(0, [{"op": "barrier"}, {"op": "barrier"}]), core(1, [{"op": "barrier"}])]))
    assert "barrier" in str(error)
    assert (error.core, error.index) == (0, 1)


def test_ring_cycle_that_can_never_start_is_a_deadlock() -> None:
    cores = [
        core(0, [{"op": "recv", "from": 1, "tile": "a"}, {"op": "send", "to": 1, "tile": "a"}]),
        core(1, [{"op": "recv", "from": 0, "tile": "a"}, {"op": "send", "to": 0, "tile": "a"}]),
    ]
    error = refuse(program(cores))
    assert "deadlock" in str(error)
    assert (error.core, error.index) == (0, 0)


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["cores"][0]["instructions"].append({"op": "jump"}), "unknown op 'jump'"),
        (lambda d: d["cores"][0]["instructions"].append(dma_in(name="zz")), "unknown tile 'zz'"),
        (lambda d: d["cores"][0]["instructions"].append(dma_in(buffer="nope")), "unknown buffer 'nope'"),
        (
            lambda d: d["cores"][0]["instructions"].append(
                {"op": "compute", "fn": "no_such_fn", "inputs": ["a"], "output": "a"}
            ),
            "unknown fn 'no_such_fn'",
        ),
        (lambda d: d["cores"][0]["tiles"]["a"].update(dtype="complex128"), "'complex128' is not a device dtype"),
        (lambda d: d["buffers"]["x"].update(dtype="complex64"), "'complex64' is not a device dtype"),
    ],
    ids=["op", "tile", "buffer", "fn", "tile-dtype", "buffer-dtype"],
)
def test_unknown_names_are_refused(mutate: Any, expected: str) -> None:
    document = program([core(0, [dma_in()])])
    mutate(document)
    assert expected in str(refuse(document))


def test_compute_output_must_fit_its_tile() -> None:
    instructions = [{"op": "compute", "fn": "sum", "inputs": ["a"], "output": "a", "attrs": {"dim": [-1]}}]
    error = refuse(program([core(0, instructions)]))
    assert "produces shape [64]" in str(error)
    assert error.path == "$.cores[0].instructions[0].output"


def test_in_place_fns_are_refused() -> None:
    error = refuse(program([core(0, [{"op": "compute", "fn": "add_", "inputs": ["a", "a"], "output": "a"}])]))
    assert "in place" in str(error)


def test_fn_refusing_its_attrs_is_one_line() -> None:
    instructions = [{"op": "compute", "fn": "sum", "inputs": ["a"], "output": "a", "attrs": {"dim": [7]}}]
    error = refuse(program([core(0, instructions)]))
    assert "refused its input tiles or attrs" in str(error)


def test_structural_errors_carry_the_json_path() -> None:
    document = program([core(0, [dma_in()])])
    bad = copy.deepcopy(document)
    bad["cores"][0]["instructions"][0]["offset"] = "zero"
    error = refuse(bad)
    assert error.path == "$.cores[0].instructions[0].offset"
    assert "expected an integer" in str(error)
    del document["format"]
    assert "missing field 'format'" in str(refuse(document))


def test_cores_beyond_the_device_are_refused() -> None:
    assert "does not exist" in str(refuse(program([core(32, [])])))


def test_a_creation_fn_is_checked_without_allocating() -> None:
    instructions = [{"op": "compute", "fn": "zeros", "inputs": [], "output": "a", "attrs": {"size": [10**12]}}]
    assert "produces shape [1000000000000]" in str(refuse(program([core(0, instructions)])))


def test_the_documented_example_is_a_valid_program() -> None:
    doc = pathlib.Path(__file__).resolve().parents[1] / "docs" / "program-format.md"
    text = doc.read_text()
    example = json.loads(text.split("```json\n", 1)[1].split("```", 1)[0])
    report = plan(parse_program(example)).report
    assert report.ring_bytes == 32
    assert set(report.per_core) == {0, 1}
