"""Every private torch symbol ring_inductor uses still exists; a moved one fails naming the symbol and torch version."""

from __future__ import annotations

import functools
import importlib
import inspect
import re

import pytest
import torch
from ring_inductor import torchprivate


@pytest.mark.parametrize(("module", "name"), torchprivate.SYMBOLS, ids=[".".join(s) for s in torchprivate.SYMBOLS])
def test_symbol_exists(module: str, name: str) -> None:
    owner = functools.reduce(getattr, name.split(".")[:-1], importlib.import_module(module))
    assert hasattr(owner, name.rsplit(".", 1)[-1]), (
        f"torch {torch.__version__} moved {module}.{name}, which ring_inductor.torchprivate relies on"
    )


def test_scheduler_node_keeps_its_loop_body() -> None:
    scheduler = importlib.import_module("torch._inductor.scheduler")
    init = scheduler.SchedulerNode._compute_attrs
    source = inspect.getsource(init)
    assert "self._body" in source, f"torch {torch.__version__}: SchedulerNode no longer sets _body"
    assert "self._sizes" in source, f"torch {torch.__version__}: SchedulerNode no longer sets _sizes"


def test_private_hooks_used_at_codegen_exist() -> None:
    from torch._inductor.graph import GraphLowering
    from torch._inductor.scheduler import Scheduler

    assert hasattr(Scheduler, "can_buffer_be_removed_through_fusion"), torch.__version__
    assert "self.mutation_real_name" in inspect.getsource(Scheduler), torch.__version__
    assert hasattr(GraphLowering, "get_output_names"), torch.__version__
    assert hasattr(torch._ops.OpOverload, "py_impl"), torch.__version__
    assert hasattr(torch._inductor.config, "force_disable_caches"), torch.__version__


def test_a_missing_symbol_fails_loudly_naming_it_and_the_version() -> None:
    with pytest.raises(
        ImportError, match=rf"torch\._inductor\.scheduler\.NoSuchThing.*\({re.escape(torch.__version__)}\)"
    ):
        torchprivate._resolve("torch._inductor.scheduler", "NoSuchThing")
