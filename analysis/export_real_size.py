"""Export the real-size PyTorch blocks :mod:`analysis.real_size` measures (a dev tool: polyfuse
never needs torch).

    PYTHONPATH=/path/to/torch .venv/bin/python analysis/export_real_size.py [OUT_DIR]

Writes ``OUT_DIR/<model>.onnx`` (default ``out/real_size``, ignored by git: the files hold
real-size weights, 0.1-340 MB) with the TorchScript exporter (``dynamo=False``, opset 17),
float32, static shapes, batch 1, seeded random weights, every module in eval mode:

* ``bert_layer``: one BERT-base encoder layer as Hugging Face writes it (d 768, 12 heads of 64,
  FFN 3072, exact GELU, post-LayerNorm), sequence 128;
* ``bert_12``: twelve of them;
* ``gpt2_mlp``: a GPT-2 MLP block (LayerNorm, Linear 768->3072, tanh-GELU, Linear 3072->768,
  residual), 256 tokens;
* ``resnet_bottleneck``: a ResNet-50 bottleneck (1x1 256->64, 3x3 64->64, 1x1 64->256, each with
  BatchNorm, ReLU, identity residual), 56x56;
* ``mobilenet_block``: a MobileNetV2 inverted residual (1x1 expand 32->192, BatchNorm, ReLU6,
  depthwise 3x3, BatchNorm, ReLU6, 1x1 project 192->32, BatchNorm, residual), 56x56;
* ``resnet_downsample``: the first block of ResNet-50's second stage (1x1 256->128, 3x3
  128->128 at stride 2, 1x1 128->512, and a 1x1 stride-2 256->512 projection shortcut), 56x56;
* ``mobilenet_downsample``: a MobileNetV2 block at stride 2 (expand 24->144, depthwise 3x3
  stride 2, project 144->32, no residual), 56x56;
* ``resnet_stage2``, ``resnet_stage3`` and ``resnet_stage4``: ResNet-50 bottlenecks of its
  second, third and fourth stages (512->128->128->512 at 28x28, 1024->256->256->1024 at
  14x14, 2048->512->512->2048 at 7x7), ``resnet_stem`` (7x7 Conv at stride 2, MaxPool, at
  224x224) and ``gpt2_block`` (a whole GPT-2 block, causal attention and MLP, 256 tokens):
  not exported unless named.

    PYTHONPATH=... .venv/bin/python analysis/export_real_size.py OUT_DIR NAME...

exports only the models named.
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

ROOT = Path(__file__).resolve().parent.parent
OPSET = 17


class BertLayer(nn.Module):
    """Self-attention (separate q/k/v Linear layers, heads by view/permute), output Linear,
    residual and LayerNorm, then the FFN with exact GELU, residual and LayerNorm."""

    def __init__(self, d: int = 768, heads: int = 12, ffn: int = 3072):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.q, self.k, self.v, self.o = (nn.Linear(d, d) for _ in range(4))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, ffn), nn.Linear(ffn, d)

    def split(self, t: torch.Tensor) -> torch.Tensor:
        b, s, _ = t.shape
        return t.view(b, s, self.heads, self.dh).permute(0, 2, 1, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.split(self.q(x)), self.split(self.k(x)), self.split(self.v(x))
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dh), dim=-1)
        ctx = (p @ v).permute(0, 2, 1, 3).reshape(b, s, d)
        h = self.ln1(x + self.o(ctx))
        return self.ln2(h + self.fc2(F.gelu(self.fc1(h))))


class GPT2MLP(nn.Module):
    def __init__(self, d: int = 768, ffn: int = 3072):
        super().__init__()
        self.ln, self.fc, self.proj = nn.LayerNorm(d), nn.Linear(d, ffn), nn.Linear(ffn, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.proj(F.gelu(self.fc(self.ln(x)), approximate="tanh"))


class GPT2Block(nn.Module):
    """A GPT-2 block as Hugging Face writes it: LayerNorm, one Linear for q, k and v, causal
    attention with the mask added before the softmax, output Linear, residual; then
    :class:`GPT2MLP` (with its own LayerNorm and residual)."""

    def __init__(self, d: int = 768, heads: int = 12, seq: int = 256):
        super().__init__()
        self.heads, self.dh = heads, d // heads
        self.ln, self.qkv, self.o = nn.LayerNorm(d), nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.mlp = GPT2MLP(d)
        mask = torch.full((seq, seq), float("-inf")).triu(1)
        self.register_buffer("mask", mask.view(1, 1, seq, seq))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.ln(x)).split(d, dim=2)
        q, k, v = (t.view(b, s, self.heads, self.dh).transpose(1, 2) for t in (q, k, v))
        p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(self.dh) + self.mask, dim=-1)
        x = x + self.o((p @ v).transpose(1, 2).reshape(b, s, d))
        return self.mlp(x)


class ResNetStem(nn.Module):
    """ResNet's stem: the 7x7 Conv at stride 2 with its BatchNorm and ReLU, then MaxPool 3x3
    at stride 2."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = conv_bn(3, 64, 7, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(F.relu(self.conv(x)), 3, stride=2, padding=1)


def conv_bn(cin: int, cout: int, k: int, groups: int = 1, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride=stride, padding=k // 2, groups=groups,
                                   bias=False), nn.BatchNorm2d(cout))


class Bottleneck(nn.Module):
    def __init__(self, c: int = 256, mid: int = 64):
        super().__init__()
        self.a, self.b, self.c = conv_bn(c, mid, 1), conv_bn(mid, mid, 3), conv_bn(mid, c, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.a(x))
        y = F.relu(self.b(y))
        return F.relu(x + self.c(y))


class DownsampleBottleneck(nn.Module):
    """The first block of ResNet-50's second stage: the 3x3 Conv at stride 2 and a 1x1 stride-2
    projection on the shortcut."""

    def __init__(self, c: int = 256, mid: int = 128, out: int = 512):
        super().__init__()
        self.a, self.b = conv_bn(c, mid, 1), conv_bn(mid, mid, 3, stride=2)
        self.c, self.short = conv_bn(mid, out, 1), conv_bn(c, out, 1, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.a(x))
        y = F.relu(self.b(y))
        return F.relu(self.short(x) + self.c(y))


class InvertedResidual(nn.Module):
    """MobileNetV2's block; at stride 2 (or other widths) without the residual, as in the
    network."""

    def __init__(self, c: int = 32, expand: int = 6, stride: int = 1, out: int = 0):
        super().__init__()
        e, out = c * expand, out or c
        self.expand, self.dw = conv_bn(c, e, 1), conv_bn(e, e, 3, e, stride=stride)
        self.project = conv_bn(e, out, 1)
        self.residual = stride == 1 and out == c

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu6(self.expand(x))
        y = F.relu6(self.dw(y))
        return x + self.project(y) if self.residual else self.project(y)


#: name -> (module factory, input shape)
MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "bert_layer": (BertLayer, (1, 128, 768)),
    "bert_12": (lambda: nn.Sequential(*(BertLayer() for _ in range(12))), (1, 128, 768)),
    "gpt2_mlp": (GPT2MLP, (1, 256, 768)),
    "resnet_bottleneck": (Bottleneck, (1, 256, 56, 56)),
    "mobilenet_block": (InvertedResidual, (1, 32, 56, 56)),
    "resnet_downsample": (DownsampleBottleneck, (1, 256, 56, 56)),
    "mobilenet_downsample": (lambda: InvertedResidual(24, stride=2, out=32), (1, 24, 56, 56)),
    "resnet_stage2": (lambda: Bottleneck(512, 128), (1, 512, 28, 28)),
    "resnet_stage3": (lambda: Bottleneck(1024, 256), (1, 1024, 14, 14)),
    "resnet_stage4": (lambda: Bottleneck(2048, 512), (1, 2048, 7, 7)),
    "resnet_stem": (ResNetStem, (1, 3, 224, 224)),
    "gpt2_block": (GPT2Block, (1, 256, 768)),
}

#: exported only when named
ON_REQUEST = ("resnet_stage2", "resnet_stage3", "resnet_stage4", "resnet_stem", "gpt2_block")


def randomize_norms(module: nn.Module, gen: torch.Generator) -> None:
    """BatchNorm statistics and affine parameters away from the identity, so a wrong fold or
    a skipped normalization shows in the outputs."""
    for m in module.modules():
        if isinstance(m, (nn.BatchNorm2d, nn.LayerNorm)):
            with torch.no_grad():
                m.weight.copy_(1 + 0.1 * torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(0.1 * torch.randn(m.bias.shape, generator=gen))
                if isinstance(m, nn.BatchNorm2d):
                    m.running_mean.copy_(0.1 * torch.randn(m.running_mean.shape, generator=gen))
                    m.running_var.copy_(1 + 0.1 * torch.rand(m.running_var.shape, generator=gen))


def export(name: str, out_dir: Path) -> Path:
    factory, shape = MODELS[name]
    torch.manual_seed(0)
    model = factory().eval()
    randomize_norms(model, torch.Generator().manual_seed(1))
    x = torch.randn(shape, generator=torch.Generator().manual_seed(2))
    path = out_dir / f"{name}.onnx"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(model, (x,), str(path), input_names=["x"], output_names=["y"],
                          opset_version=OPSET, dynamo=False)
    return path


def main(argv: list[str]) -> int:
    out_dir = Path(argv[0]) if argv else ROOT / "out" / "real_size"
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in argv[1:] or [m for m in MODELS if m not in ON_REQUEST]:
        path = export(name, out_dir)
        print(f"{path} ({path.stat().st_size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
