# Owner(s): ["module: unknown"]
# ruff: noqa: PT009 - upstream's unittest idioms (assertEqual) are the point of this tree

import itertools

import torch
from torch.testing._internal.common_device_type import (
    OpDTypes,
    instantiate_device_type_tests,
    onlyNativeDeviceTypes,
    ops,
)
from torch.testing._internal.common_methods_invocations import op_db
from torch.testing._internal.common_utils import TestCase, run_tests

# Few samples per (op, dtype): the sweep is over ops and dtypes, not over every sample of one op.
SAMPLES_PER_OP = 3

_ops_with_out = [op for op in op_db if op.supports_out]

# Ops documented to return views of their input (see the "Tensor Views" page of the docs).
_view_op_names = {
    "T",
    "H",
    "mT",
    "mH",
    "as_strided",
    "chunk",
    "diagonal",
    "dsplit",
    "expand",
    "expand_as",
    "hsplit",
    "imag",
    "movedim",
    "narrow",
    "permute",
    "real",
    "select",
    "split",
    "split_with_sizes",
    "squeeze",
    "swapaxes",
    "swapdims",
    "t",
    "tensor_split",
    "transpose",
    "unbind",
    "unflatten",
    "unfold",
    "unsqueeze",
    "view",
    "view_as",
    "view_as_complex",
    "view_as_real",
    "vsplit",
}
_view_ops = [op for op in op_db if op.name in _view_op_names]


def _to_cpu(arg):
    if isinstance(arg, torch.Tensor):
        return arg.to(device="cpu")
    return arg


class TestCommon(TestCase):
    exact_dtype = True

    # Runs the op on the device under test and on the CPU and compares the results.
    @onlyNativeDeviceTypes
    @ops(op_db, allowed_dtypes=(torch.float32,))
    def test_compare_cpu(self, device, dtype, op):
        samples = op.sample_inputs(device, dtype)
        for sample in itertools.islice(samples, SAMPLES_PER_OP):
            cpu_sample = sample.transform(_to_cpu)
            actual = op(sample.input, *sample.args, **sample.kwargs)
            expected = op(cpu_sample.input, *cpu_sample.args, **cpu_sample.kwargs)
            actual = sample.output_process_fn_grad(actual)
            expected = cpu_sample.output_process_fn_grad(expected)
            self.assertEqual(actual, expected, atol=1e-3, rtol=1e-3)

    # Noncontiguous inputs must give the results of their contiguous copies.
    @ops(op_db, allowed_dtypes=(torch.float32, torch.int64))
    def test_noncontiguous_samples(self, device, dtype, op):
        samples = op.sample_inputs(device, dtype)
        for sample in itertools.islice(samples, SAMPLES_PER_OP):
            expected = op(sample.input, *sample.args, **sample.kwargs)
            noncontig = sample.noncontiguous()
            actual = op(noncontig.input, *noncontig.args, **noncontig.kwargs)
            expected = sample.output_process_fn_grad(expected)
            actual = noncontig.output_process_fn_grad(actual)
            self.assertEqual(actual, expected)

    # The out= variant writes the functional result into the given tensor, resized from empty.
    @ops(_ops_with_out, dtypes=OpDTypes.any_one)
    def test_embedded_out_matches_functional(self, device, dtype, op):
        sample = next(iter(op.sample_inputs(device, dtype)))
        expected = op(sample.input, *sample.args, **sample.kwargs)
        if not isinstance(expected, torch.Tensor):
            self.skipTest("op returns more than one tensor")
        out = torch.empty(0, device=device, dtype=expected.dtype)
        result = op(sample.input, *sample.args, **sample.kwargs, out=out)
        self.assertEqual(result.data_ptr(), out.data_ptr())
        self.assertEqual(out, expected)

    # Ops whose result is a view must keep sharing the input's storage on every device.
    @ops(_view_ops, allowed_dtypes=(torch.float32, torch.complex64))
    def test_embedded_view_shares_storage(self, device, dtype, op):
        sample = next(iter(op.sample_inputs(device, dtype)))
        result = op(sample.input, *sample.args, **sample.kwargs)
        results = result if isinstance(result, (tuple, list)) else (result,)
        for view in results:
            self.assertEqual(view.device, sample.input.device)
            self.assertEqual(view.untyped_storage().data_ptr(), sample.input.untyped_storage().data_ptr())


instantiate_device_type_tests(TestCommon, globals())

if __name__ == "__main__":
    run_tests()
