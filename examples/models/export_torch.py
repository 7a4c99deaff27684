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
* ``lstm``: an LSTM cell written by hand (Linear, ``chunk`` into gates, sigmoid/tanh) over 3 steps;

and common vision and language blocks written as their reference implementations write them:

* ``mobilenet``: two inverted-residual blocks as torchvision writes them: MobileNetV3's (1x1
  expand, BatchNorm, Hardswish, depthwise 3x3, BatchNorm, Hardswish, squeeze-excite with
  ``AdaptiveAvgPool2d(1)``, 1x1 Conv, ReLU, 1x1 Conv, Hardsigmoid, 1x1 project, BatchNorm,
  residual) and MobileNetV2's (the same with ReLU6 and no squeeze-excite), 16 channels, 14x14;
* ``resnet``: a ResNet stem (7x7 stride-2 Conv, BatchNorm, ReLU, 3x3 stride-2 MaxPool2d) and two
  basic blocks, the second downsampling (stride 2, 1x1 Conv + BatchNorm shortcut), on 32x32;
* ``gpt2``: a GPT-2 block as nanoGPT writes it: pre-LayerNorm, one packed ``c_attn`` Linear
  split into q, k, v, heads by ``view``/``transpose``, a causal mask from a registered ``tril``
  buffer applied with ``masked_fill(-inf)``, softmax, ``c_proj``, tanh-GELU MLP, residuals;
  width 64, 4 heads, sequence 16;
* ``bert_layer``: ``nn.TransformerEncoderLayer(64, 4, 256, batch_first=True)`` (post-norm, ReLU)
  in an ``nn.TransformerEncoder``, sequence 16;
* ``unet_up``: a UNet up block as the common PyTorch UNet writes it: bilinear ``nn.Upsample``
  (``align_corners=True``) of the deep features, ``F.pad`` to the skip's size (pads computed from
  the sizes), ``torch.cat`` with the skip connection, then two
  (3x3 Conv, BatchNorm, ReLU); two inputs, ``x`` ``[1, 32, 8, 8]`` and ``skip`` ``[1, 16, 16, 16]``.

The files are checked in (``tests/test_onnx_torch.py`` runs them without torch), so the bytes
depend on the torch version that wrote them; regenerate with torch 2.13.0.  ``--check`` also runs
``polyfuse.apps.onnx_run.fuse_onnx(path, verify=True)`` on each file and prints launches before/after.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

HERE = Path(__file__).resolve().parent
#: opset of the TorchScript exporter (the dynamo exporter uses its own default, 18 or later)
TS_OPSET = 17
#: graph input names, in the order of forward's arguments
INPUT_NAMES = ["x", "skip"]


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


class SqueezeExcitation(nn.Module):
    """torchvision.ops.SqueezeExcitation with MobileNetV3's Hardsigmoid scale."""

    def __init__(self, channels: int, squeeze: int):
        super().__init__()
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeeze, 1)
        self.fc2 = nn.Conv2d(squeeze, channels, 1)
        self.activation = nn.ReLU()
        self.scale_activation = nn.Hardsigmoid()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scale = self.scale_activation(self.fc2(self.activation(self.fc1(self.avgpool(x)))))
        return scale * x


def conv_bn_act(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1,
                act: type[nn.Module] | None = nn.ReLU) -> nn.Sequential:
    """torchvision's Conv2dNormActivation: Conv2d without bias, BatchNorm2d, activation."""
    layers: list[nn.Module] = [nn.Conv2d(cin, cout, kernel, stride, (kernel - 1) // 2,
                                         groups=groups, bias=False), nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


class InvertedResidual(nn.Module):
    """MobileNetV2/V3's block as torchvision writes it (stride 1, so with the residual)."""

    def __init__(self, channels: int, expanded: int, act: type[nn.Module], se: bool):
        super().__init__()
        layers = [conv_bn_act(channels, expanded, 1, act=act),
                  conv_bn_act(expanded, expanded, 3, groups=expanded, act=act)]
        if se:  # torchvision: _make_divisible(expanded // 4, 8)
            layers.append(SqueezeExcitation(expanded, max(8, expanded // 4)))
        layers.append(conv_bn_act(expanded, channels, 1, act=None))
        self.block = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


class BasicBlock(nn.Module):
    """torchvision.models.resnet.BasicBlock."""

    def __init__(self, cin: int, cout: int, stride: int = 1):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class ResNetStem(nn.Module):
    def __init__(self, width: int = 16):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        self.layer1 = BasicBlock(width, width)
        self.layer2 = BasicBlock(width, 2 * width, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        return self.layer2(self.layer1(x))


class CausalSelfAttention(nn.Module):
    """nanoGPT's: one packed projection, a ``tril`` buffer as the mask."""

    def __init__(self, n_embd: int, n_head: int, block_size: int):
        super().__init__()
        self.n_head, self.n_embd = n_head, n_embd
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)
        self.register_buffer("bias", torch.tril(torch.ones(block_size, block_size))
                             .view(1, 1, block_size, block_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
        att = torch.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class GPT2Block(nn.Module):
    def __init__(self, n_embd: int = 64, n_head: int = 4, block_size: int = 16):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd)
        self.attn = CausalSelfAttention(n_embd, n_head, block_size)
        self.ln_2 = nn.LayerNorm(n_embd)
        self.mlp = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.GELU(approximate="tanh"),
                                 nn.Linear(4 * n_embd, n_embd))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class TextEncoder(nn.Module):
    """One ``nn.TransformerEncoderLayer`` in an ``nn.TransformerEncoder``, as a model holds it.

    The bare layer does not export with TorchScript: the exporter passes the layer's unset
    ``is_causal=False`` as a tensor, and ``scaled_dot_product_attention`` refuses it."""

    def __init__(self, width: int = 64, heads: int = 4, ffn: int = 256):
        super().__init__()
        layer = nn.TransformerEncoderLayer(width, heads, ffn, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)


class UNetUp(nn.Module):
    """The up block of the common PyTorch UNet: upsample, pad to the skip's size, cat, conv."""

    def __init__(self, cin: int = 32, cskip: int = 16, cout: int = 16):
        super().__init__()
        self.up = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
        self.conv = nn.Sequential(conv_bn_act(cin + cskip, cout, 3), conv_bn_act(cout, cout, 3))

    def forward(self, x: torch.Tensor, skip: torch.Tensor) -> torch.Tensor:
        x = self.up(x)
        dy, dx = skip.size()[2] - x.size()[2], skip.size()[3] - x.size()[3]
        x = F.pad(x, [dx // 2, dx - dx // 2, dy // 2, dy - dy // 2])
        return self.conv(torch.cat([skip, x], dim=1))


def models() -> dict[str, tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    """name -> (module in eval mode with seeded weights, example inputs)."""
    out = {}
    specs: dict[str, tuple[Callable[[], nn.Module], tuple[tuple[int, ...], ...]]] = {
        "attention": (SelfAttention, ((1, 8, 32),)),
        "causal_attention": (lambda: SelfAttention(causal=True), ((1, 8, 32),)),
        "mlp": (MLP, ((2, 8, 32),)),
        "conv": (ConvBlock, ((1, 8, 8, 8),)),
        "lstm": (HandLSTM, ((3, 4, 8),)),
        "mobilenet": (lambda: nn.Sequential(InvertedResidual(16, 64, nn.Hardswish, se=True),
                                            InvertedResidual(16, 48, nn.ReLU6, se=False)),
                      ((1, 16, 14, 14),)),
        "resnet": (ResNetStem, ((1, 3, 32, 32),)),
        "gpt2": (GPT2Block, ((1, 16, 64),)),
        "bert_layer": (TextEncoder, ((1, 16, 64),)),
        "unet_up": (UNetUp, ((1, 32, 8, 8), (1, 16, 16, 16))),
    }
    for i, (name, (cls, shapes)) in enumerate(specs.items()):
        torch.manual_seed(i)
        module = cls()
        for bn in (m for m in module.modules() if isinstance(m, nn.BatchNorm2d)):
            with torch.no_grad():  # non-trivial running statistics
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 1.5)
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.5, 0.5)
        out[name] = (module.eval(), tuple(torch.randn(*shape) for shape in shapes))
    return out


def export(module: nn.Module, xs: tuple[torch.Tensor, ...], path: Path, dynamo: bool) -> None:
    names = INPUT_NAMES[:len(xs)]
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if dynamo:
            torch.onnx.export(module, xs, str(path), dynamo=True, input_names=names,
                              output_names=["y"], external_data=False, verbose=False)
        else:
            # In eval mode without grad, nn.TransformerEncoderLayer takes its fused fast path
            # (aten::_transformer_encoder_layer_fwd), which TorchScript cannot export; PyTorch's
            # switch for it makes the layer run (and export) its modules one by one.
            fastpath = torch.backends.mha.get_fastpath_enabled()
            torch.backends.mha.set_fastpath_enabled(False)
            try:
                torch.onnx.export(module, xs, str(path), dynamo=False, input_names=names,
                                  output_names=["y"], opset_version=TS_OPSET,
                                  do_constant_folding=True)
            finally:
                torch.backends.mha.set_fastpath_enabled(fastpath)


def main(argv: list[str]) -> int:
    check = "--check" in argv
    args = [a for a in argv if a != "--check"]
    out_dir = Path(args[0]) if args else HERE
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, (module, xs) in models().items():
        for exporter, dynamo in (("ts", False), ("dynamo", True)):
            path = out_dir / f"torch_{name}_{exporter}.onnx"
            export(module, xs, path, dynamo)
            paths.append(path)
            print(f"wrote {path} ({path.stat().st_size} bytes)")
    if check:
        import onnx

        from polyfuse.apps.onnx_run import fuse_onnx

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
