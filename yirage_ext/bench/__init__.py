"""Comparison framework: which implementation of each op is right, and which is fastest, on this machine.

    python -m yirage_ext.bench [--ops ...] [--device ...] [--dtype ...] [--providers ...] [--shapes ...]
        [--backward] [--csv FILE] [--plot FILE]

    rows = yirage_ext.bench.run(ops=["rms_norm"], device="cpu")   # list of Result

Modules: cases (the ops: inputs, references, eager code, bytes/FLOPs), providers (the registry),
accuracy (the checker), profiler (timing and rooflines), runner (one provider on one case), api (`run`),
report (table, CSV, Markdown, PNG), cli."""
import yirage_ext as _yirage_ext  # noqa: F401  (registers torch.ops.yirage.*)

from .accuracy import Accuracy, compare
from .api import run
from .cases import OPS, OpSpec
from .providers import PROVIDERS, Provider, Unsupported, add_impl, register
from .runner import Result

__all__ = ["run", "Result", "OPS", "OpSpec", "PROVIDERS", "Provider", "register", "add_impl", "Unsupported",
           "Accuracy", "compare"]
