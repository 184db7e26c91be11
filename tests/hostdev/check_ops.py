"""Runs every yirage op on the hostdev device and prints what happened as JSON (tests/test_privateuse1.py reads
it; run in a fresh process, since the device renames PrivateUse1 for the whole process).

Per case: the forward on hostdev against the float64 reference, gradients through AutogradPrivateUse1 against
the reference gradients, and opcheck on the device. Around all cases: which yirage ops ran (the profiler) and
which ops the device's CPU fallback ran (its log), which tell the PrivateUse1 kernel from the CPU kernel.
"""
import json
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # tests/: _helpers, hostdev

import hostdev  # noqa: E402

hostdev.load()  # before yirage_ext: as a vendor's device extension would be (either order works)

import torch  # noqa: E402
from torch.library import opcheck  # noqa: E402

import yirage_ext as yr  # noqa: E402
from yirage_ext.testing import inputs, reference as ref  # noqa: E402
from _helpers import assert_grad_close, reference_grads  # noqa: E402

DEV = hostdev.NAME
OPS = torch.ops.yirage
# opcheck's autograd registration check knows only CPU/CUDA/XPU tensors ("NYI devices other than ..."); the
# Autograd kernels are checked here by running backward on the device instead.
OPCHECK_UTILS = ("test_schema", "test_faketensor", "test_aot_dispatch_dynamic")


def case(name, op, reference, tensors, kwargs=None, *, grad=True, gemm_k=None):
    """op(*tensors, **kwargs) on hostdev vs reference(*tensors in float64, **kwargs); then backward with random
    output gradients vs the reference's; then opcheck. Tensors are made on hostdev by the input factories."""
    kwargs = kwargs or {}
    leaves = [t.detach().requires_grad_(grad and t.is_floating_point()) if t is not None else None for t in tensors]
    outs = op(*leaves, **kwargs)
    outs = tuple(outs) if isinstance(outs, (tuple, list)) else (outs,)
    expected = reference(*[t.cpu().double() if t is not None else None for t in tensors], **kwargs)
    expected = tuple(expected) if isinstance(expected, (tuple, list)) else (expected,)
    for i, (o, e) in enumerate(zip(outs, expected)):
        assert o.device.type == DEV, f"{name}: output {i} on {o.device}"
        if gemm_k:
            ref.assert_gemm_close(o.cpu(), e, gemm_k, torch.float32, msg=f"{name} output {i}")
        else:
            ref.assert_close(o.cpu(), e, torch.float32, msg=f"{name} output {i}")
    if grad:
        assert "NotImplemented" not in outs[0].grad_fn.name(), f"{name}: no derivative ({outs[0].grad_fn.name()})"
        gen = torch.Generator().manual_seed(1)
        grads = [torch.randn(o.shape, generator=gen) for o in outs]
        torch.autograd.backward(list(outs), [g.to(DEV) for g in grads])
        cpu_leaves = [t.cpu().requires_grad_(t.requires_grad) if t is not None else None for t in leaves]
        expected_grads = reference_grads(lambda *a: reference(*a, **kwargs), cpu_leaves, grads)
        for i, (t, e) in enumerate(zip(leaves, expected_grads)):
            if t is None or not t.requires_grad:
                continue
            assert t.grad is not None and t.grad.device.type == DEV, f"{name}: input {i} has no grad on {DEV}"
            scale = max(1.0, (gemm_k or 1) ** 0.5 / 8)  # GEMM gradients are K-term sums
            assert_grad_close(t.grad.cpu() / scale, e / scale, torch.float32, f"{name} grad of input {i}")
    opcheck(op.default, tuple(leaves), kwargs, test_utils=OPCHECK_UTILS)


def cases():
    rms = inputs.rms_norm_inputs((5, 67), device=DEV, layout="strided")
    yield "rms_norm", lambda: case("rms_norm", OPS.rms_norm, ref.rms_norm_ref, [rms.x, rms.weight])
    yield "fused_add_rms_norm", lambda: case("fused_add_rms_norm", OPS.fused_add_rms_norm,
                                             ref.fused_add_rms_norm_ref, [rms.x, rms.residual, rms.weight])
    ln = inputs.layer_norm_inputs((3, 4, 33), device=DEV)
    yield "layer_norm", lambda: case("layer_norm", OPS.layer_norm, ref.layer_norm_ref, [ln.x, ln.weight, ln.bias])
    sm = inputs.softmax_inputs((4, 6, 19), device=DEV, layout="strided")
    yield "softmax", lambda: case("softmax", OPS.softmax, ref.softmax_ref, [sm], {"dim": 1})
    yield "log_softmax", lambda: case("log_softmax", OPS.log_softmax, ref.log_softmax_ref, [sm])
    act = inputs.activation_inputs((3, 5, 2 * 37), device=DEV, layout="broadcast")
    yield "silu_and_mul", lambda: case("silu_and_mul", OPS.silu_and_mul, ref.silu_and_mul_ref, [act])
    for approximate in ("none", "tanh"):
        yield f"gelu_and_mul[{approximate}]", lambda a=approximate: case(
            "gelu_and_mul", OPS.gelu_and_mul, ref.gelu_and_mul_ref, [act], {"approximate": a})
        yield f"gelu[{approximate}]", lambda a=approximate: case(
            "gelu", OPS.gelu, ref.gelu_ref, [act], {"approximate": a})
    for interleaved in (False, True):
        rot = inputs.rotary_embedding_inputs((2, 7, 4, 16), kv_heads=2, rot_dim=12, device=DEV, layout="qkv")
        yield f"rotary_embedding[interleaved={interleaved}]", lambda r=rot, i=interleaved: case(
            "rotary_embedding", OPS.rotary_embedding, ref.rotary_embedding_ref, [r.q, r.k, r.cos, r.sin],
            {"interleaved": i})
    mm = inputs.matmul_inputs((2, 9, 40), (1, 40, 11), device=DEV, layout="transposed")
    yield "matmul", lambda: case("matmul", OPS.matmul, ref.matmul_ref, [mm.a, mm.b], gemm_k=40)
    for activation in ref.ACTIVATIONS:
        lin = inputs.linear_inputs((2, 5, 24), 13, device=DEV)
        yield f"linear[{activation}]", lambda li=lin, a=activation: case(
            "linear", OPS.linear, ref.linear_ref, [li.x, li.weight, li.bias], {"activation": a}, gemm_k=24)
    for causal in (False, True):
        at = inputs.attention_inputs(2, 4, 2, 5, 7, 16, device=DEV, causal=causal)
        yield f"attention[causal={causal}]", lambda a=at: case(
            "attention", OPS.attention, ref.attention_ref, [a.q, a.k, a.v], {"causal": a.causal, "scale": a.scale})


def vendor_kernel() -> dict:
    """What USAGE_GUIDE tells a vendor to do for a native kernel of one op: register it for the op's schema at
    PrivateUse1 (here from Python, torch.library.impl); ours stay. Run last: it replaces rms_norm's kernel."""
    calls = []

    @torch.library.impl("yirage::rms_norm", "PrivateUse1")
    def vendor_rms_norm(x, weight=None, eps=1e-6):
        calls.append(x.shape)
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
        return (y * weight if weight is not None else y).to(x.dtype)

    x = inputs.rms_norm_inputs((4, 32), device=DEV)
    leaf = x.x.detach().requires_grad_(True)
    out = OPS.rms_norm(leaf, x.weight, x.eps)
    out.sum().backward()  # the Autograd kernel and the portable rms_norm_backward still serve the gradient
    expected = reference_grads(lambda t: ref.rms_norm_ref(t, x.weight.cpu().double(), x.eps),
                               [leaf.detach().cpu().requires_grad_(True)], [torch.ones(out.shape)])[0]
    info = yr.get_backend_info(DEV)
    return {"calls": len(calls),
            "matches": bool(torch.allclose(out.detach().cpu().double(), ref.rms_norm_ref(
                x.x.cpu().double(), x.weight.cpu().double(), x.eps), atol=1e-5, rtol=1e-5)),
            "grad_matches": bool(torch.allclose(leaf.grad.cpu().double(), expected, atol=1e-4, rtol=1e-4)),
            "ops": {op: info["ops"][op] for op in ("rms_norm", "rms_norm_backward", "softmax")},
            "path": info["op_paths"]["rms_norm"]["path"]}


def main():
    results = {}
    hostdev.clear_fallback_ops()
    with torch.autograd.profiler.profile() as prof:
        for name, run in cases():
            try:
                run()
                results[name] = "ok"
            except Exception:  # reported per case, the other cases still run
                results[name] = traceback.format_exc()
    fallback = hostdev.fallback_ops()
    # The control: an op with only a CPU kernel, run on hostdev, goes through the fallback and is logged.
    hostdev.clear_fallback_ops()
    control = torch.ops.hostdev.cpu_only(torch.ones(3, device=DEV))
    control_log = hostdev.fallback_ops()
    info = yr.get_backend_info(DEV)
    report = {
        "results": results,
        "yirage_ops_run": sorted({e.name.split("::", 1)[1] for e in prof.function_events
                                  if e.name.startswith("yirage::")}),
        "fallback_ops": sorted(set(fallback)),
        "control": {"fallback_ops": control_log, "device": str(control.device),
                    "value": control.cpu().tolist()},
        "backend_info": {k: v for k, v in info.items() if k not in ("dtypes",)},
        "privateuseone_name": yr.get_backend_info("privateuseone")["name"],
        "available_backends": yr.get_available_backends(),
        "default_backend": yr.get_default_backend(),
        "device_for": str(yr.backends.device_for(DEV)),
        "op_table_pu1": {op: row["PrivateUse1"] for op, row in yr.backends.op_table().items()},
        # where each op's AutogradPrivateUse1 kernel comes from (the Autograd alias key fills it, so
        # _dispatch_has_kernel_for_dispatch_key, which sees direct registrations only, says False)
        "autograd_pu1": {op: next((line.split(":", 1)[1].strip() for line in
                                   torch._C._dispatch_dump_table(f"yirage::{op}").splitlines()
                                   if line.startswith("AutogradPrivateUse1:")), "")
                         for op in yr.backends.op_table()},
        "torch_device_count": torch.hostdev.device_count(),
    }
    report["vendor_kernel"] = vendor_kernel()  # last: it replaces rms_norm's PrivateUse1 kernel
    print(json.dumps(report, default=str))


if __name__ == "__main__":
    main()
