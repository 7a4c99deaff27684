"""Export small PyTorch models with both ONNX exporters (a dev tool: polyfuse never needs torch).

    pip install torch==2.13.0 onnxscript     # onnxscript: the dynamo exporter needs it
    .venv/bin/python examples/models/export_torch.py [OUT_DIR] [--check]

Writes ``torch_<model>_<exporter>.onnx`` (exporter ``ts``: TorchScript, ``dynamo=False``;
``dynamo``: ``torch.export`` based, ``dynamo=True``) next to this script, or into OUT_DIR.  The
models are what users batch-fuse, at tiny sizes (float32, static shapes, a few KB each):

* ``attention``: a BERT-style self-attention block (Linear q/k/v, heads split with
  ``view``/``permute`` from ``x.shape``, scaled ``q @ k^T``, softmax, ``@ v``, output Linear,
  residual, LayerNorm);
* ``causal_attention``: the same with a decoder's causal mask computed in the graph
  (``arange``, comparison, ``triu``, ``expand``, ``masked_fill``);
* ``mlp``: Linear, exact GELU, Linear, LayerNorm;
* ``conv``: a pre-activation residual block: BatchNorm2d (eval mode), ReLU, grouped Conv2d,
  BatchNorm2d, ReLU, residual add;
* ``lstm``: an LSTM cell written by hand (Linear, ``chunk`` into gates, sigmoid/tanh) over 3 steps.

The files are checked in (``tests/test_onnx_torch.py`` runs them without torch), so the bytes
depend on the torch version that wrote them; regenerate with torch 2.13.0.  ``--check`` also runs
``polyfuse.onnx_run.fuse_onnx(path, verify=True)`` on each file and prints launches before/after.
"""

from __future__ import annotations

import math
import sys
import warnings
from pathlib import Path

import torch
from torch import nn

HERE = Path(__file__).resolve().parent
#: opset of the TorchScript exporter (the dynamo exporter uses its own default, 18 or later)
TS_OPSET = 17


class SelfAttention(nn.Module):
    def __init__(self, hidden: int = 32, heads: int = 2, causal: bool = False):
        super().__init__()
        self.heads, self.head_dim, self.causal = heads, hidden // heads, causal
        self.q = nn.Linear(hidden, hidden)
        self.k = nn.Linear(hidden, hidden)
        self.v = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, hidden)
        self.norm = nn.LayerNorm(hidden)

    def split(self, t: torch.Tensor) -> torch.Tensor:
        b, s, _ = t.shape
        return t.view(b, s, self.heads, self.head_dim).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, h = x.shape
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        scores = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(self.head_dim)
        if self.causal:  # a decoder's mask, built from the sequence length in the graph
            pos = torch.arange(s)
            future = pos.unsqueeze(0) > pos.unsqueeze(1)
            future = future | torch.ones(s, s, dtype=torch.bool).triu(s).expand(b, 1, s, s)
            scores = scores.masked_fill(future, torch.finfo(scores.dtype).min)
        probs = torch.softmax(scores, dim=-1)
        ctx = torch.matmul(probs, v).permute(0, 2, 1, 3).reshape(b, s, h)
        return self.norm(x + self.out(ctx))


class MLP(nn.Module):
    def __init__(self, hidden: int = 32, ffn: int = 64):
        super().__init__()
        self.fc1 = nn.Linear(hidden, ffn)
        self.act = nn.GELU()  # exact (erf) form
        self.fc2 = nn.Linear(ffn, hidden)
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.fc2(self.act(self.fc1(x))))


class ConvBlock(nn.Module):
    """Pre-activation residual block: the first BatchNorm reads the block input, so no exporter
    can fold it into a convolution; the second follows the grouped conv (foldable)."""

    def __init__(self, channels: int = 8, groups: int = 2):
        super().__init__()
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv = nn.Conv2d(channels, channels, 3, padding=1, groups=groups, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn2(self.conv(self.relu(self.bn1(x))))) + x


class HandLSTM(nn.Module):
    def __init__(self, inp: int = 8, hidden: int = 16, steps: int = 3):
        super().__init__()
        self.hidden, self.steps = hidden, steps
        self.ih = nn.Linear(inp, 4 * hidden)
        self.hh = nn.Linear(hidden, 4 * hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # x: [steps, batch, inp]
        h = torch.zeros(x.shape[1], self.hidden)
        c = torch.zeros(x.shape[1], self.hidden)
        outs = []
        for t in range(self.steps):
            gates = self.ih(x[t]) + self.hh(h)
            i, f, g, o = gates.chunk(4, dim=1)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
            outs.append(h)
        return torch.stack(outs)


def models() -> dict[str, tuple[nn.Module, torch.Tensor]]:
    """name -> (module in eval mode with seeded weights, example input)."""
    out = {}
    specs = {
        "attention": (SelfAttention, (1, 8, 32)),
        "causal_attention": (lambda: SelfAttention(causal=True), (1, 8, 32)),
        "mlp": (MLP, (2, 8, 32)),
        "conv": (ConvBlock, (1, 8, 8, 8)),
        "lstm": (HandLSTM, (3, 4, 8)),
    }
    for i, (name, (cls, shape)) in enumerate(specs.items()):
        torch.manual_seed(i)
        module = cls()
        for bn in (m for m in module.modules() if isinstance(m, nn.BatchNorm2d)):
            with torch.no_grad():  # non-trivial running statistics
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 1.5)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.5, 0.5)
        out[name] = (module.eval(), torch.randn(*shape))
    return out


def export(module: nn.Module, x: torch.Tensor, path: Path, dynamo: bool) -> None:
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if dynamo:
            torch.onnx.export(module, (x,), str(path), dynamo=True, input_names=["x"],
                              output_names=["y"], external_data=False, verbose=False)
        else:
            torch.onnx.export(module, (x,), str(path), dynamo=False, input_names=["x"],
                              output_names=["y"], opset_version=TS_OPSET,
                              do_constant_folding=True)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    out_dir = Path(args[0]) if args else HERE
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (module, x) in models().items():
        for exporter, dynamo in (("ts", False), ("dynamo", True)):
            path = out_dir / f"torch_{name}_{exporter}.onnx"
            export(module, x, path, dynamo)
            paths.append(path)
            print(f"wrote {path} ({path.stat().st_size} bytes)")
    if check:
        import onnx

        from polyfuse.onnx_run import fuse_onnx

        for path in paths:
            ops = len(onnx.load(str(path)).graph.node)
            try:
                res = fuse_onnx(path, verify=True)
            except Exception as err:  # report and go on: this is a survey
                print(f"{path.name}: FAILED {type(err).__name__}: {err}")
                continue
            print(f"{path.name}: {ops} ops, launches {res.plan.launches_before} -> "
                  f"{res.fused.launches_after}, verified {res.verified['ok']}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
