# Owner(s): ["module: nn"]
# ruff: noqa: PT009 - upstream's unittest idioms (assertEqual) are the point of this tree

import copy
import io

import torch
from torch.testing._internal.common_device_type import instantiate_device_type_tests
from torch.testing._internal.common_modules import module_db, modules
from torch.testing._internal.common_utils import TestCase, freeze_rng_state, run_tests
from torch.utils._pytree import tree_map

# Few inputs per (module, dtype, mode): the sweep is over modules, not over every input of one module.
INPUTS_PER_MODULE = 2


def _to_cpu(value):
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu")
    return value


class TestModule(TestCase):
    _do_cuda_memory_leak_check = False

    def _module_inputs(self, module_info, device, dtype, training):
        module_inputs = module_info.module_inputs_func(
            module_info, device=device, dtype=dtype, requires_grad=False, training=training
        )
        return [mi for mi in module_inputs if mi.forward_input is not None][:INPUTS_PER_MODULE]

    def _build(self, module_info, module_input, device, dtype, training):
        args, kwargs = module_input.constructor_input.args, module_input.constructor_input.kwargs
        m = module_info.module_cls(*args, **kwargs)
        m.to(device).to(dtype)
        m.train(training)
        return m

    # The module's forward on the device matches the same module, copied to the CPU.
    @modules(module_db)
    def test_forward(self, device, dtype, module_info, training):
        for module_input in self._module_inputs(module_info, device, dtype, training):
            with freeze_rng_state():
                m = self._build(module_info, module_input, device, dtype, training)
                m_cpu = copy.deepcopy(m).to("cpu")
            args, kwargs = module_input.forward_input.args, module_input.forward_input.kwargs
            with freeze_rng_state():
                outputs = m(*args, **kwargs)
            with freeze_rng_state():
                expected = m_cpu(*tree_map(_to_cpu, args), **tree_map(_to_cpu, kwargs))
            self.assertEqual(outputs, expected, exact_device=False)

    @modules(module_db, allowed_dtypes=(torch.float32,))
    def test_repr(self, device, dtype, module_info, training):
        for module_input in self._module_inputs(module_info, device, dtype, training):
            m = self._build(module_info, module_input, device, dtype, training)
            repr(m)
            str(m)

    # A module saved from the device loads back with the same parameters and buffers, on the device.
    @modules(module_db, allowed_dtypes=(torch.float32,))
    def test_pickle(self, device, dtype, module_info, training):
        for module_input in self._module_inputs(module_info, device, dtype, training):
            m = self._build(module_info, module_input, device, dtype, training)
            buffer = io.BytesIO()
            torch.save(m, buffer)
            buffer.seek(0)
            loaded = torch.load(buffer, weights_only=False)
            for (name, tensor), (_, loaded_tensor) in zip(
                m.state_dict().items(), loaded.state_dict().items(), strict=True
            ):
                self.assertEqual(loaded_tensor.device, tensor.device, msg=name)
                self.assertEqual(loaded_tensor, tensor, msg=name)

    # Parameters moved to the device live in device storage and keep their values.
    @modules(module_db, allowed_dtypes=(torch.float32,))
    def test_embedded_to_device(self, device, dtype, module_info, training):
        if module_info.is_lazy:
            self.skipTest("lazy modules have no parameters before their first forward")
        for module_input in self._module_inputs(module_info, "cpu", dtype, training):
            m = self._build(module_info, module_input, "cpu", dtype, training)
            expected = {name: p.clone() for name, p in m.named_parameters()}
            m.to(device)
            for name, p in m.named_parameters():
                self.assertEqual(p.device.type, torch.device(device).type, msg=name)
                self.assertEqual(p.untyped_storage().device, p.device, msg=name)
                self.assertEqual(p, expected[name], exact_device=False, msg=name)


instantiate_device_type_tests(TestModule, globals())

if __name__ == "__main__":
    run_tests()
