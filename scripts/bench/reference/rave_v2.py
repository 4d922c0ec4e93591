"""RAVE v2 in Python (python3-torch), written for the native-vs-Python benchmark.

Our own code, from the same facts as the C++ model (acids-ircam/RAVE v2.3.1: rave/blocks.py, pqmf.py, core.py): it
mirrors the module structure and parameter names of models/rave/*.cpp and
models/common/*.cpp, so a state dict exported by `rave_bench export` loads by name, and it
performs the same operations in the same order (weight norm recomputed per forward with
torch._weight_norm, asymmetric padding with constant_pad_nd, STFT magnitudes, ...), so the
timing compares the two front ends over the same LibTorch kernels.

RAVE holds what a phase-1 step uses (PQMF, variational encoder, generator, spectral
distances, KL). The v2 period/scale discriminator and the adversarial losses of phase 2
(models/rave/discriminator.cpp, rave.cpp; RAVE rave/discriminator.py, core.py) are separate
(make_discriminator, adversarial_losses), so RAVE's parameters stay those `rave_bench export`
writes; ddp_bench.py uses them. The PQMF derives its filters as RAVE's pqmf.py does (scipy);
the reparametrisation noise can be given (make_golden.py stores it).
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Options:
    """RaveOptions::preset("v2") (v1.gin + v2.gin)."""

    def __init__(self, **kw):
        self.version = "v2"
        self.channels = 1
        self.capacity = 96
        self.latent_size = 128
        self.n_band = 16
        self.ratios = [4, 4, 4, 2]
        self.dilations = [[1, 3, 9], [1, 3, 9], [1, 3, 9], [1, 3]]
        self.kernel_size = 3
        self.activation = "leaky_relu"
        self.amplitude_modulation = True
        self.adain = False
        self.stft_scales = [2048, 1024, 512, 256, 128]
        # period_scale discriminator (RaveOptions; RAVE ties its width to CAPACITY).
        self.discriminator_capacity = 96
        self.discriminator_n_layers = 4
        self.periods = [2, 3, 5, 7, 11]
        self.n_scales = 3
        for k, v in kw.items():
            if not hasattr(self, k):
                raise KeyError(f"unknown option {k}")
            setattr(self, k, v)


def get_padding(kernel_size, dilation=1):
    """cached_conv get_padding, centered."""
    if kernel_size == 1:
        return 0, 0
    p = (kernel_size - 1) * dilation + 1
    return (p - 1) // 2, p // 2


def register_weight(m, shape, fan_in, weight_norm):
    """models/common/conv.cpp register_weight: v ~ U(-b, b), b = 1/sqrt(fan_in); weight-normed
    as weight_g = ||v|| (all dims but 0) and weight_v, else a plain `weight`."""
    v = torch.empty(*shape).uniform_(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))
    if weight_norm:
        m.weight_g = nn.Parameter(torch.norm_except_dim(v, 2, 0))
        m.weight_v = nn.Parameter(v)
    else:
        m.weight = nn.Parameter(v)
    m.weight_norm = weight_norm


def register_bias(m, bias, n, fan_in):
    b = nn.Parameter(torch.empty(n).uniform_(-1 / math.sqrt(fan_in), 1 / math.sqrt(fan_in))) if bias else None
    m.register_parameter("bias", b)


def effective_weight(m):
    return torch._weight_norm(m.weight_v, m.weight_g, 0) if m.weight_norm else m.weight


class WNConv1d(nn.Module):
    """models/common/conv.h WNConv1d: weight_g (out,1,1), weight_v (or a plain `weight`);
    a `bias` only when asked for (the discriminators)."""

    def __init__(self, cin, cout, k, stride=1, dilation=1, pad=(0, 0), bias=False, weight_norm=True):
        super().__init__()
        self.stride, self.dilation, self.pad = stride, dilation, pad
        register_weight(self, (cout, cin, k), cin * k, weight_norm)
        register_bias(self, bias, cout, cin * k)

    def forward(self, x):
        w = effective_weight(self)
        if self.pad[0] == self.pad[1]:
            return F.conv1d(x, w, self.bias, self.stride, self.pad[0], self.dilation)
        x = torch.constant_pad_nd(x, list(self.pad), 0)
        return F.conv1d(x, w, self.bias, self.stride, 0, self.dilation)


class WNConv2d(nn.Module):
    """models/common/conv.h WNConv2d (discriminators): bias by default, symmetric padding."""

    def __init__(self, cin, cout, k, stride=(1, 1), padding=(0, 0), bias=True, weight_norm=True):
        super().__init__()
        self.stride, self.padding = stride, padding
        register_weight(self, (cout, cin, k[0], k[1]), cin * k[0] * k[1], weight_norm)
        register_bias(self, bias, cout, cin * k[0] * k[1])

    def forward(self, x):
        return F.conv2d(x, effective_weight(self), self.bias, self.stride, self.padding)


class WNConvTranspose1d(nn.Module):
    def __init__(self, cin, cout, k, stride, padding):
        super().__init__()
        self.stride, self.padding = stride, padding
        v = torch.empty(cin, cout, k).uniform_(-1 / math.sqrt(cout * k), 1 / math.sqrt(cout * k))
        self.weight_g = nn.Parameter(torch.norm_except_dim(v, 2, 0))
        self.weight_v = nn.Parameter(v)

    def forward(self, x):
        w = torch._weight_norm(self.weight_v, self.weight_g, 0)
        return F.conv_transpose1d(x, w, None, self.stride, self.padding)


class Snake(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.alpha = nn.Parameter(torch.ones(dim, 1))

    def forward(self, x):
        return x + (self.alpha + 1e-9).reciprocal() * (self.alpha * x).sin().pow(2)


class AdaIN(nn.Module):
    """Identity while training; buffers as models/common/blocks.h (names only matter here)."""

    def __init__(self, dim):
        super().__init__()
        for s in ("x", "y"):
            self.register_buffer(f"mean_{s}", torch.zeros(64, dim, 1))
            self.register_buffer(f"std_{s}", torch.ones(64, dim, 1))
            self.register_buffer(f"learn_{s}", torch.zeros(1))
            self.register_buffer(f"num_update_{s}", torch.zeros(1))

    def forward(self, x):
        assert self.training, "the benchmark reference only implements training mode"
        return x


def activation(o, dim):
    return Snake(dim) if o.activation == "snake" else nn.LeakyReLU(0.2)


class Branches(nn.Module):
    def __init__(self, modules):
        super().__init__()
        self.branches = nn.ModuleList(modules)


class Residual(nn.Module):
    """blocks.Residual: `aligned.branches = [inner, Identity]`, output inner(x) + x."""

    def __init__(self, inner):
        super().__init__()
        self.aligned = Branches([inner, nn.Identity()])

    def forward(self, x):
        return self.aligned.branches[0](x) + x


class DilatedUnit(nn.Module):
    def __init__(self, o, dim, dilation):
        super().__init__()
        self.net = nn.Sequential(
            activation(o, dim),
            WNConv1d(dim, dim, o.kernel_size, dilation=dilation, pad=get_padding(o.kernel_size, dilation)),
            activation(o, dim),
            WNConv1d(dim, dim, 1),
        )

    def forward(self, x):
        return self.net(x)


def dilations_per_ratio(o):
    if len(o.dilations) == 1 and len(o.ratios) > 1:
        return [o.dilations[0]] * len(o.ratios)
    return [list(d) for d in o.dilations]


class EncoderV2(nn.Module):
    def __init__(self, o):
        super().__init__()
        dil = dilations_per_ratio(o)
        k_in = 2 * o.kernel_size + 1
        layers = [WNConv1d(o.n_band * o.channels, o.capacity, k_in, pad=get_padding(k_in))]
        c = o.capacity
        for r, ds in zip(o.ratios, dil):
            for d in ds:
                if o.adain:
                    layers.append(AdaIN(c))
                layers.append(Residual(DilatedUnit(o, c, d)))
            layers.append(activation(o, c))
            layers.append(WNConv1d(c, 2 * c, 2 * r, stride=r, pad=get_padding(2 * r)))
            c *= 2
        layers.append(activation(o, c))
        layers.append(WNConv1d(c, 2 * o.latent_size, o.kernel_size, pad=get_padding(o.kernel_size)))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


class VariationalEncoder(nn.Module):
    def __init__(self, o):
        super().__init__()
        self.encoder = EncoderV2(o)
        self.register_buffer("warmed_up", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        return self.encoder(x)

    @staticmethod
    def reparametrize(stats, noise=None):
        """noise: the standard normal draws (shaped like the mean); None draws them here."""
        mean, scale = stats.chunk(2, 1)
        std = F.softplus(scale) + 1e-4
        var = std * std
        z = (torch.randn_like(mean) if noise is None else noise) * std + mean
        kl = (mean * mean + var - var.log() - 1).sum(1).mean()
        return z, kl


class GeneratorV2(nn.Module):
    def __init__(self, o):
        super().__init__()
        self.amplitude_modulation = o.amplitude_modulation
        dil = list(reversed(dilations_per_ratio(o)))
        ratios = list(reversed(o.ratios))
        data_size = o.n_band * o.channels
        c = (1 << len(ratios)) * o.capacity
        layers = [WNConv1d(o.latent_size, c, o.kernel_size, pad=get_padding(o.kernel_size))]
        for r, ds in zip(ratios, dil):
            layers.append(activation(o, c))
            layers.append(WNConvTranspose1d(c, c // 2, 2 * r, r, r // 2))
            c //= 2
            for d in ds:
                if o.adain:
                    layers.append(AdaIN(c))
                layers.append(Residual(DilatedUnit(o, c, d)))
        layers.append(activation(o, c))
        k = 2 * o.kernel_size + 1
        layers.append(WNConv1d(c, 2 * data_size if self.amplitude_modulation else data_size, k, pad=get_padding(k)))
        self.net = nn.Sequential(*layers)

    def forward(self, z):
        x = self.net(z)
        if self.amplitude_modulation:
            a, b = x.split(x.size(1) // 2, 1)
            x = a * torch.sigmoid(b)
        return torch.tanh(x)


class FixedConv(nn.Module):
    def __init__(self, weight):
        super().__init__()
        self.weight = nn.Parameter(weight.contiguous(), requires_grad=False)


def pqmf_prototype(attenuation, n_band):
    """RAVE pqmf.py get_prototype: the Kaiser lowpass whose cutoff minimises the aliasing of
    h * h[::-1] at multiples of 2M, found by scipy.optimize.fmin from 1/M (float64)."""
    import numpy as np
    from scipy.optimize import fmin
    from scipy.signal import firwin, kaiserord

    def kaiser_filter(wc):
        n, beta = kaiserord(attenuation, wc / np.pi)
        return firwin(2 * (n // 2) + 1, wc, window=("kaiser", beta), scale=False, fs=2 * np.pi)

    def loss_wc(wc):
        h = kaiser_filter(float(wc[0]))
        g = np.convolve(h, h[::-1], "full")
        return np.max(np.abs(g[g.shape[-1] // 2::2 * n_band][1:]))

    return kaiser_filter(float(fmin(loss_wc, 1 / n_band, disp=0)[0]))


class PQMF(nn.Module):
    """Polyphase PQMF with models/common/pqmf.h's layout (RAVE CachedPQMF). The filters are
    derived here as RAVE does (float64, stored as float32 like the native model's);
    `rave_bench export` overwrites them with the native ones."""

    def __init__(self, n_band=16, attenuation=100):
        super().__init__()
        self.n_band = n_band
        h = torch.from_numpy(pqmf_prototype(attenuation, n_band))
        taps = h.numel()
        # Cosine-modulated bank (RAVE get_qmf_bank), centre-padded to the next power of two.
        k = torch.arange(n_band, dtype=torch.float64).reshape(-1, 1)
        t = torch.arange(-(taps // 2), taps // 2 + 1, dtype=torch.float64)
        bank = 2 * h * torch.cos((2 * k + 1) * math.pi / (2 * n_band) * t + (-1) ** k * math.pi / 4)
        nxt = 1
        while nxt < taps:
            nxt *= 2
        pad = nxt - taps
        bank = F.pad(bank, (pad // 2, pad // 2 + pad % 2)).float()
        self.register_buffer("hk", bank)
        self.register_buffer("h", h.float())
        # make_odd (one zero on the right); synthesis kernel "c (t m) -> m c t".
        inverse = bank.flip(-1).reshape(n_band, nxt // n_band, n_band).permute(2, 0, 1)
        self.forward_conv = FixedConv(F.pad(bank, (0, 1)).unsqueeze(1))
        self.inverse_conv = FixedConv(F.pad(inverse, (0, 1)))
        self.forward_pad = get_padding(nxt + 1)
        self.inverse_pad = get_padding(nxt // n_band + 1)

    @staticmethod
    def reverse_half(x):
        mask = torch.ones(x.size(-2), x.size(-1), dtype=x.dtype)
        mask[1::2, ::2] = -1
        return x * mask

    def forward(self, x):
        b, c, t = x.shape
        y = torch.constant_pad_nd(x.reshape(b * c, 1, t), list(self.forward_pad), 0)
        y = F.conv1d(y, self.forward_conv.weight, None, self.n_band)
        y = self.reverse_half(y)
        return y.reshape(b, c * self.n_band, y.size(-1))

    def inverse(self, x):
        b, cm, t = x.shape
        c = cm // self.n_band
        y = self.reverse_half(x.reshape(b * c, self.n_band, t))
        y = torch.constant_pad_nd(y, list(self.inverse_pad), 0)
        y = F.conv1d(y, self.inverse_conv.weight) * float(self.n_band)
        y = y.flip(1).permute(0, 2, 1)
        return y.reshape(b, c, t * self.n_band)


def spectral_distance(x, y, scales, eps=1e-7):
    xf = x.reshape(-1, x.size(-1))
    yf = y.reshape(-1, y.size(-1))
    total = torch.zeros((), dtype=x.dtype)
    for n in scales:
        window = torch.hann_window(n, dtype=x.dtype)

        def stft(s):
            return torch.stft(s, n, n // 4, n, window, center=True, pad_mode="reflect",
                              normalized=False, onesided=True, return_complex=True).abs()

        sx, sy = stft(xf), stft(yf)
        lin = (sx - sy).pow(2).mean() / sx.pow(2).mean()
        log = ((sx + eps).log() - (sy + eps).log()).abs().mean()
        total = total + lin + log
    return total


class RAVE(nn.Module):
    def __init__(self, o):
        super().__init__()
        self.o = o
        self.pqmf = PQMF(o.n_band)
        self.encoder = VariationalEncoder(o)
        self.decoder = GeneratorV2(o)

    def generator_parameters(self):
        return list(self.encoder.parameters()) + list(self.decoder.parameters())

    def forward_train(self, x, noise=None):
        x_mb = self.pqmf(x)
        stats = self.encoder(x_mb)
        z, kl = self.encoder.reparametrize(stats, noise)
        y_mb = self.decoder(z)
        y_mb_c = y_mb[..., : min(y_mb.size(-1), x_mb.size(-1))]
        y = self.pqmf.inverse(y_mb)
        y = y[..., : min(y.size(-1), x.size(-1))]
        return x_mb, kl, y_mb_c, y

    def phase1_losses(self, x, beta, noise=None):
        x_mb, kl, y_mb, y = self.forward_train(x, noise)
        multiband = spectral_distance(x_mb, y_mb, self.o.stft_scales)
        fullband = spectral_distance(x, y, self.o.stft_scales)
        reg = kl * beta
        return {"fullband_spectral_distance": fullband, "multiband_spectral_distance": multiband,
                "regularization": reg, "loss_gen": fullband + multiband + reg, "y": y}


class ConvNet(nn.Module):
    """discriminator.ConvNet (models/rave/discriminator.cpp): n_layers x [weight-normed conv,
    stride 4, centred padding, bias; LeakyReLU(0.2)] with capacity*2^i channels, then a plain
    1x1 conv to one channel. Conv1d kernel 15 for scales, Conv2d kernel (5,1) for periods.
    Returns every conv output (before its activation); the last is the score."""

    def __init__(self, cin, capacity, n_layers, two_d):
        super().__init__()
        channels = [cin] + [capacity << i for i in range(n_layers)]
        layers = []
        for i in range(n_layers):
            if two_d:
                layers.append(WNConv2d(channels[i], channels[i + 1], (5, 1), (4, 1), (get_padding(5)[0], 0)))
            else:
                layers.append(WNConv1d(channels[i], channels[i + 1], 15, stride=4, pad=get_padding(15), bias=True))
            layers.append(nn.LeakyReLU(0.2))
        if two_d:
            layers.append(WNConv2d(channels[-1], 1, (1, 1), weight_norm=False))
        else:
            layers.append(WNConv1d(channels[-1], 1, 1, bias=True, weight_norm=False))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        features = []
        for m in self.net:
            x = m(x)
            if not isinstance(m, nn.LeakyReLU):
                features.append(x)
        return features


class MultiPeriodDiscriminator(nn.Module):
    """Folds (B,C,T) to (B,C,T/p,p) after zero-padding T to a multiple of p."""

    def __init__(self, o):
        super().__init__()
        self.periods = list(o.periods)
        self.layers = nn.ModuleList(
            [ConvNet(o.channels, o.discriminator_capacity, o.discriminator_n_layers, True) for _ in self.periods])

    def forward(self, x):
        out = []
        for p, net in zip(self.periods, self.layers):
            folded = torch.constant_pad_nd(x, [0, (p - x.size(-1) % p) % p], 0)
            out.append(net(folded.reshape(x.size(0), x.size(1), -1, p)))
        return out


class MultiScaleDiscriminator(nn.Module):
    """n_scales ConvNets, avg_pool1d(2) between scales."""

    def __init__(self, o):
        super().__init__()
        self.layers = nn.ModuleList(
            [ConvNet(o.channels, o.discriminator_capacity, o.discriminator_n_layers, False) for _ in range(o.n_scales)])

    def forward(self, x):
        out = []
        for i, net in enumerate(self.layers):
            out.append(net(x))
            if i + 1 < len(self.layers):
                x = F.avg_pool1d(x, 2)
        return out


class CombineDiscriminators(nn.Module):
    def __init__(self, discriminators):
        super().__init__()
        self.discriminators = nn.ModuleList(discriminators)

    def forward(self, x):
        return [f for d in self.discriminators for f in d(x)]


def make_discriminator(o):
    """The period_scale discriminator (make_discriminator in models/rave/discriminator.cpp)."""
    scales = MultiScaleDiscriminator(o)
    return CombineDiscriminators([MultiPeriodDiscriminator(o), scales]) if o.periods else scales


def adversarial_losses(features, batch, feature_matching_weight=20.0, relative=True, num_skipped=1):
    """rave_losses_from_forward's phase-2 terms (v2: relative feature matching, first feature
    skipped, hinge GAN) for discriminator features of cat(real, fake) along the batch."""
    zero = features[0][-1].new_zeros(())
    fm, adv, dis = zero, zero, zero
    for scale in features:
        skip = min(len(scale), num_skipped)
        dist = zero
        for f in scale[skip:]:
            d = (f[:batch] - f[batch:]).abs().mean()
            dist = dist + (d / f[:batch].abs().mean() if relative else d)
        if len(scale) > skip:
            fm = fm + dist / (len(scale) - skip)
        real, fake = scale[-1][:batch], scale[-1][batch:]
        dis = dis + (torch.relu(1 - real) + torch.relu(1 + fake)).mean()
        adv = adv - fake.mean()
    fm = fm / len(features)
    return {"feature_matching": fm * feature_matching_weight, "adversarial": adv, "loss_dis": dis}


def preset(version="v2", **kw):
    if version != "v2":
        raise ValueError("rave_v2.preset: only v2 (see rave_v3.py)")
    return Options(**kw)
