"""Small random-init PyTorch architectures exported to ONNX, for bench/arch_sweep.

    python models.py OUT [NAME ...]      # every model (or the named ones)

For each model NAME this writes
    OUT/NAME.onnx
    OUT/NAME_calib/NNN/<input>.npy      8 samples, seed 1
    OUT/NAME_eval/NNN/<input>.npy       8 samples, seed 2
Weights are random (torch.manual_seed(0)), BatchNorm statistics too (so that folding
them matters); nothing here was trained. Inputs: "normal" N(0,1), "uniform" U(0,1),
"intK" token ids in [0, K) or "mask" (int64 attention mask: 1 for a random prefix, then 0).
The Hugging Face models (HF_*) need `transformers` (venv.sh installs it); no download.
"""
import math
import os
import shutil
import sys
import warnings

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

N_SAMPLES = 8
SEED_EXPORT, SEED_CALIB, SEED_EVAL = 0, 1, 2


# ----------------------------------------------------------------- building blocks
class SE(nn.Module):
    def __init__(self, c, r=4):
        super().__init__()
        self.fc1 = nn.Conv2d(c, c // r, 1)
        self.fc2 = nn.Conv2d(c // r, c, 1)

    def forward(self, x):
        s = F.relu(self.fc1(F.adaptive_avg_pool2d(x, 1)))
        return x * F.hardsigmoid(self.fc2(s))


class MBBlock(nn.Module):
    """MobileNetV3 inverted residual: expand, depthwise, optional SE, project."""

    def __init__(self, cin, exp, cout, k, s, se, act):
        super().__init__()
        A = nn.Hardswish if act == "hs" else nn.ReLU
        self.use_res = s == 1 and cin == cout
        layers = [nn.Conv2d(cin, exp, 1, bias=False), nn.BatchNorm2d(exp), A(),
                  nn.Conv2d(exp, exp, k, s, k // 2, groups=exp, bias=False), nn.BatchNorm2d(exp), A()]
        if se:
            layers.append(SE(exp))
        layers += [nn.Conv2d(exp, cout, 1, bias=False), nn.BatchNorm2d(cout)]
        self.body = nn.Sequential(*layers)

    def forward(self, x):
        y = self.body(x)
        return x + y if self.use_res else y


class BasicBlock(nn.Module):
    def __init__(self, cin, cout, s):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, s, 1, bias=False)
        self.b1 = nn.BatchNorm2d(cout)
        self.c2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = nn.BatchNorm2d(cout)
        self.down = None
        if s != 1 or cin != cout:
            self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, s, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.b2(self.c2(F.relu(self.b1(self.c1(x)))))
        return F.relu(y + (x if self.down is None else self.down(x)))


class ConvNeXtBlock(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.dw = nn.Conv2d(d, d, 7, padding=3, groups=d)
        self.ln = nn.LayerNorm(d)
        self.pw1 = nn.Linear(d, 4 * d)
        self.pw2 = nn.Linear(4 * d, d)
        self.gamma = nn.Parameter(1e-1 * torch.ones(d))

    def forward(self, x):
        y = self.dw(x).permute(0, 2, 3, 1)
        y = self.pw2(F.gelu(self.pw1(self.ln(y))))
        return x + (self.gamma * y).permute(0, 3, 1, 2)


def conv_relu_x2(i, o):
    return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.ReLU(), nn.Conv2d(o, o, 3, padding=1), nn.ReLU())


class ViTBlock(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.n1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, h, batch_first=True)
        self.n2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x):
        y = self.n1(x)
        x = x + self.attn(y, y, y, need_weights=False)[0]
        return x + self.mlp(self.n2(x))


# ----------------------------------------------------------------- architectures
class MobileNetV3Small(nn.Module):
    """Hardswish/HardSigmoid, squeeze-excitation, depthwise convs, residuals."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1, bias=False), nn.BatchNorm2d(16), nn.Hardswish())
        cfg = [(16, 16, 16, 3, 2, True, "re"), (16, 72, 24, 3, 2, False, "re"), (24, 88, 24, 3, 1, False, "re"),
               (24, 96, 40, 5, 2, True, "hs"), (40, 240, 40, 5, 1, True, "hs"), (40, 120, 48, 5, 1, True, "hs"),
               (48, 288, 96, 5, 2, True, "hs")]
        self.blocks = nn.Sequential(*[MBBlock(*c) for c in cfg])
        self.last = nn.Sequential(nn.Conv2d(96, 576, 1, bias=False), nn.BatchNorm2d(576), nn.Hardswish())
        self.head = nn.Sequential(nn.Linear(576, 256), nn.Hardswish(), nn.Linear(256, 100))

    def forward(self, x):
        x = self.last(self.blocks(self.stem(x)))
        return self.head(F.adaptive_avg_pool2d(x, 1).flatten(1))


class ResNetSmall(nn.Module):
    """ResNet-18 layout at reduced width: 7x7 stem, max pool, basic blocks."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 7, 2, 3, bias=False), nn.BatchNorm2d(32), nn.ReLU(),
                                  nn.MaxPool2d(3, 2, 1))
        layers, cin = [], 32
        for i, c in enumerate([32, 64, 128, 192]):
            layers += [BasicBlock(cin, c, 1 if i == 0 else 2), BasicBlock(c, c, 1)]
            cin = c
        self.layers = nn.Sequential(*layers)
        self.fc = nn.Linear(192, 10)

    def forward(self, x):
        x = self.layers(self.stem(x))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class ConvNeXtSmall(nn.Module):
    """Patchify stem, 7x7 depthwise, LayerNorm over channels (permutes), GELU MLP, layer scale."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 48, 4, 4)
        self.ln0 = nn.LayerNorm(48)
        self.s1 = nn.Sequential(ConvNeXtBlock(48), ConvNeXtBlock(48))
        self.down = nn.Conv2d(48, 96, 2, 2)
        self.s2 = nn.Sequential(ConvNeXtBlock(96), ConvNeXtBlock(96))
        self.norm = nn.LayerNorm(96)
        self.head = nn.Linear(96, 10)

    def forward(self, x):
        x = self.ln0(self.stem(x).permute(0, 2, 3, 1)).permute(0, 3, 1, 2)
        x = self.s2(self.down(self.s1(x)))
        return self.head(self.norm(x.mean([2, 3])))


class UNetSmall(nn.Module):
    """Encoder/decoder with skip Concats, ConvTranspose, nearest and bilinear Resize."""

    def __init__(self):
        super().__init__()
        self.e1, self.e2, self.e3 = conv_relu_x2(3, 16), conv_relu_x2(16, 32), conv_relu_x2(32, 64)
        self.b = conv_relu_x2(64, 128)
        self.up3 = nn.ConvTranspose2d(128, 64, 2, 2)
        self.d3 = conv_relu_x2(128, 64)
        self.r2, self.d2 = nn.Conv2d(64, 32, 1), conv_relu_x2(64, 32)
        self.r1, self.d1 = nn.Conv2d(32, 16, 1), conv_relu_x2(32, 16)
        self.out = nn.Conv2d(16, 2, 1)

    def forward(self, x):
        e1 = self.e1(x)
        e2 = self.e2(F.max_pool2d(e1, 2))
        e3 = self.e3(F.max_pool2d(e2, 2))
        b = self.b(F.max_pool2d(e3, 2))
        d3 = self.d3(torch.cat([self.up3(b), e3], 1))
        d2 = F.interpolate(self.r2(d3), scale_factor=2, mode="nearest")
        d2 = self.d2(torch.cat([d2, e2], 1))
        d1 = F.interpolate(self.r1(d2), scale_factor=2, mode="bilinear", align_corners=False)
        return self.out(self.d1(torch.cat([d1, e1], 1)))


class TransformerEncoder(nn.Module):
    """Embedding (Gather) + nn.TransformerEncoder. Its layers are deep copies of one layer,
    so they start with equal weights: the TorchScript exporter shares those initializers
    through Identity nodes."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(1000, 64)
        self.pos = nn.Parameter(torch.randn(1, 32, 64) * 0.02)
        layer = nn.TransformerEncoderLayer(64, 4, 128, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(64, 5)

    def forward(self, ids):
        return self.head(self.enc(self.emb(ids) + self.pos).mean(1))


class TransformerEncoderUnshared(TransformerEncoder):
    """The same, each layer re-initialized: no initializer shared across layers."""

    def __init__(self):
        super().__init__()
        for layer in self.enc.layers:
            for p in layer.parameters():
                if p.dim() > 1:
                    nn.init.xavier_uniform_(p)
                else:
                    nn.init.normal_(p, std=0.02)


class RNNNet(nn.Module):
    """Two stacked recurrent layers (cell: nn.GRU or nn.LSTM), the last step into a Linear."""

    def __init__(self, cell):
        super().__init__()
        self.rnn = cell(20, 64, num_layers=2, batch_first=True)
        self.fc = nn.Linear(64, 8)

    def forward(self, x):
        return self.fc(self.rnn(x)[0][:, -1])


class Audio1D(nn.Module):
    """1-D CNN on a raw waveform: strided Conv1d + BatchNorm1d + ReLU."""

    def __init__(self):
        super().__init__()
        ch, layers = [1, 16, 32, 64, 64, 128], []
        for i in range(5):
            k, s, p = (9, 4, 4) if i == 0 else (3, 2, 1)
            layers += [nn.Conv1d(ch[i], ch[i + 1], k, s, p), nn.BatchNorm1d(ch[i + 1]), nn.ReLU()]
        self.f = nn.Sequential(*layers)
        self.fc = nn.Linear(128, 12)

    def forward(self, x):
        return self.fc(self.f(x).mean(-1))


class TwoInTwoOut(nn.Module):
    """An image branch and a vector branch joined by Concat; two heads."""

    def __init__(self):
        super().__init__()
        self.c = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU(),
                               nn.AdaptiveAvgPool2d(4))
        self.v = nn.Sequential(nn.Linear(10, 32), nn.ReLU())
        self.h1 = nn.Linear(32 * 16 + 32, 5)
        self.h2 = nn.Linear(32 * 16 + 32, 1)

    def forward(self, img, vec):
        z = torch.cat([self.c(img).flatten(1), self.v(vec)], 1)
        return self.h1(z), self.h2(z)


class Heads(nn.Module):
    """ReLU6 (Clip), PReLU, LeakyReLU; Softmax, Sigmoid and Tanh outputs."""

    def __init__(self):
        super().__init__()
        self.c1, self.a1 = nn.Conv2d(3, 16, 3, 1, 1), nn.ReLU6()
        self.c2, self.a2 = nn.Conv2d(16, 32, 3, 2, 1), nn.PReLU(32)
        self.c3, self.a3 = nn.Conv2d(32, 32, 3, 2, 1), nn.LeakyReLU(0.1)
        self.fc = nn.Linear(32, 10)
        self.box = nn.Conv2d(32, 4, 1)

    def forward(self, x):
        x = self.a3(self.c3(self.a2(self.c2(self.a1(self.c1(x))))))
        cls = torch.softmax(self.fc(x.mean([2, 3])), -1)
        return cls, torch.sigmoid(self.box(x)), torch.tanh(self.box(x) * 0.5)


class ShuffleNetSmall(nn.Module):
    """Grouped 1x1 convs, channel shuffle (Reshape/Transpose/Reshape), depthwise 3x3."""

    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU())
        self.blocks = nn.ModuleList()
        for c in [32, 64, 64]:
            cin = 32 if c == 32 else 64
            self.blocks.append(nn.ModuleList([
                nn.Conv2d(cin, c, 1, groups=4), nn.BatchNorm2d(c), nn.ReLU(),
                nn.Conv2d(c, c, 3, 1, 1, groups=c), nn.BatchNorm2d(c),
                nn.Conv2d(c, 64, 1, groups=4), nn.BatchNorm2d(64)]))
        self.fc = nn.Linear(64, 10)

    @staticmethod
    def shuffle(x, g):
        b, c, h, w = x.shape
        return x.reshape(b, g, c // g, h, w).transpose(1, 2).reshape(b, c, h, w)

    def forward(self, x):
        x = self.stem(x)
        for b in self.blocks:
            y = self.shuffle(b[2](b[1](b[0](x))), 4)
            y = b[6](b[5](b[4](b[3](y))))
            x = F.relu(y + x) if x.shape[1] == 64 else F.relu(y)
        return self.fc(x.mean([2, 3]))


class DynamicBatch(nn.Module):
    """A symbolic batch dimension: calibrated at batch 1, evaluated at batch 3."""

    def __init__(self):
        super().__init__()
        self.c = nn.Sequential(nn.Conv2d(3, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
                               nn.Conv2d(16, 32, 3, 1, 1), nn.BatchNorm2d(32), nn.ReLU(), nn.AdaptiveAvgPool2d(1))
        self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(self.c(x).flatten(1))


class ViTTiny(nn.Module):
    """16x16 patches, class token, 3 pre-norm blocks of nn.MultiheadAttention + GELU MLP."""

    def __init__(self, d=96, h=3, depth=3):
        super().__init__()
        self.patch = nn.Conv2d(3, d, 16, 16)
        self.cls = nn.Parameter(torch.randn(1, 1, d) * 0.02)
        self.pos = nn.Parameter(torch.randn(1, 17, d) * 0.02)
        self.blocks = nn.Sequential(*[ViTBlock(d, h) for _ in range(depth)])
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, 10)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
        return self.head(self.norm(self.blocks(x))[:, 0])


class Misc(nn.Module):
    """GroupNorm (exported as InstanceNormalization + affine), SiLU, reflect Pad, Split,
    depthwise Conv1d, Einsum."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 32, 3, 1, 1)
        self.gn = nn.GroupNorm(8, 32)
        self.dw = nn.Conv1d(32, 32, 5, padding=2, groups=32)
        self.w = nn.Parameter(torch.randn(32, 16) * 0.1)
        self.fc = nn.Linear(16, 6)

    def forward(self, x):
        x = F.silu(self.gn(self.c1(x)))
        x = F.pad(x, (1, 1, 1, 1), mode="reflect")
        a, b = x.split(16, 1)
        x = torch.cat([b, a], 1).flatten(2)
        x = F.silu(self.dw(x))
        x = torch.einsum("bcl,cd->bld", x, self.w)
        return self.fc(x.mean(1))


# ----------------------------------------------------------------- architectures, second set
class ConvMix(nn.Module):
    """Grouped and dilated Conv2d, InstanceNorm2d (affine), one-slope PReLU, ELU, Mish,
    Hardtanh, AvgPool ceil_mode without the padding counted, AdaptiveAvgPool2d to 3x3."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 32, 3, 1, 1)
        self.inorm = nn.InstanceNorm2d(32, affine=True)
        self.a1 = nn.PReLU()
        self.g = nn.Conv2d(32, 64, 3, 1, 2, dilation=2, groups=4)
        self.bn = nn.BatchNorm2d(64)
        self.d = nn.Conv2d(64, 64, 3, 2, 1, groups=8)
        self.c3 = nn.Conv2d(64, 48, 1)
        self.fc = nn.Linear(48 * 9, 10)

    def forward(self, x):
        x = self.a1(self.inorm(self.c1(x)))
        x = F.elu(self.bn(self.g(x)))
        x = F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False)
        x = F.mish(self.d(x))
        x = F.hardtanh(self.c3(x), -2.0, 2.0)
        return self.fc(F.adaptive_avg_pool2d(x, 3).flatten(1))


class Upsample(nn.Module):
    """ConvTranspose2d with output_padding and groups; Resize bilinear align_corners=True,
    bicubic to a given size, nearest; a bilinear 0.5 downscale at the end."""

    def __init__(self):
        super().__init__()
        self.c0 = nn.Conv2d(3, 16, 3, 2, 1)
        self.up = nn.ConvTranspose2d(16, 16, 3, 2, 1, output_padding=1, groups=4)
        self.c1 = nn.Conv2d(16, 8, 3, 1, 1)
        self.c2 = nn.Conv2d(16 + 8 + 8 + 8, 4, 3, 1, 1)

    def forward(self, x):
        y = F.relu(self.c0(x))
        a = F.leaky_relu(self.up(y), 0.2)
        z = self.c1(y)
        b = F.interpolate(z, scale_factor=2, mode="bilinear", align_corners=True)
        c = F.interpolate(z, size=(x.shape[2], x.shape[3]), mode="bicubic", align_corners=False)
        d = F.interpolate(F.relu(z), scale_factor=2, mode="nearest")
        y = self.c2(torch.cat([a, b, c, d], 1))
        return F.interpolate(y, scale_factor=0.5, mode="bilinear", align_corners=False)


class MLPNorms(nn.Module):
    """Linear + BatchNorm1d on 2-D, Linear on a 3-D input, LayerNorm over the last two axes,
    a hand-written norm over axis 1 (ReduceMean/Sub/Pow/Sqrt/Div), ReLU6, tanh GELU, amax."""

    def __init__(self):
        super().__init__()
        self.fc1, self.bn1 = nn.Linear(24, 64), nn.BatchNorm1d(64)
        self.tok = nn.Linear(24, 32)
        self.ln = nn.LayerNorm([10, 32])
        self.fc2 = nn.Linear(64 + 32 + 24, 16)

    def forward(self, x):  # (B, 10, 24)
        g = F.relu6(self.bn1(self.fc1(x.mean(1))))
        t = F.gelu(self.ln(self.tok(x)), approximate="tanh")
        m = x - x.mean(1, keepdim=True)
        n = m / torch.sqrt(m.pow(2).mean(1, keepdim=True) + 1e-5)
        return self.fc2(torch.cat([g, t.amax(1), n.sum(1)], 1))


class Attention(nn.Module):
    """Hand-written attention: Q K^T (MatMul of two activations), a key-padding mask from an
    int64 input (masked_fill of -inf: Where), CumSum positions, then causal
    scaled_dot_product_attention on the same heads."""

    def __init__(self, d=48, h=4):
        super().__init__()
        self.h = h
        self.emb = nn.Linear(16, d)
        self.qkv = nn.Linear(d, 3 * d)
        self.o = nn.Linear(d, d)
        self.o2 = nn.Linear(d, d)
        self.ln = nn.LayerNorm(d)

    def forward(self, x, mask):  # x (B, T, 16), mask (B, T) int64 0/1
        B, T, _ = x.shape
        pos = torch.cumsum(mask, 1).float()
        h = self.emb(x) + 0.05 * pos.unsqueeze(-1)
        q, k, v = self.qkv(h).reshape(B, T, 3, self.h, -1).permute(2, 0, 3, 1, 4)
        s = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
        s = s.masked_fill(mask[:, None, None, :] == 0, float("-inf"))
        y = h + self.o((torch.softmax(s, -1) @ v).transpose(1, 2).reshape(B, T, -1))
        z = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.ln(y + self.o2(z.transpose(1, 2).reshape(B, T, -1)))


class Outputs(nn.Module):
    """Eight outputs: feat (also consumed inside), logits and the same tensor again, its
    Softmax, TopK values and int64 indices, an int64 ArgMax, and a head on index_select
    (Gather) + CumSum of the logits. The logits carry a spread-out bias so that the indices
    do not flip under quantization."""

    def __init__(self):
        super().__init__()
        self.c = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.ReLU(), nn.Conv2d(16, 32, 3, 2, 1), nn.ReLU())
        self.fc = nn.Linear(32, 20)
        self.register_buffer("idx", torch.tensor([3, 1, 4, 1, 5, 9, 2, 6]))
        self.head = nn.Linear(8, 4)
        with torch.no_grad():
            self.fc.bias.copy_(torch.linspace(-4, 4, 20)[torch.randperm(20)])

    def forward(self, x):
        feat = self.c(x).mean([2, 3])
        logits = self.fc(feat)
        vals, idx = logits.topk(5, -1)
        head = self.head(torch.cumsum(logits.index_select(1, self.idx), -1))
        return feat, logits, logits, torch.softmax(logits, -1), vals, idx, logits.argmax(-1), head


class Ranges(nn.Module):
    """Concat of branches whose ranges differ by ~10^4 (x100, tanh x0.01, the input), then a
    Conv over it; the Concat is an output too."""

    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 8, 3, 1, 1)
        self.c2 = nn.Conv2d(3, 8, 3, 1, 1)
        self.c3 = nn.Conv2d(19, 8, 3, 1, 1)

    def forward(self, x):
        y = torch.cat([100 * F.relu(self.c1(x)), 0.01 * torch.tanh(self.c2(x)), x], 1)
        return self.c3(y), y


class TCN(nn.Module):
    """WaveNet-style stack: causal dilated Conv1d (left Pad), tanh * sigmoid gates,
    residual and skip sums, 1x1 Conv1d head."""

    def __init__(self, c=32):
        super().__init__()
        self.inp = nn.Conv1d(2, c, 1)
        self.dil = [1, 2, 4, 8]
        self.f = nn.ModuleList(nn.Conv1d(c, c, 2, dilation=d) for d in self.dil)
        self.g = nn.ModuleList(nn.Conv1d(c, c, 2, dilation=d) for d in self.dil)
        self.res = nn.ModuleList(nn.Conv1d(c, c, 1) for _ in self.dil)
        self.out = nn.Conv1d(c, 4, 1)

    def forward(self, x):
        x, skip = self.inp(x), 0
        for d, f, g, r in zip(self.dil, self.f, self.g, self.res):
            p = F.pad(x, (d, 0))
            y = torch.tanh(f(p)) * torch.sigmoid(g(p))
            skip = skip + y
            x = x + r(y)
        return self.out(F.relu(skip))


class HF(nn.Module):
    """A Hugging Face transformers model from a small config (random init, no download);
    returns the named fields of its output. reinit: PyTorch's default initialization for
    Conv2d, Linear and BatchNorm2d instead of transformers' (normal std 0.02, under which
    MobileViT's BatchNorm weights shrink every activation to ~0 and its output no longer
    depends on the input)."""

    def __init__(self, make, keys, reinit=False):
        super().__init__()
        import transformers  # only for these models
        self.m, self.keys = make(transformers), keys
        for mod in self.m.modules() if reinit else ():
            if isinstance(mod, (nn.Conv2d, nn.Linear, nn.BatchNorm2d)):
                mod.reset_parameters()

    def forward(self, *args):
        o = self.m(*args)
        return tuple(o[k] for k in self.keys)


def hf(make, *keys, reinit=False):
    return lambda: HF(make, keys, reinit)


HF_BERT = hf(lambda T: T.BertModel(T.BertConfig(
    vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
    max_position_embeddings=64, attn_implementation="eager")), "last_hidden_state", "pooler_output")
HF_GPT2 = hf(lambda T: T.GPT2LMHeadModel(T.GPT2Config(
    vocab_size=500, n_embd=64, n_layer=2, n_head=4, n_positions=64, bos_token_id=0, eos_token_id=0,
    attn_implementation="eager")), "logits")
HF_T5 = hf(lambda T: T.T5EncoderModel(T.T5Config(
    vocab_size=500, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4)), "last_hidden_state")
HF_DISTILBERT = hf(lambda T: T.DistilBertModel(T.DistilBertConfig(
    vocab_size=500, dim=64, n_layers=2, n_heads=4, hidden_dim=128, max_position_embeddings=64,
    attn_implementation="eager")),
    "last_hidden_state")
HF_WHISPER = hf(lambda T: T.WhisperModel(T.WhisperConfig(
    vocab_size=500, num_mel_bins=16, d_model=64, encoder_layers=2, encoder_attention_heads=4, decoder_layers=1,
    decoder_attention_heads=4, encoder_ffn_dim=128, decoder_ffn_dim=128, max_source_positions=50,
    max_target_positions=32, pad_token_id=0, bos_token_id=1, eos_token_id=2,
    decoder_start_token_id=1)).get_encoder(), "last_hidden_state")
HF_WAV2VEC2 = hf(lambda T: T.Wav2Vec2Model(T.Wav2Vec2Config(
    hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, conv_dim=(32, 32, 32),
    conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
    feat_extract_norm="group")), "last_hidden_state")
HF_CONVNEXTV2 = hf(lambda T: T.ConvNextV2Model(T.ConvNextV2Config(
    hidden_sizes=[24, 48], depths=[2, 2], num_stages=2, patch_size=4)), "pooler_output")
HF_SWIN = hf(lambda T: T.SwinModel(T.SwinConfig(
    image_size=32, patch_size=2, embed_dim=24, depths=[2, 2], num_heads=[2, 4], window_size=4)), "pooler_output")
HF_MOBILEVIT = hf(lambda T: T.MobileViTModel(T.MobileViTConfig(
    image_size=64, hidden_sizes=[32, 48, 64], neck_hidden_sizes=[8, 16, 24, 32, 40, 48, 160])), "pooler_output",
    reinit=True)
HF_CLIP_TEXT = hf(lambda T: T.CLIPTextModel(T.CLIPTextConfig(
    vocab_size=500, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
    max_position_embeddings=32, pad_token_id=1, bos_token_id=0, eos_token_id=2)),
    "last_hidden_state", "pooler_output")
HF_CLIP_VISION = hf(lambda T: T.CLIPVisionModel(T.CLIPVisionConfig(
    hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4, image_size=32,
    patch_size=8)), "pooler_output")

# third set: decoders of the LLaMA family (RMSNorm, rotary positions, SwiGLU MLP, grouped
# KV heads), DeBERTa-v2's disentangled attention, ALBERT's shared layers, SegFormer's
# Mix Transformer, DINOv2's layer scale
HF_LLAMA = hf(lambda T: T.LlamaForCausalLM(T.LlamaConfig(
    vocab_size=500, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=64, attn_implementation="eager")), "logits")
HF_QWEN2 = hf(lambda T: T.Qwen2ForCausalLM(T.Qwen2Config(
    vocab_size=500, hidden_size=64, intermediate_size=160, num_hidden_layers=2, num_attention_heads=4,
    num_key_value_heads=2, max_position_embeddings=64, attn_implementation="eager")), "logits")
HF_DEBERTA = hf(lambda T: T.DebertaV2Model(T.DebertaV2Config(
    vocab_size=500, hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128,
    max_position_embeddings=64, relative_attention=True, position_buckets=16, pos_att_type=["p2c", "c2p"])),
    "last_hidden_state")
HF_ALBERT = hf(lambda T: T.AlbertModel(T.AlbertConfig(
    vocab_size=500, embedding_size=32, hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
    intermediate_size=128, max_position_embeddings=64, attn_implementation="eager")),
    "last_hidden_state", "pooler_output")
HF_SEGFORMER = hf(lambda T: T.SegformerForSemanticSegmentation(T.SegformerConfig(
    num_channels=3, num_encoder_blocks=2, depths=[1, 1], sr_ratios=[4, 2], hidden_sizes=[16, 32],
    patch_sizes=[7, 3], strides=[4, 2], num_attention_heads=[1, 2], mlp_ratios=[2, 2],
    decoder_hidden_size=32, num_labels=5)), "logits", reinit=True)
HF_DINOV2 = hf(lambda T: T.Dinov2Model(T.Dinov2Config(
    hidden_size=64, num_hidden_layers=2, num_attention_heads=4, mlp_ratio=2, image_size=32, patch_size=8,
    layerscale_value=0.1)), "pooler_output")

# ----------------------------------------------------------------- the list
def spec(ctor, inputs, outputs, opset=13, exporter="torchscript", dynamic_axes=None, eval_batch=None):
    """inputs: [(name, shape, kind)]; exporter: "torchscript" (dynamo=False) or "dynamo"."""
    return dict(ctor=ctor, inputs=inputs, outputs=outputs, opset=opset, exporter=exporter,
                dynamic_axes=dynamic_axes, eval_batch=eval_batch)


IMG = lambda s, kind="normal": [("image", (1, 3, s, s), kind)]  # noqa: E731

MODELS = {
    "mbv3": spec(MobileNetV3Small, IMG(128), ["logits"]),
    "resnet": spec(ResNetSmall, IMG(96), ["logits"]),
    "convnext": spec(ConvNeXtSmall, IMG(64), ["logits"]),
    "unet": spec(UNetSmall, IMG(64, "uniform"), ["mask"]),
    "transformer": spec(TransformerEncoder, [("ids", (1, 32), "int1000")], ["logits"], opset=17),
    "transformer_u": spec(TransformerEncoderUnshared, [("ids", (1, 32), "int1000")], ["logits"], opset=17),
    "gru": spec(lambda: RNNNet(nn.GRU), [("seq", (1, 24, 20), "normal")], ["out"]),
    "lstm": spec(lambda: RNNNet(nn.LSTM), [("seq", (1, 24, 20), "normal")], ["out"]),
    "audio1d": spec(Audio1D, [("wave", (1, 1, 4000), "normal")], ["logits"]),
    "twoio": spec(TwoInTwoOut, [("img", (1, 3, 32, 32), "normal"), ("vec", (1, 10), "uniform")], ["cls", "reg"]),
    "heads": spec(Heads, IMG(32), ["cls", "obj", "tanh"]),
    "shuffle": spec(ShuffleNetSmall, IMG(64), ["logits"]),
    "dynbatch": spec(DynamicBatch, [("x", (1, 3, 32, 32), "normal")], ["y"], opset=17,
                     dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}}, eval_batch=3),
    # the TorchScript exporter needs opset >= 14 for scaled_dot_product_attention
    "vit": spec(ViTTiny, IMG(64), ["logits"], opset=14),
    "misc": spec(Misc, IMG(16), ["out"]),
    # other exporters / opsets of the same architectures
    "resnet_op11": spec(ResNetSmall, IMG(96), ["logits"], opset=11),
    "unet_op11": spec(UNetSmall, IMG(64, "uniform"), ["mask"], opset=11),
    "mbv3_dyn": spec(MobileNetV3Small, IMG(128), ["logits"], opset=18, exporter="dynamo"),
    "unet_dyn": spec(UNetSmall, IMG(64, "uniform"), ["mask"], opset=18, exporter="dynamo"),
    "vit_dyn": spec(ViTTiny, IMG(64), ["logits"], opset=18, exporter="dynamo"),
    # second set (bench/arch_sweep/README.md): plain torch operators ...
    "convmix": spec(ConvMix, IMG(44), ["logits"]),
    "convmix_dyn": spec(ConvMix, IMG(44), ["logits"], opset=18, exporter="dynamo"),
    "upsample": spec(Upsample, IMG(32, "uniform"), ["mask"], opset=17),
    "upsample_dyn": spec(Upsample, IMG(32, "uniform"), ["mask"], opset=20, exporter="dynamo"),
    "mlpnorms": spec(MLPNorms, [("x", (2, 10, 24), "normal")], ["y"], opset=17),
    "mlpnorms_op20": spec(MLPNorms, [("x", (2, 10, 24), "normal")], ["y"], opset=20),
    "attn": spec(Attention, [("x", (1, 16, 16), "normal"), ("mask", (1, 16), "mask")], ["y"], opset=17),
    "attn_dyn23": spec(Attention, [("x", (1, 16, 16), "normal"), ("mask", (1, 16), "mask")], ["y"], opset=23,
                       exporter="dynamo"),
    "outputs": spec(Outputs, IMG(32), ["feat", "logits", "logits2", "probs", "top_v", "top_i", "argmax", "head"]),
    "ranges": spec(Ranges, IMG(16), ["y", "cat"]),
    "tcn": spec(TCN, [("x", (1, 2, 256), "normal")], ["y"], opset=20),
    # ... and Hugging Face transformers models (small random configs)
    "bert": spec(HF_BERT, [("ids", (1, 16), "int500"), ("mask", (1, 16), "mask")], ["hidden", "pooled"], opset=17),
    "bert_dyn": spec(HF_BERT, [("ids", (1, 16), "int500"), ("mask", (1, 16), "mask")], ["hidden", "pooled"],
                     opset=18, exporter="dynamo"),
    "gpt2": spec(HF_GPT2, [("ids", (1, 16), "int500")], ["logits"], opset=14),
    "gpt2_dyn": spec(HF_GPT2, [("ids", (1, 16), "int500")], ["logits"], opset=18, exporter="dynamo"),
    "t5enc": spec(HF_T5, [("ids", (1, 16), "int500")], ["hidden"], opset=17),
    "distilbert": spec(HF_DISTILBERT, [("ids", (1, 16), "int500"), ("mask", (1, 16), "mask")], ["hidden"]),
    "whisper_enc": spec(HF_WHISPER, [("feat", (1, 16, 100), "normal")], ["hidden"], opset=17),
    "wav2vec2": spec(HF_WAV2VEC2, [("wave", (1, 1600), "normal")], ["hidden"], opset=17),
    "wav2vec2_dyn": spec(HF_WAV2VEC2, [("wave", (1, 1600), "normal")], ["hidden"], opset=18, exporter="dynamo"),
    "convnextv2": spec(HF_CONVNEXTV2, IMG(32), ["pooled"], opset=17),
    "swin": spec(HF_SWIN, IMG(32), ["pooled"], opset=17),
    "mobilevit": spec(HF_MOBILEVIT, IMG(64), ["pooled"]),
    "clip_text": spec(HF_CLIP_TEXT, [("ids", (1, 16), "int500")], ["hidden", "pooled"], opset=17),
    "clip_vision": spec(HF_CLIP_VISION, IMG(32), ["pooled"], opset=17),
    # third set
    "llama": spec(HF_LLAMA, [("ids", (1, 16), "int500")], ["logits"], opset=17),
    "llama_dyn": spec(HF_LLAMA, [("ids", (1, 16), "int500")], ["logits"], opset=18, exporter="dynamo"),
    "qwen2": spec(HF_QWEN2, [("ids", (1, 16), "int500")], ["logits"], opset=17),
    "deberta": spec(HF_DEBERTA, [("ids", (1, 16), "int500"), ("mask", (1, 16), "mask")], ["hidden"], opset=17),
    "albert": spec(HF_ALBERT, [("ids", (1, 16), "int500"), ("mask", (1, 16), "mask")], ["hidden", "pooled"],
                   opset=17),
    "segformer": spec(HF_SEGFORMER, IMG(64), ["logits"], opset=17),
    "dinov2": spec(HF_DINOV2, IMG(32), ["pooled"], opset=17),
}


def gen(shape, kind, rng):
    if kind == "normal":
        return rng.standard_normal(shape).astype(np.float32)
    if kind == "uniform":
        return rng.uniform(0, 1, shape).astype(np.float32)
    if kind.startswith("int"):
        return rng.integers(0, int(kind[3:]), shape).astype(np.int64)
    if kind == "mask":  # attention mask: each row 1 for a random prefix (at least half), then 0
        lens = rng.integers(shape[-1] // 2, shape[-1] + 1, shape[:-1])
        return (np.arange(shape[-1]) < lens[..., None]).astype(np.int64)
    raise ValueError(kind)


def write_samples(folder, inputs, seed, batch=None):
    shutil.rmtree(folder, ignore_errors=True)
    rng = np.random.default_rng(seed)
    for k in range(N_SAMPLES):
        os.makedirs(f"{folder}/{k:03d}")
        for name, shape, kind in inputs:
            if batch is not None:
                shape = (batch,) + tuple(shape[1:])
            np.save(f"{folder}/{k:03d}/{name}.npy", gen(shape, kind, rng))


def build(name):
    s = MODELS[name]
    torch.manual_seed(0)
    m = s["ctor"]().eval()
    with torch.no_grad():
        for mod in m.modules():
            if isinstance(mod, (nn.BatchNorm1d, nn.BatchNorm2d)):
                mod.running_mean.uniform_(-0.2, 0.2)
                mod.running_var.uniform_(0.5, 1.5)
    return m


def export(name, out):
    """Writes OUT/NAME.onnx, OUT/NAME_calib, OUT/NAME_eval; returns a one-line description."""
    s = MODELS[name]
    m = build(name)
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(SEED_EXPORT)
    args = tuple(torch.from_numpy(gen(shape, kind, rng)) for _, shape, kind in s["inputs"])
    path = f"{out}/{name}.onnx"
    kw = dict(input_names=[n for n, _, _ in s["inputs"]], output_names=s["outputs"], opset_version=s["opset"])
    # not under torch.no_grad(): nn.TransformerEncoderLayer would take its fused fast path
    # (aten::_transformer_encoder_layer_fwd), which the TorchScript exporter cannot export
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if s["exporter"] == "dynamo":
            torch.onnx.export(m, args, path, dynamo=True, external_data=False, verbose=False, **kw)
        else:
            torch.onnx.export(m, args, path, dynamo=False, dynamic_axes=s["dynamic_axes"], **kw)
    write_samples(f"{out}/{name}_calib", s["inputs"], SEED_CALIB)
    write_samples(f"{out}/{name}_eval", s["inputs"], SEED_EVAL, s["eval_batch"])
    nparams = sum(p.numel() for p in m.parameters())
    return f"{name}: {nparams} parameters, {s['exporter']} opset {s['opset']}"


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    torch.set_num_threads(1)
    for n in sys.argv[2:] or list(MODELS):
        print(export(n, sys.argv[1]), flush=True)
