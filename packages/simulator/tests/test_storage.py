"""Storage, view and copy semantics of ring tensors, checked against the same operations on CPU."""

from __future__ import annotations

import gc
import io

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from ringsim import runtime

STORAGE_DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int8, torch.bool]


def reference(shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.arange(int(torch.tensor(shape).prod()), dtype=torch.float64).reshape(shape).to(dtype)


def assert_same_layout(ring: torch.Tensor, cpu: torch.Tensor) -> None:
    assert ring.device.type == "ring"
    assert ring.shape == cpu.shape
    assert ring.stride() == cpu.stride()
    assert ring.storage_offset() == cpu.storage_offset()
    assert ring.dtype == cpu.dtype
    assert torch.equal(ring.cpu(), cpu)


@pytest.mark.parametrize("dtype", STORAGE_DTYPES)
def test_round_trip_keeps_values_for_every_storage_dtype(dtype: torch.dtype) -> None:
    cpu = reference((3, 5), dtype)
    assert_same_layout(cpu.to("ring"), cpu)


@pytest.mark.parametrize("nbytes", [1, 2, 127, 128, 129, 1000, 4096, 1 << 20])
def test_every_allocation_starts_on_a_stick(nbytes: int) -> None:
    kept = [torch.empty(nbytes, dtype=torch.uint8, device="ring") for _ in range(4)]
    kept.append(torch.empty_strided((3, nbytes), (nbytes + 1, 1), dtype=torch.uint8, device="ring"))
    assert all(t.data_ptr() % runtime.STICK_BYTES == 0 for t in kept)
    assert len({t.data_ptr() for t in kept}) == len(kept)


VIEWS = {
    "transpose": lambda t: t.transpose(0, 2),
    "permute": lambda t: t.permute(2, 0, 1),
    "slice_step": lambda t: t[:, ::2, 1::2],
    "select": lambda t: t.select(1, 2),
    "narrow": lambda t: t.narrow(2, 1, 2),
    "expand": lambda t: t[:, :1].expand(2, 5, 4),
    "unsqueeze": lambda t: t.unsqueeze(1),
    "diagonal": lambda t: t.diagonal(0, 1, 2),
    "unfold": lambda t: t.unfold(2, 2, 1),
    "view": lambda t: t.view(6, 4),
    "reshape_alias": lambda t: t.reshape(4, 6),
    "unsafe_view": lambda t: torch.ops.aten._unsafe_view(t, [6, 4]),
    "alias": lambda t: torch.ops.aten.alias(t),
    "as_strided": lambda t: t.as_strided((3, 3), (1, 2), 1),
    "view_dtype": lambda t: t.view(torch.int16),
    "split": lambda t: t.split(1, 2)[1],
    "unbind": lambda t: t.unbind(1)[2],
    "mT": lambda t: t.mT,
}


@pytest.mark.parametrize("name", sorted(VIEWS))
def test_views_match_cpu_and_share_storage(name: str) -> None:
    cpu = reference((2, 3, 4))
    ring = cpu.to("ring")
    ring_view, cpu_view = VIEWS[name](ring), VIEWS[name](cpu)
    assert_same_layout(ring_view, cpu_view)
    assert ring_view.untyped_storage().data_ptr() == ring.untyped_storage().data_ptr()
    itemsize_offset = ring_view.data_ptr() - ring.data_ptr()
    assert itemsize_offset == cpu_view.data_ptr() - cpu.data_ptr()


def test_view_as_real_and_complex_round_trip() -> None:
    cpu = torch.randn(3, 4, dtype=torch.complex64)
    ring = cpu.to("ring")
    assert_same_layout(torch.view_as_real(ring), torch.view_as_real(cpu))
    assert_same_layout(torch.view_as_complex(torch.view_as_real(ring)), cpu)


def test_writes_through_a_view_reach_the_base() -> None:
    ring = torch.zeros(4, 4).to("ring")
    ring[1:3, ::2].copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    expected = torch.zeros(4, 4)
    expected[1:3, ::2] = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert torch.equal(ring.cpu(), expected)


def test_untyped_storage_lives_on_the_device() -> None:
    ring = reference((5,)).to("ring")
    storage = ring.untyped_storage()
    assert storage.device == torch.device("ring", 0)
    assert storage.nbytes() == 5 * 4
    assert torch.equal(torch.frombuffer(bytearray(storage.cpu()), dtype=torch.float32), reference((5,)))


def test_resize_grows_storage_and_keeps_prefix() -> None:
    ring = reference((2, 3)).to("ring")
    old_storage = ring.untyped_storage().data_ptr()
    ring.resize_(4, 5)
    assert ring.shape == (4, 5)
    assert ring.stride() == (5, 1)
    assert ring.untyped_storage().nbytes() == 20 * 4
    assert ring.untyped_storage().data_ptr() != old_storage
    assert ring.data_ptr() % runtime.STICK_BYTES == 0
    assert torch.equal(ring.cpu().flatten()[:6], reference((6,)))
    ring.resize_(2, 2)
    assert ring.untyped_storage().nbytes() == 20 * 4


def test_resize_to_channels_last() -> None:
    ring = torch.empty(0, device="ring").resize_(2, 3, 4, 5, memory_format=torch.channels_last)
    assert ring.stride() == torch.empty(2, 3, 4, 5, memory_format=torch.channels_last).stride()


def test_untyped_storage_resize() -> None:
    ring = reference((4,)).to("ring")
    storage = ring.untyped_storage()
    storage.resize_(64)
    assert storage.nbytes() == 64
    assert storage.data_ptr() % runtime.STICK_BYTES == 0
    assert bytes(storage.cpu())[:16] == bytes(reference((4,)).untyped_storage())


def test_set_overloads_match_cpu() -> None:
    cpu = reference((12,))
    ring = cpu.to("ring")
    ring_set = torch.empty(0, device="ring").set_(ring.untyped_storage(), 2, (2, 3), (1, 2))
    assert_same_layout(ring_set, torch.empty(0).set_(cpu.untyped_storage(), 2, (2, 3), (1, 2)))
    assert torch.empty(0, device="ring").set_(ring.untyped_storage()).cpu().equal(cpu)
    from_tensor = torch.empty(0, device="ring").set_(ring[3:])
    assert_same_layout(from_tensor, cpu[3:])
    assert from_tensor.is_set_to(ring[3:])
    emptied = ring.clone().set_()
    assert emptied.shape == (0,)
    assert emptied.untyped_storage().nbytes() == 0
    with pytest.raises(RuntimeError, match="different device"):
        torch.empty(0, device="ring").set_(cpu.untyped_storage())


def test_as_strided_overlapping_matches_cpu() -> None:
    cpu = reference((10,))
    assert_same_layout(cpu.to("ring").as_strided((4, 3), (2, 1), 1), cpu.as_strided((4, 3), (2, 1), 1))


@st.composite
def strided_layouts(draw: st.DrawFn) -> tuple[list[int], list[int], list[slice]]:
    rank = draw(st.integers(1, 4))
    shape = draw(st.lists(st.integers(1, 6), min_size=rank, max_size=rank))
    order = draw(st.permutations(list(range(rank))))
    slices = [slice(draw(st.integers(0, n - 1)), None, draw(st.integers(1, 3))) for n in shape]
    return shape, order, slices


@settings(max_examples=60, deadline=None)
@given(layout=strided_layouts(), src_dtype=st.sampled_from(STORAGE_DTYPES), dst_dtype=st.sampled_from(STORAGE_DTYPES))
def test_strided_copies_in_every_direction_match_cpu(
    layout: tuple[list[int], list[int], list[slice]], src_dtype: torch.dtype, dst_dtype: torch.dtype
) -> None:
    shape, order, slices = layout
    source_cpu = reference(tuple(shape), src_dtype).permute(order)[tuple(slices)]
    expected = source_cpu.to(dst_dtype)

    to_device = torch.empty_like(reference(tuple(shape), dst_dtype), device="ring").permute(order)[tuple(slices)]
    to_device.copy_(source_cpu)
    assert torch.equal(to_device.cpu(), expected)

    reversed_dims = list(reversed(range(expected.dim())))
    back_on_host = torch.empty(expected.shape[::-1], dtype=dst_dtype).permute(reversed_dims)
    back_on_host.copy_(source_cpu.to("ring"))
    assert torch.equal(back_on_host, expected)

    source_ring = reference(tuple(shape), src_dtype).to("ring").permute(order)[tuple(slices)]
    device_to_device = torch.empty(expected.shape, dtype=dst_dtype, device="ring")
    device_to_device.copy_(source_ring)
    assert torch.equal(device_to_device.cpu(), expected)


def test_copy_broadcasts_source() -> None:
    ring = torch.empty(2, 3, device="ring")
    ring.copy_(torch.tensor([1.0, 2.0, 3.0]))
    assert torch.equal(ring.cpu(), torch.tensor([[1.0, 2.0, 3.0]] * 2))


def test_to_dtype_on_device() -> None:
    ring = reference((3, 4)).to("ring")
    for dtype in (torch.float16, torch.bfloat16, torch.int32, torch.bool):
        converted = ring.to(dtype)
        assert converted.device.type == "ring"
        assert torch.equal(converted.cpu(), reference((3, 4)).to(dtype))


def test_item_reads_one_element() -> None:
    ring = reference((3, 4)).to("ring")
    assert ring[2, 1].item() == 9.0
    assert ring.t()[1, 2].item() == 9.0
    assert torch.tensor(True).to("ring").item() is True


def test_clone_and_contiguous_make_fresh_storage() -> None:
    cpu = reference((3, 4)).t()
    ring = cpu.to("ring").t().contiguous().t()
    clone = ring.clone()
    assert clone.untyped_storage().data_ptr() != ring.untyped_storage().data_ptr()
    assert_same_layout(clone, cpu.clone())
    assert_same_layout(ring.contiguous(), cpu.contiguous())


def test_op_without_a_ring_kernel_raises_instead_of_falling_back() -> None:
    with pytest.raises(NotImplementedError, match="ring"):
        torch.fft.rfft(torch.ones(8, device="ring"))


def test_host_view_aliases_exactly_the_device_tensor() -> None:
    base = reference((4, 6)).to("ring")
    view = base[1:, ::2].t()
    host = runtime.host_view(view)
    assert host.device.type == "cpu"
    assert (host.shape, host.stride(), host.storage_offset(), host.dtype) == (
        view.shape,
        view.stride(),
        view.storage_offset(),
        view.dtype,
    )
    assert host.data_ptr() == view.data_ptr() == runtime.device_address(view)
    host.fill_(-1.0)
    expected = reference((4, 6))
    expected[1:, ::2] = -1.0
    assert torch.equal(base.cpu(), expected)


def test_host_view_keeps_device_storage_alive() -> None:
    allocated = torch.ring.memory_allocated()
    ring = reference((256,)).to("ring")
    host = runtime.host_view(ring)
    del ring
    gc.collect()
    assert torch.ring.memory_allocated() == allocated + 1024
    assert torch.equal(host, reference((256,)))
    del host
    gc.collect()
    assert torch.ring.memory_allocated() == allocated


def test_storage_host_view_covers_the_whole_storage() -> None:
    ring = reference((10,)).to("ring")[3:5]
    raw = runtime.storage_host_view(ring)
    assert raw.dtype == torch.uint8
    assert raw.shape == (40,)
    assert raw.data_ptr() == ring.untyped_storage().data_ptr()
    assert torch.equal(raw.view(torch.float32), reference((10,)))


def test_host_view_rejects_cpu_tensors() -> None:
    with pytest.raises(RuntimeError, match="needs a ring tensor"):
        runtime.host_view(torch.ones(2))


def test_conjugate_and_negative_views_copy_with_their_meaning() -> None:
    cpu = torch.randn(5, dtype=torch.complex64)
    ring = cpu.to("ring")
    assert ring.conj().is_conj()
    assert torch.equal(ring.conj().cpu(), cpu.conj().resolve_conj())
    assert torch.equal(torch._neg_view(ring).cpu(), -cpu)
    assert ring.conj()[2].item() == cpu[2].conj().item()
    on_device = torch.empty(5, dtype=torch.complex64, device="ring")
    on_device.copy_(ring.conj())
    assert torch.equal(on_device.cpu(), cpu.conj().resolve_conj())
    conj_destination = torch.empty(5, dtype=torch.complex64, device="ring").conj()
    conj_destination.copy_(cpu)
    assert torch.equal(conj_destination.cpu(), cpu)
    assert runtime.host_view(ring.conj()).is_conj()


def test_save_and_load_keep_the_device_and_values() -> None:
    buffer = io.BytesIO()
    torch.save(reference((3, 4)).to("ring").t(), buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    assert_same_layout(loaded, reference((3, 4)).t())


def test_gradients_flow_through_device_copies() -> None:
    leaf = torch.ones(3, requires_grad=True)
    leaf.to("ring").cpu().mul(2).sum().backward()
    assert torch.equal(leaf.grad, torch.full((3,), 2.0))
