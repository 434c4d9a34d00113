"""The kernel-graph IR: shapes are checked as ops are added, and the JSON form reports the path of a bad field."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from ring_inductor.plan.graph import Graph, GraphError, OpKind, graph_from_dict


def test_ops_infer_shapes_and_bytes():
    graph = Graph()
    graph.tensor("x", (4, 8))
    graph.tensor("w", (8, 16))
    graph.reduction("max", "amax", "x", -1, "m")
    graph.pointwise("sub", "sub", ["x", "m"], "d")
    product = graph.matmul("mm", "d", "w", "y")
    assert graph.tensors["m"].shape == (4, 1)
    assert product.shape == (4, 16)
    assert product.nbytes == 4 * 16 * 2
    assert graph.inputs == ["x", "w"]
    assert [op.kind for op in graph.ops] == [OpKind.REDUCTION, OpKind.POINTWISE, OpKind.MATMUL]
    assert graph.consumers("x") == graph.ops[:2]


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda g: g.matmul("mm", "x", "x", "y"), "cannot multiply"),
        (lambda g: g.pointwise("add", "add", ["x", "v"], "y"), "does not broadcast"),
        (lambda g: g.reduction("sum", "sum", "x", 2, "y"), "out of range"),
        (lambda g: g.pointwise("exp", "exp", ["nope"], "y"), "not a declared tensor"),
        (lambda g: g.tensor("x", (1,)), "declared twice"),
        (lambda g: g.tensor("z", (0, 3)), "positive integers"),
    ],
)
def test_bad_graphs_are_refused_with_the_culprit_named(build, message):
    graph = Graph()
    graph.tensor("x", (4, 8))
    graph.tensor("v", (3, 8))
    with pytest.raises(GraphError, match=message):
        build(graph)


def test_json_form_round_trips_a_softmax():
    data = {
        "tensors": {"x": {"shape": [8, 64], "dtype": "float16"}},
        "ops": [
            {"kind": "reduction", "name": "max", "fn": "amax", "input": "x", "dim": 1, "output": "m"},
            {"kind": "pointwise", "name": "sub", "fn": "sub", "inputs": ["x", "m"], "output": "y"},
        ],
        "outputs": ["y"],
    }
    graph = graph_from_dict(json.loads(json.dumps(data)))
    assert graph.outputs == ["y"]
    assert graph.tensors["y"].shape == (8, 64)


@pytest.mark.parametrize(
    ("data", "where"),
    [
        ({"tensors": {}, "ops": [], "extra": 1}, "$: unknown field 'extra'"),
        ({"ops": []}, "$: missing field 'tensors'"),
        ({"tensors": {"x": {"shape": [2, "a"]}}, "ops": []}, "$.tensors.x:"),
        ({"tensors": {"x": {"shape": [2]}}, "ops": [{"kind": "conv"}]}, "$.ops[0].kind"),
        ({"tensors": {"x": {"shape": [2]}}, "ops": [{"kind": "matmul", "name": "m", "output": "y"}]}, "$.ops[0]"),
        ({"tensors": {"x": {"shape": [2]}}, "ops": [], "outputs": ["q"]}, "$.outputs"),
    ],
)
def test_json_errors_name_the_path(data, where):
    with pytest.raises(GraphError) as caught:
        graph_from_dict(data)
    assert str(caught.value).startswith(where)
    assert "\n" not in str(caught.value)


_json = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 70) | st.sampled_from(["x", "y", "float16", "amax", "matmul"]),
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.dictionaries(
            st.sampled_from(
                [
                    "tensors",
                    "ops",
                    "outputs",
                    "shape",
                    "dtype",
                    "kind",
                    "name",
                    "fn",
                    "inputs",
                    "input",
                    "dim",
                    "output",
                    "x",
                ]
            ),
            inner,
            max_size=4,
        )
    ),
    max_leaves=12,
)


@settings(max_examples=200, deadline=None)
@given(_json)
def test_fuzzed_json_either_parses_or_raises_graph_error(data):
    try:
        graph_from_dict(data)
    except GraphError as error:
        message = str(error)
    else:
        return
    assert message.startswith("$")
    assert "\n" not in message
