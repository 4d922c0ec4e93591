"""Golden tensors from the real RAVE (acids-ircam/RAVE 2.3.1, PyPI acids-rave==2.3.1).

  tests/oracle/run.sh [--out tests/assets/golden]      (makes the pinned venv, then runs this)

RAVE is imported, configured from its own gin files (v1.gin, v2.gin, v3.gin as the package ships
them) with small sizes bound on top, initialised by its own code, and trained by its own
`RAVE.training_step` with its own callbacks (WarmupCallback, BetaWarmupCallback), optimizers and
LinearLR (`RAVE.configure_optimizers`), and its receptive field computed by its own
`validation_epoch_end` (what Lightning's sanity validation runs before step 0). Nothing of RAVE
is re-implemented here; only Lightning's loop is replaced by the calls it makes, in its order:
callbacks' on_train_batch_start, training_step, on_train_batch_end (which steps the LR
scheduler). `self.optimizers()`, `self.lr_schedulers()` and `self.log*` are pointed at the
objects this harness holds.

Randomness is taken out of the comparison with a tape: every `torch.randn_like` RAVE draws in a
step (the reparametrisation noise) is recorded and stored, and replayed in the float64 runs; the
C++ side feeds the same draws.

For each config (golden/<name>.{json,bin}, format rt-golden/1 in tests/assets/README.md,
written through tests/oracle/rt_golden.py):
  rave_<v>_modules     per-module float32 outputs for one input: PQMF analysis, encoder
                       statistics, decoder output, PQMF synthesis, every discriminator feature
                       map, and both spectral distances (v2 only).
  rave_<v>_step        one step at n_signal 131072 (batch 1) with the receptive-field crop:
                       phase-1 generator step, phase-2 generator step (feature matching and
                       adversarial terms under RAVE's weights), phase-2 discriminator step:
                       the float32 run's losses, and float64 losses and gradients of every
                       parameter the stepping optimizer holds, from the same float32 weights.
  rave_augment         RAVE's --normalize, --derivative, --augment compress and normalize_ambient
                       transforms on a stereo half second (SoX through torchaudio, as RAVE runs it).
  rave_v2_wasserstein_step, rave_v2_spherical_step, rave_v2_spectral_discriminator_step
                       the same three steps for `--config v2 --config wasserstein` (MMD, noise
                       channels, RAVE's weights 2) and `--config v2 --config spherical`; every
                       draw RAVE makes (randn_like and randn) is on the tape; and with
                       spectral_discriminator.gin (EnCodec's STFT discriminator).
  rave_angles          the spherical latent's angle conversions of RAVE's export.
  rave_ema             RAVE's --ema callback (scripts/train.py EMA) over 5 batches and a validation swap.
  rave_rvq             RAVE's residual vector quantiser alone (float64): k-means initialisation,
                       dead-code replacement, EMA updates, commitment loss and gradients over two
                       training calls, then encode and decode; every randint/randperm on the tape.
  rave_v2_nopqmf_step  the three steps for `--config v2_nopqmf` (a generator making raw audio).
  rave_discrete_step   the three steps for `--config discrete` with the quantiser enabled (RAVE
                       never enables it: rave_configs' quantize_callback); the quantiser's
                       randperm draws and the noise channels on the tape.
  rave_pitch           RAVE's --rand_pitch (RandomPitch, scipy's resample_poly) on a stereo record.
  rave_split           RAVE's train/validation split indices for databases of 1 to 60000
                       examples (a manifest without tensors).
  rave_configs         CONFIG_STACKS at full size (manifest only): every state_dict name and
                       shape, and the training settings RAVE's objects carry (loss weights, crop,
                       feature matching, cadence, optimizers, LinearLR and β at sampled batches).
  rave_<v>_trajectory  (v2) 12 steps in float64 across the phase switch (phase_1_duration 4,
                       discriminator every 4 batches, β warm-up over 8 steps, LinearLR over
                       phase 1): after each step, what the stepping optimizer changed.

  rave_prior_step      RAVE's prior (rave/prior/model.py VariationalPrior, prior_v1.gin's layers
                       at small sizes) over the tiny v2 RAVE with a random latent rotation and
                       mean: one Prior.training_step on two examples, the float32 loss, and the
                       float64 latent, one-hot input, loss and gradient of every prior parameter
                       from the same float32 weights; the reparametrisation draws on the tape.
The float64 values are the exact values of the function RAVE's float32 model computes (weights
and inputs are stored as the float32 values both sides start from).
"""
import math
import sys
import warnings

import gin
import numpy as np
import torch

import rt_golden

warnings.filterwarnings("ignore")
import rave  # noqa: E402
import rave.core  # noqa: E402
import rave.model  # noqa: E402

FORMAT = rt_golden.FORMAT
GENERATED_BY = "tests/oracle/rave_oracle.py"
SEED = 11

# Small sizes bound on top of RAVE's own gin files; the names are RAVE's gin macros and
# configurables. The native options that build the same network are stored beside them.
TINY_V2 = {
    "bindings": [
        "N_BAND = 4", "CAPACITY = 4", "LATENT_SIZE = 4", "RATIOS = [2, 2]",
        "DILATIONS = [[1, 3], [1]]",
        "discriminator.ConvNet.capacity = 2", "discriminator.ConvNet.n_layers = 2",
        "discriminator.MultiPeriodDiscriminator.periods = [2, 3, 5]",
        "discriminator.MultiScaleDiscriminator.n_discriminators = 2",
    ],
    "options": {"version": "v2", "capacity": 4, "latent_size": 4, "n_band": 4, "ratios": [2, 2],
                "dilations": [[1, 3], [1]], "kernel_size": 3, "discriminator": "period_scale",
                "discriminator_capacity": 2, "discriminator_n_layers": 2, "periods": [2, 3, 5],
                "n_scales": 2},
}
# v2 with wasserstein.gin / spherical.gin on top (the stacks `--config v2 --config wasserstein`),
# at the same small sizes; wasserstein's 128 noise channels become 2.
TINY_WASSERSTEIN = {
    "bindings": TINY_V2["bindings"] + ["NOISE_AUGMENTATION = 2"],
    "options": dict(TINY_V2["options"], encoder="wasserstein", noise_augmentation=2),
}
TINY_SPHERICAL = {
    "bindings": TINY_V2["bindings"],
    "options": dict(TINY_V2["options"], encoder="spherical"),
}
TINY_SPECTRAL = {
    "bindings": TINY_V2["bindings"] + ["discriminator.EncodecConvNet.capacity = 2",
                                       "discriminator.MultiScaleSpectralDiscriminator.scales = [256, 128]"],
    "options": dict(TINY_V2["options"], discriminator="scale_spectral", spectral_scales=[256, 128],
                    spectral_capacity=2),
}
# discrete.gin (on v2.gin) at the same small sizes: 2 codebooks of 16 codes, 2 noise channels.
# RAVE never enables the quantiser itself (QUANTIZE_CALLBACK below): the step golden sets the
# encoder's `enabled` buffer, what its QuantizeCallback means to do from batch warmup_quantize = -1.
TINY_DISCRETE = {
    "bindings": TINY_V2["bindings"] + ["NUM_QUANTIZERS = 2", "CODEBOOK_SIZE = 16", "NOISE_AUGMENTATION = 2"],
    "options": dict(TINY_V2["options"], encoder="discrete", noise_augmentation=2, num_quantizers=2,
                    codebook_size=16),
    "enable_quantizer": True,
}
# v2_nopqmf.gin (on v1.gin) at small sizes: its encoder and generator ratios are bound literally
# there, so they are bound here too (4 bands × 2·2 = 16 samples per latent frame, made by the
# generator's 4·4).
TINY_NOPQMF = {
    "bindings": ["N_BAND = 4", "CAPACITY = 4", "LATENT_SIZE = 4", "DILATIONS = [[1, 3], [1]]",
                 "blocks.EncoderV2.ratios = [2, 2]", "blocks.GeneratorV2.ratios = [4, 4]",
                 "discriminator.ConvNet.capacity = 2", "discriminator.ConvNet.n_layers = 2",
                 "discriminator.MultiPeriodDiscriminator.periods = [2, 3, 5]",
                 "discriminator.MultiScaleDiscriminator.n_discriminators = 2"],
    "options": dict(TINY_V2["options"], decoder_ratios=[4, 4], output_mode="raw"),
}
# v1.gin (and onnx.gin, raspberry.gin on it) at small sizes: v1's encoder and generator with its
# noise branch (ratios 2·2 to fit the latent frame), v1's three residual dilation pairs, the
# multi-scale discriminator alone.
TINY_V1 = {
    "bindings": ["N_BAND = 4", "CAPACITY = 4", "LATENT_SIZE = 4", "RATIOS = [2, 2]",
                 "blocks.NoiseGenerator.ratios = [2, 2]",
                 "discriminator.ConvNet.capacity = 2", "discriminator.ConvNet.n_layers = 2",
                 "discriminator.MultiScaleDiscriminator.n_discriminators = 2"],
    "options": {"version": "v1", "capacity": 4, "latent_size": 4, "n_band": 4, "ratios": [2, 2],
                "dilations": [[1, 1], [3, 1], [5, 1]], "kernel_size": 3, "discriminator": "period_scale",
                "discriminator_capacity": 2, "discriminator_n_layers": 2, "periods": [], "n_scales": 2,
                "noise_bands": 5, "noise_ratios": [2, 2]},
}
TINY_ONNX = {"bindings": TINY_V1["bindings"], "options": dict(TINY_V1["options"], noise_bands=0)}
# v2.gin with one overlay, at TINY_V2's sizes.
TINY_V2_CAUSAL = {"bindings": TINY_V2["bindings"], "options": dict(TINY_V2["options"], padding="causal")}
TINY_V2_NOISE = {
    "bindings": TINY_V2["bindings"] + ["blocks.NoiseGeneratorV2.ratios = [2, 2]"],
    "options": dict(TINY_V2["options"], noise_bands=5, noise_ratios=[2, 2], noise_hidden=128),
}
TINY_V2_SNAKE = {"bindings": TINY_V2["bindings"], "options": dict(TINY_V2["options"], activation="snake")}
TINY_V2_ADAIN = {"bindings": TINY_V2["bindings"], "options": dict(TINY_V2["options"], adain=True)}
# The descript discriminator (fixed widths): its large tensors by formula (FORMULA_MIN below).
DESCRIPT_BINDINGS = ["descript_discriminator.DescriptDiscriminator.periods = [2, 3]",
                     "descript_discriminator.DescriptDiscriminator.fft_sizes = [256, 128]"]
TINY_V2_DESCRIPT = {
    "formula_weights": True,
    "bindings": TINY_V2["bindings"] + DESCRIPT_BINDINGS,
    "options": dict(TINY_V2["options"], discriminator="descript", periods=[2, 3], mrd_n_ffts=[256, 128]),
}
TINY_V3 = {
    "formula_weights": True,
    "bindings": TINY_V2_DESCRIPT["bindings"],
    "options": dict(TINY_V2_DESCRIPT["options"], version="v3", activation="snake", adain=True),
}
# v2_small.gin (on v1.gin): EncoderV2/GeneratorV2 with NoiseGeneratorV2 (hidden 64, 32 bands).
TINY_V2_SMALL = {
    "bindings": TINY_V2["bindings"] + ["blocks.NoiseGeneratorV2.ratios = [2, 2]"],
    "options": dict(TINY_V2["options"], noise_bands=32, noise_ratios=[2, 2], noise_hidden=64),
}
TINY_DISCRETE_V3 = {
    "bindings": TINY_DISCRETE["bindings"] + DESCRIPT_BINDINGS,
    "options": dict(TINY_DISCRETE["options"], activation="snake", discriminator="descript", periods=[2, 3],
                    mrd_n_ffts=[256, 128]),
    "enable_quantizer": True,
    "formula_weights": True,
}
# hybrid.gin (on v2.gin) at small sizes: a 32-point mel STFT with hop 8 and 8 mel bins, one ×2
# encoder stage (16 samples per latent frame, as the generator's 4 bands × 2·2), a 2-layer GRU.
TINY_HYBRID = {
    "bindings": TINY_V2["bindings"] + ["N_MELS = 8", "N_FFT = 32", "HOP_LENGTH = 8", "ENCODER_RATIOS = [2]",
                                       "NUM_GRU_LAYERS = 2"],
    "options": dict(TINY_V2["options"], input_mode="mel", n_mels=8, mel_n_fft=32, mel_hop=8, ratios=[2],
                    encoder_dilations=[[1]], decoder_ratios=[2, 2], gru_layers=2),
    "mel_multiband_fix": True,
}
STEP_SCALES = [2048, 1024, 512, 256, 128]   # v2.gin's, at n_signal 131072
TRAJECTORY_SCALES = [256, 128, 64]


class Writer(rt_golden.Writer):
    """rt_golden.py's writer, naming each file it saves on stderr."""

    def save(self, out, stem, manifest):
        written = super().save(out, stem, manifest)
        print(f"{stem}: {len(self.entries)} tensors, {len(self.blob)} bytes", file=sys.stderr)
        return written


def header(model, config, extra):
    m = {"format": FORMAT, "model": "rave_" + config, "generated_by": GENERATED_BY,
         "oracle": "acids-rave " + rave_version(), "torch": torch.__version__, "seed": SEED}
    m.update(extra)
    return m


def rave_version():
    from importlib.metadata import version
    return version("acids-rave")


# RAVE.__init__ does `self.weights = _default_loss_weights; self.weights.update(weights)`: it
# updates the module's dict in place, so one model's weights (wasserstein's
# fullband_spectral_distance …) would leak into every model built after it in this process. Each
# build starts from the dict as RAVE ships it, as `rave train` (one model per process) does.
PRISTINE_LOSS_WEIGHTS = dict(rave.model._default_loss_weights)


def build(config, bindings):
    """RAVE as `rave train --config <config>` builds it (train.py binds RAVE.n_channels). A stack
    "v2+causal" is `--config v2 --config causal`: the gin files in that order."""
    rave.model._default_loss_weights.clear()
    rave.model._default_loss_weights.update(PRISTINE_LOSS_WEIGHTS)
    gin.clear_config()
    files = [name + ".gin" for name in config.split("+")]
    gin.parse_config_files_and_bindings(files, bindings + ["RAVE.n_channels = 1"])
    return rave.RAVE(n_channels=1)


class NoiseTape:
    """Records every torch.randn_like, torch.rand_like, torch.randn, torch.randperm and
    torch.randint draw (record), or hands them back in order (replay). `kinds` names each draw's
    function (randn for randn_like and randn, rand_hash for rand_like, which hands out
    hash_uniform instead of random values)."""

    def __init__(self):
        self.draws = []
        self.kinds = []
        self.replay_at = None

    def __enter__(self):
        self._orig = torch.randn_like
        self._orig_randn = torch.randn
        self._orig_randperm = torch.randperm
        self._orig_randint = torch.randint
        self._orig_rand_like = torch.rand_like
        tape = self

        def take(make, shape, dtype, kind="randn"):
            if tape.replay_at is None:
                d = make()
                tape.draws.append(d.detach().clone())
                tape.kinds.append(kind)
                return d
            d = tape.draws[tape.replay_at]
            assert tape.kinds[tape.replay_at] == kind, (tape.kinds[tape.replay_at], kind)
            tape.replay_at += 1
            assert tuple(d.shape) == tuple(shape), (d.shape, shape)
            return d.to(dtype)

        def randperm(n, *a, **k):
            # The quantiser's sample_vectors (k-means initialisation, dead-code replacement).
            return take(lambda: tape._orig_randperm(n, *a, **k), (n,), torch.long, "randperm")

        def randint(low, high, size, *a, **k):
            return take(lambda: tape._orig_randint(low, high, size, *a, **k), tuple(size), torch.long, "randint")

        def randn_like(t, *a, **k):
            return take(lambda: tape._orig(t, *a, **k), t.shape, t.dtype)

        def rand_like(t, *a, **k):
            # The noise generators' uniform noise (blocks.py NoiseGenerator, NoiseGeneratorV2):
            # an integer-hash pattern in [0, 1) that the test computes too (hash_uniform), so
            # that the golden need not store it (half a megabyte per draw).
            index = len(tape.draws)
            return take(lambda: hash_uniform(list(t.shape), index).to(t.dtype), t.shape, t.dtype, "rand_hash")

        def randn(*size, **k):
            # WasserteinEncoder's noise channels: torch.randn(B, A, T).type_as(z).
            if "generator" in k:
                return tape._orig_randn(*size, **k)
            shape = size[0] if len(size) == 1 and isinstance(size[0], (tuple, list, torch.Size)) else size
            return take(lambda: tape._orig_randn(*size, **k), tuple(shape), k.get("dtype", torch.float32))

        torch.randn_like = randn_like
        torch.randn = randn
        torch.randperm = randperm
        torch.randint = randint
        torch.rand_like = rand_like
        return self

    def __exit__(self, *exc):
        torch.randn_like = self._orig
        torch.randn = self._orig_randn
        torch.randperm = self._orig_randperm
        torch.randint = self._orig_randint
        torch.rand_like = self._orig_rand_like

    def replay(self):
        self.replay_at = 0
        return self


class Harness:
    """Lightning 1.9's manual-optimisation loop around one RAVE module, reduced to the calls it
    makes per batch: callbacks' on_train_batch_start (RAVE train.py's list, in order), then
    training_step, then the module's on_train_batch_end (RAVE steps the LR scheduler there)."""

    def __init__(self, model):
        self.model = model
        gen, dis = model.configure_optimizers()
        self.gen_opt = gen["optimizer"]
        self.scheduler = gen["lr_scheduler"]["scheduler"]
        self.dis_opt = dis["optimizer"]
        self.callbacks = [rave.model.WarmupCallback(), rave.model.QuantizeCallback(),
                          rave.model.BetaWarmupCallback()]
        self.logged = {}
        self.backward = []
        model.optimizers = lambda *a, **k: (self.gen_opt, self.dis_opt)
        model.lr_schedulers = lambda *a, **k: self.scheduler
        model.log = lambda name, value, *a, **k: self.logged.__setitem__(name, value)
        model.log_dict = lambda d, *a, **k: self.logged.update(d)

    def step(self, batch, batch_idx, callbacks=True):
        self.logged = {}
        self.backward = []
        if callbacks:
            for cb in self.callbacks:
                cb.on_train_batch_start(None, self.model, batch, batch_idx)
        original = torch.Tensor.backward
        harness = self

        def backward(t, *a, **k):
            harness.backward.append(t.detach().clone())
            return original(t, *a, **k)

        torch.Tensor.backward = backward
        try:
            self.model.training_step(batch, batch_idx)
        finally:
            torch.Tensor.backward = original
        self.model.on_train_batch_end(None, batch, batch_idx)
        assert len(self.backward) == 1
        return self.backward[0], {k: float(v) for k, v in self.logged.items()}


def prepare(model):
    """What Lightning's sanity validation leaves: the receptive field, and the module in train
    mode. Returns the receptive field as ints."""
    model.validation_epoch_end([])
    model.train()
    return [int(v) for v in model.receptive_field]


def test_signal(batch, n, seed):
    """Deterministic 16-bit PCM test audio: two partials per example and a little noise."""
    g = torch.Generator().manual_seed(seed)
    t = torch.arange(n, dtype=torch.float64) / 44100.0
    f = 110.0 * (1.0 + torch.rand(batch, 1, generator=g, dtype=torch.float64) * 8.0)
    x = (0.45 * torch.sin(2 * math.pi * f * t) + 0.2 * torch.sin(2 * math.pi * 2.7 * f * t + 1.0)
         + 0.03 * torch.randn(batch, n, generator=g, dtype=torch.float64))
    x = torch.round(x.clamp(-1, 1 - 2 ** -15) * 32768.0) / 32768.0
    return x.float().unsqueeze(1)


def add_weights(w, model):
    """Every parameter but the PQMF's fixed filters (both sides derive those)."""
    for k, p in model.named_parameters():
        if not k.startswith("pqmf."):
            w.add("weight:" + k, p)


def derived(model):
    return sorted(k for k, _ in model.named_parameters() if k.startswith("pqmf."))


def buffers_of(model):
    return sorted(k for k, v in model.state_dict().items()
                  if not v.dtype.is_floating_point or k in ("latent_pca", "latent_mean", "fidelity"))


def make_modules(out, config, spec):
    torch.manual_seed(SEED)
    model = build(config, spec["bindings"] + ["core.MultiScaleSTFT.scales = [256, 128, 64]"])
    model.train()
    x = test_signal(2, 2048, SEED + 1)
    w = Writer()
    w.add("input:x", x, "pcm16")
    add_weights(w, model)
    with torch.no_grad():
        mb = rave.model._pqmf_encode(model.pqmf, x)
        stats = model.encoder(mb)
        z = torch.randn(2, spec["options"]["latent_size"], stats.shape[-1])
        y_mb = model.decoder(z)
        y = rave.model._pqmf_decode(model.pqmf, y_mb, batch_size=x.shape[:-2], n_channels=1)
        features = model.discriminator(torch.cat([x, y[..., :x.shape[-1]]], 0))
        w.add("output:pqmf.h", model.pqmf.h)
        w.add("output:pqmf.hk", model.pqmf.hk)
        w.add("output:pqmf_analysis", mb)
        w.add("output:encoder", stats)
        w.add("input:z", z)
        w.add("output:decoder", y_mb)
        w.add("output:pqmf_synthesis", y)
        for i, scale in enumerate(features):
            for j, f in enumerate(scale):
                w.add(f"output:discriminator.{i}.{j}", f)
        losses = {}
        yy = y[..., :x.shape[-1]]
        losses["fullband_spectral_distance"] = float(model.audio_distance(x, yy)["spectral_distance"])
        losses["multiband_spectral_distance"] = float(
            model.multiband_audio_distance(mb, y_mb[..., :mb.shape[-1]])["spectral_distance"])
    m = header(model, config, {
        "options": dict(spec["options"], stft_scales=[256, 128, 64], pqmf_attenuation=100),
        "losses": losses, "derived": derived(model), "buffers": buffers_of(model)})
    w.save(out, f"rave_{config}_modules", m)


def gen_params(model):
    return [(k, p) for k, p in model.named_parameters()
            if k.startswith("encoder.") or k.startswith("decoder.")]


def dis_params(model):
    return [(k, p) for k, p in model.named_parameters() if k.startswith("discriminator.")]


def clone(model):
    """A new RAVE from the gin configuration in force, holding model's state (weight norm's
    computed weights keep deepcopy from working)."""
    m = rave.RAVE(n_channels=1)
    m.load_state_dict(model.state_dict())
    m.train()
    return m


def run_case(model32, x, warmed_up, beta, batch_idx, tape):
    """One training_step on a float32 copy of model32 and on a float64 copy, both drawing the
    tape's noise (recorded by the first case that runs). Returns (loss32, logged32, loss64,
    logged64, grads64)."""
    results = []
    for dtype in (torch.float32, torch.float64):
        m = clone(model32).to(dtype)
        h = Harness(m)
        m.warmed_up = warmed_up          # what WarmupCallback sets
        m.beta_factor = beta             # what BetaWarmupCallback sets
        with (tape if not tape.draws else tape.replay()):
            loss, logged = h.step(x.to(dtype).clone(), batch_idx, callbacks=False)
        dis = warmed_up and batch_idx % m.update_discriminator_every == 0
        params = dis_params(m) if dis else gen_params(m)
        grads = {k: p.grad.detach().clone() for k, p in params if p.grad is not None}
        results.append((float(loss), logged, grads))
    (l32, g32, _), (l64, g64, grads64) = results
    return l32, g32, l64, g64, grads64


def audio_multiband_encode(self, x, return_mb: bool = False):
    """RAVE.encode with the multiband signal taken from the audio, as for every input mode but
    mel in RAVE 2.3.1, whose mel branch analyses the mel features instead (model.py:251-254) and
    then fails in the multiband distance's STFT."""
    z = ORIGINAL_ENCODE(self, x, return_mb=False)
    if return_mb:
        return z, rave.model._pqmf_encode(self.pqmf, x)
    return z


ORIGINAL_ENCODE = rave.RAVE.encode


# The descript discriminator's layers have fixed widths (DAC's 32 … 1024 channels): its
# parameters of FORMULA_MIN elements or more are set by a formula both sides compute exactly
# (an integer hash scaled by 2/sqrt(fan_in), rounded once to float32) instead of being stored, and
# their float64 gradients are stored as projections (norm and two dot products with hash
# patterns) instead of whole: the golden shrinks from 200 MB to a few.
FORMULA_MIN = 4096


def hash_pattern(n, multiplier, offset):
    i = torch.arange(n, dtype=torch.int64)
    return ((i * multiplier + offset) % 4294967296).double() / 4294967296.0 - 0.5


def hash_uniform(shape, index):
    """Uniform-looking values in [0, 1), exact in float32 on both sides: draw `index` of a case."""
    n = math.prod(shape)
    i = torch.arange(n, dtype=torch.int64)
    return (((i * 2654435761 + (index + 1) * 40503) % 4294967296).double() / 4294967296.0).float().view(shape)


def formula_tensor(shape, index):
    n = math.prod(shape)
    fan_in = n // shape[0]
    return (hash_pattern(n, 2654435761, (index + 1) * 40503) * (2.0 / math.sqrt(fan_in))).float().view(shape)


def gradient_projection(g):
    g = g.double().reshape(-1)
    return torch.stack([g.norm(), (g * hash_pattern(g.numel(), 2246822519, 3266489917)).sum(),
                        (g * hash_pattern(g.numel(), 3266489917, 2246822519)).sum()])


def set_formula_weights(model):
    names = []
    with torch.no_grad():
        for k, p in model.named_parameters():
            if k.startswith("discriminator.") and p.numel() >= FORMULA_MIN:
                p.copy_(formula_tensor(list(p.shape), len(names)))
                names.append(k)
    return names


def make_step(out, config, spec):
    if spec.get("mel_multiband_fix"):
        rave.RAVE.encode = audio_multiband_encode
        try:
            return make_step_(out, config, spec)
        finally:
            rave.RAVE.encode = ORIGINAL_ENCODE
    return make_step_(out, config, spec)


def make_step_(out, config, spec):
    torch.manual_seed(SEED)
    bindings = spec["bindings"] + [f"core.MultiScaleSTFT.scales = {STEP_SCALES}"]
    model = build(config, bindings)
    rf = prepare(model)
    if spec.get("enable_quantizer"):
        model.encoder.enabled = torch.tensor(1).type_as(model.encoder.enabled)
    formula = set_formula_weights(model) if spec.get("formula_weights") else []
    x = test_signal(1, 131072, SEED + 2)
    beta = 0.05
    w = Writer()
    w.add("input:x", x, "pcm16")
    for k, p in model.named_parameters():
        if not k.startswith("pqmf.") and k not in formula:
            w.add("weight:" + k, p)
    # The mel front end's float32 window and filter bank, which the float64 runs apply as RAVE's.
    for k, v in model.state_dict().items():
        if k.startswith("spectrogram."):
            w.add("buffer:" + k, v)
    cases = {}
    for name, warmed_up, batch_idx in (("phase1_generator", False, 1),
                                        ("phase2_generator", True, 1),
                                        ("phase2_discriminator", True, 0)):
        # Each case draws on its own tape (v1's noise generator draws in phase 2 only): numbered
        # in the order RAVE makes them, e.g. the reparametrisation noise, then the decoder's
        # uniform noise; wasserstein: the MMD's samples, then the noise channels.
        tape = NoiseTape()
        l32, g32, l64, g64, grads = run_case(model, x, warmed_up, beta, batch_idx, tape)
        for i, d in enumerate(tape.draws):
            if tape.kinds[i] != "rand_hash":
                w.add(f"input:{name}.draw.{i}", d)
        for k, g in grads.items():
            if k in formula:
                w.add(f"gradproj:{name}.{k}", gradient_projection(g), "float64")
            else:
                w.add(f"grad:{name}.{k}", g, "float64")
        cases[name] = {"warmed_up": warmed_up, "batch_idx": batch_idx,
                       "loss_float32": l32, "loss": l64, "logged_float32": g32, "logged": g64,
                       "params": sorted(grads), "draw_kinds": list(tape.kinds)}
    m = header(model, config, {
        "options": dict(spec["options"], stft_scales=STEP_SCALES, pqmf_attenuation=100),
        "n_signal": 131072, "beta": beta, "receptive_field": rf, "formula_weights": formula,
        "log_epsilon": float(model.audio_distance.log_epsilon),
        "num_skipped_features": int(model.num_skipped_features),
        "weights": dict(model.weights), "update_discriminator_every": model.update_discriminator_every,
        "cases": cases, "derived": derived(model), "buffers": buffers_of(model)})
    w.save(out, f"rave_{config.replace('+', '_')}_step", m)


def make_trajectory(out, config, spec, steps=12, phase_1=4, beta_warmup=8):
    torch.manual_seed(SEED)
    bindings = spec["bindings"] + [
        f"core.MultiScaleSTFT.scales = {TRAJECTORY_SCALES}",
        f"PHASE_1_DURATION = {phase_1}",
        f"BetaWarmupCallback.warmup_len = {beta_warmup}"]
    model32 = build(config, bindings)
    rf = prepare(model32)
    w = Writer()
    add_weights(w, model32)
    model = clone(model32).double()
    h = Harness(model)
    batches = test_signal(2 * steps, 2048, SEED + 3).view(steps, 2, 1, 2048)
    record = []
    for s in range(steps):
        before = {k: p.detach().clone() for k, p in model.named_parameters()}
        lr = h.gen_opt.param_groups[0]["lr"]
        with NoiseTape() as tape:
            loss, logged = h.step(batches[s].double().clone(), s)
        dis = model.warmed_up and s % model.update_discriminator_every == 0
        w.add(f"input:step{s}.x", batches[s], "pcm16")
        w.add(f"input:step{s}.noise", tape.draws[0], "float64")
        changed = dis_params(model) if dis else gen_params(model)
        for k, p in changed:
            w.add(f"delta:step{s}.{k}", p.detach() - before[k], "float64")
        untouched = [k for k, p in model.named_parameters()
                     if k not in dict(changed) and not torch.equal(p.detach(), before[k])]
        assert not untouched, untouched
        record.append({"step": s, "optimizer": "discriminator" if dis else "generator",
                       "warmed_up": bool(model.warmed_up), "beta": float(model.beta_factor),
                       "generator_lr": lr, "loss": float(loss), "logged": logged})
    m = header(model32, config, {
        "options": dict(spec["options"], stft_scales=TRAJECTORY_SCALES, pqmf_attenuation=100),
        "n_signal": 2048, "batch": 2, "receptive_field": rf, "phase_1_duration": phase_1,
        "beta_warmup": {"initial": 1e-6, "target": 5e-2, "steps": beta_warmup},
        "update_discriminator_every": model.update_discriminator_every,
        "weights": dict(model.weights), "steps": record, "derived": derived(model32),
        "buffers": buffers_of(model32)})
    w.save(out, f"rave_{config}_trajectory", m)


def make_rvq(out):
    """RAVE's ResidualVectorQuantization (rave/quantization.py) alone, in float64: 3 codebooks of
    16 codes over 4 dimensions, fed 10 frames, so that k-means starts from randint draws and dead
    codes are replaced. Two training calls (k-means, lookup, expiry, EMA; then lookup, expiry, EMA
    on the moved codes), each with the output, commitment loss, indices, every buffer after it and
    the float64 gradient of (output·probe).sum() + loss with respect to the input; then, in eval
    mode, encode and decode of a third input."""
    from rave.quantization import ResidualVectorQuantization
    torch.manual_seed(SEED)
    rvq = ResidualVectorQuantization(num_quantizers=3, dim=4, codebook_size=16).double()
    rvq.train()
    w = Writer()
    tape = NoiseTape()
    calls = []
    for call in range(2):
        z = (torch.randn(2, 4, 5, dtype=torch.float64) * (1.0 + call)).float().double().requires_grad_(True)
        probe = torch.randn(2, 4, 5, dtype=torch.float64).float().double()
        w.add(f"input:call{call}.z", z, "float64")
        w.add(f"input:call{call}.probe", probe, "float64")
        first = len(tape.draws)
        with tape:
            q, loss, indices = rvq(z)
        ((q * probe).sum() + loss).backward()
        for i in range(first, len(tape.draws)):
            w.add(f"input:draw.{i}", tape.draws[i].double(), "float64")
        w.add(f"output:call{call}.quantized", q, "float64")
        w.add(f"output:call{call}.indices", indices.double(), "float64")
        w.add(f"grad:call{call}.z", z.grad, "float64")
        for k, v in rvq.state_dict().items():
            w.add(f"buffer:call{call}.{k}", v, "float64")
        calls.append({"loss": float(loss), "draws": list(range(first, len(tape.draws)))})
    rvq.eval()
    z = torch.randn(2, 4, 7, dtype=torch.float64).float().double()
    w.add("input:encode.z", z, "float64")
    with torch.no_grad():
        indices = rvq.encode(z)
        w.add("output:encode.indices", indices.double(), "float64")
        w.add("output:decode", rvq.decode(indices), "float64")
    m = {"format": FORMAT, "model": "rave_rvq", "generated_by": GENERATED_BY,
         "oracle": "acids-rave " + rave_version(), "torch": torch.__version__, "seed": SEED,
         "num_quantizers": 3, "dim": 4, "codebook_size": 16, "calls": calls, "draw_kinds": tape.kinds}
    w.save(out, "rave_rvq", m)


def make_mel(out):
    """hybrid.gin's mel front end at full size as RAVE builds it: RAVE's _mel_encode of a stereo
    half second (torchaudio's MelSpectrogram, the last frame dropped, log1p, channels folded),
    with the module's window and filter bank."""
    torch.manual_seed(SEED)
    model = build("hybrid", ["RAVE.n_channels = 2"])
    x = torch.cat([test_signal(1, 22528, SEED + 5), test_signal(1, 22528, SEED + 6)], 1)
    w = Writer()
    w.add("input:x", x, "pcm16")
    with torch.no_grad():
        w.add("output:mel", model._mel_encode(x))
    for k, v in model.state_dict().items():
        if k.startswith("spectrogram."):
            w.add("buffer:" + k, v)
    m = header(model, "hybrid_mel", {"sampling_rate": int(model.sr), "n_mels": 128, "n_fft": 2048, "hop": 256})
    w.save(out, "rave_hybrid_mel", m)


def make_ema(out):
    """RAVE's --ema: scripts/train.py's EMA callback itself, over a small module whose parameters
    are moved before each of 5 batches (factor 0.9): the averages after each on_train_batch_end,
    then the module's parameters inside the validation swap (on_validation_epoch_start) and after
    it (on_validation_epoch_end)."""
    import sys as _sys
    argv, _sys.argv = _sys.argv, [_sys.argv[0]]
    try:
        from scripts.train import EMA
    finally:
        _sys.argv = argv
    torch.manual_seed(SEED)
    module = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Conv1d(2, 2, 3))
    ema = EMA(0.9)
    w = Writer()
    for k, p in module.named_parameters():
        w.add(f"input:initial.{k}", p)
    for b in range(5):
        with torch.no_grad():
            for k, p in module.named_parameters():
                step = torch.randn_like(p) * 0.1
                p.add_(step)
                w.add(f"input:step{b}.{k}", step)
        ema.on_train_batch_end(None, module, None, None, b)
        for k, v in ema.weights.items():
            w.add(f"output:average{b}.{k}", v)
    ema.on_validation_epoch_start(None, module)
    for k, p in module.named_parameters():
        w.add(f"output:validation.{k}", p)
    ema.on_validation_epoch_end(None, module)
    for k, p in module.named_parameters():
        w.add(f"output:after.{k}", p)
    m = {"format": FORMAT, "model": "rave_ema", "generated_by": GENERATED_BY,
         "oracle": "acids-rave " + rave_version(), "torch": torch.__version__, "seed": SEED, "factor": 0.9,
         "batches": 5}
    w.save(out, "rave_ema", m)


def quantize_callback_facts():
    """Whether RAVE's QuantizeCallback can ever enable the discrete encoder's quantiser: it
    defines `on_train_batch_`, which is no Lightning hook, and inherits WarmupCallback's
    on_train_batch_start (which sets warmed_up, not `enabled`)."""
    import pytorch_lightning as pl
    cb = rave.model.QuantizeCallback
    return {"defines": sorted(k for k in vars(cb) if k.startswith("on_")),
            "lightning_has_on_train_batch_": hasattr(pl.Callback, "on_train_batch_"),
            "on_train_batch_start_is_warmup_callbacks":
                cb.on_train_batch_start is rave.model.WarmupCallback.on_train_batch_start,
            "pytorch_lightning": pl.__version__}


def make_split(out):
    """RAVE's train/validation split (train.py: split_dataset(dataset, 98), v1.gin's
    max_residual = 1000) of databases of several sizes, as index lists."""
    import rave.dataset
    gin.clear_config()
    gin.parse_config_files_and_bindings(["v2.gin"], [])
    splits = {}
    for n in (1, 3, 50, 100, 1234, 60000):
        train, val = rave.dataset.split_dataset(list(range(n)), 98)
        t = [int(i) for i in train.indices]
        splits[str(n)] = {"train_count": len(t), "train_head": t[:64], "train_sum": sum(t),
                          "val": [int(i) for i in val.indices]}
    m = {"format": FORMAT, "model": "rave_dataset", "generated_by": GENERATED_BY,
         "oracle": "acids-rave " + rave_version(), "torch": torch.__version__, "seed": 42,
         "splits": splits}
    Writer().save(out, "rave_split", m)


def make_augment(out):
    """RAVE's dataset transforms after the crop (rave/dataset.py get_dataset, rave/transforms.py),
    run by RAVE's own code on a stereo half second: normalize_signal (--normalize), the derivator and
    integrator of --derivative, normalize_ambient.gin's Compress, and the compand that
    RandomCompress (--augment compress) builds, with its random amplitude drawn from a patched
    torch.rand so that the draw is known; RandomGain (--augment gain) is recorded as RAVE
    returns it. SoX runs through torchaudio.sox_effects, as in RAVE."""
    import rave.dataset as rd
    import rave.transforms as rt_
    import torchaudio
    sr = 44100
    g = torch.Generator().manual_seed(SEED)
    n = sr // 2
    t = torch.arange(n, dtype=torch.float64) / sr
    # Loudness rising from −70 dB to −3 dB, two partials and some noise per channel.
    env = 10 ** ((-70 + 134 * t) / 20)
    x = torch.stack([env * torch.sin(2 * math.pi * 220 * t) * 0.7 + 0.05 * env * torch.randn(n, generator=g, dtype=torch.float64),
                     env * torch.sin(2 * math.pi * 331 * t + 1.0) * 0.6 + 0.05 * env * torch.randn(n, generator=g, dtype=torch.float64)])
    x = x.to(torch.float32).numpy()
    w = Writer()
    w.add("x", torch.from_numpy(x))
    w.add("normalize", torch.from_numpy(rd.normalize_signal(x.copy()).astype(np.float32)))
    derivator, integrator = rd.get_derivator_integrator(sr)
    w.add("derivative", torch.from_numpy(derivator(x.copy()).astype(np.float32)))
    w.add("integrate", torch.from_numpy(integrator(x.copy()).astype(np.float32)))
    # normalize_ambient.gin's binding, built by gin as RAVE builds it.
    gin.clear_config()
    gin.parse_config_files_and_bindings(["normalize_ambient.gin"], ["SAMPLING_RATE = %d" % sr])
    ambient = gin.query_parameter("dataset.get_dataset.augmentations")[0].scoped_configurable_fn()
    gin.clear_config()
    w.add("normalize_ambient", torch.from_numpy(np.asarray(ambient(x.copy()), dtype=np.float32)))
    # RandomCompress, forced to run, with torch.rand patched to a known draw.
    draw = 0.3
    comp = rt_.RandomCompress(prob=1.0, sr=sr)
    original_rand = torch.rand
    torch.rand = lambda *a, **k: torch.full((1,), draw)
    try:
        amp = float(torch.rand((1,)) * (comp.amp_range[1] - comp.amp_range[0]) + comp.amp_range[0])
        y = comp(x.copy())
    finally:
        torch.rand = original_rand
    w.add("compress", torch.from_numpy(np.asarray(y, dtype=np.float32)))
    gain = rt_.RandomGain(prob=1.0)
    gain_identity = bool(np.array_equal(gain(x.copy()), x))
    m = {"format": FORMAT, "model": "rave_augment", "generated_by": GENERATED_BY,
         "oracle": "acids-rave " + rave_version(), "torch": torch.__version__,
         "torchaudio": torchaudio.__version__, "seed": SEED, "sampling_rate": sr,
         "compress": {"draw": draw, "amp": amp, "threshold": comp.threshold,
                      "attack": comp.attack, "release": comp.release,
                      "sox_args": [f"{comp.attack},{comp.release}", f"6:-80,{comp.threshold},{amp}"]},
         "normalize_ambient_sox_args": list(ambient.sox_args),
         "random_gain_returns_its_input": gain_identity}
    w.save(out, "rave_augment", m)


def make_angles(out):
    """RAVE's spherical latent as its export scripts it (rave/blocks.py
    unit_norm_vector_to_angles, angles_to_unit_norm_vector; SphericalScriptedRAVE): a latent
    with components of both signs, its angles, and vectors made from angles beyond [−1, 1]
    (which wrap)."""
    import rave.blocks as rb
    g = torch.Generator().manual_seed(SEED)
    x = torch.randn(2, 5, 7, generator=g)
    x[0, -1, :3] = -x[0, -1, :3].abs()
    angles_in = torch.rand(2, 4, 7, generator=g) * 3.0 - 1.5
    w = Writer()
    w.add("input:latent", x)
    w.add("output:angles", rb.unit_norm_vector_to_angles(x.clone()))
    w.add("input:angles", angles_in)
    w.add("output:latent", rb.angles_to_unit_norm_vector(angles_in.clone()))
    m = {"format": FORMAT, "model": "rave_angles", "generated_by": GENERATED_BY,
         "oracle": "acids-rave " + rave_version(), "torch": torch.__version__, "seed": SEED}
    w.save(out, "rave_angles", m)


def make_pitch(out):
    """RAVE's RandomPitch (--rand_pitch 0.7,1.3; rave/transforms.py) on a stereo record, forced
    to run (torch.bernoulli patched to 1) with known uniform draws (transforms.random patched):
    the factor tables and, per draw, the (up, down) chosen and scipy's resample_poly output."""
    import rave.transforms as rt_
    g = torch.Generator().manual_seed(SEED)
    n_signal = 1000
    x = (torch.randn(2, 2500, generator=g) * 0.2 + 0.05).numpy().astype(np.float32)
    pitch = rt_.RandomPitch(n_signal, [0.7, 1.3])
    w = Writer()
    w.add("input:x", torch.from_numpy(x))
    draws, ratios = [0.0, 0.05, 0.5, 0.93, 0.999], []
    orig_bernoulli, orig_random = torch.bernoulli, rt_.random
    try:
        torch.bernoulli = lambda *a, **k: torch.tensor(1.0)
        for i, r in enumerate(draws):
            rt_.random = lambda r=r: r
            y = pitch(x.copy())
            hi = min(1.3, x.shape[-1] / n_signal)
            f = r * (hi - 0.7) + 0.7
            import bisect
            k = min(bisect.bisect_left(pitch.factor_list, f), len(pitch.factor_list) - 1)
            ratios.append(list(pitch.ratio_list[k]))
            w.add(f"output:pitched.{i}", torch.from_numpy(np.asarray(y, dtype=np.float32)))
    finally:
        torch.bernoulli, rt_.random = orig_bernoulli, orig_random
    m = {"format": FORMAT, "model": "rave_pitch", "generated_by": GENERATED_BY,
         "oracle": "acids-rave " + rave_version(), "torch": torch.__version__, "seed": SEED,
         "n_signal": n_signal, "pitch_range": [0.7, 1.3], "draws": draws, "ratios": ratios,
         "factor_list": list(pitch.factor_list), "ratio_list": [list(v) for v in pitch.ratio_list]}
    w.save(out, "rave_pitch", m)


def make_windows(out):
    """The float32 hann windows RAVE's spectral distances use (torchaudio's Spectrogram buffer,
    torch.hann_window computed by the oracle's PyTorch), for every STFT scale the goldens use. A
    LibTorch whose own float32 window differs (1.13's, by one ulp in some values from n = 512 up)
    gives gradients that differ by what the log-magnitude term makes of that: the tests read these
    to know which tolerance applies."""
    import torchaudio
    w = Writer()
    sizes = sorted(set(STEP_SCALES + TRAJECTORY_SCALES + [4096]))
    for n in sizes:
        window = torchaudio.transforms.Spectrogram(n_fft=n, win_length=n, hop_length=n // 4).window
        assert window.dtype == torch.float32 and torch.equal(window, torch.hann_window(n))
        w.add(f"window:{n}", window)
    m = {"format": FORMAT, "model": "rave_stft_windows", "generated_by": GENERATED_BY,
         "oracle": "acids-rave " + rave_version(), "torch": torch.__version__,
         "torchaudio": torchaudio.__version__, "seed": SEED, "sizes": sizes}
    w.save(out, "rave_windows", m)


# The stacks `train --config a --config b` is compared on (configs/*.toml): every shipped file,
# alone when it is a base, on v2 (and v1 where RAVE allows it) when it is an overlay.
CONFIG_STACKS = ("v1", "v2", "v3", "v2_small", "onnx", "raspberry",
                 "v2+causal", "v1+causal", "v3+causal", "v2+noise", "v2+snake", "v2+adain",
                 "v2+descript_discriminator", "v1+descript_discriminator", "v2+causal+noise",
                 "v2+wasserstein", "v2+spherical", "v2+spectral_discriminator",
                 "discrete", "discrete_v3", "discrete+causal", "v2_nopqmf", "hybrid")


# prior_v1.gin's VariationalPrior (resolution 32, res_size 512, skp_size 256, kernel 3, cycle 4,
# 10 layers) at small sizes; latent_size 2 over the RAVE's 4 dimensions (rounded to a power of
# two by Prior.__init__), so that the PCA crop is exercised.
TINY_PRIOR = {"resolution": 8, "res_size": 8, "skp_size": 6, "kernel_size": 3, "cycle_size": 2,
              "n_layers": 3, "latent_size": 2}


def make_prior_step(out):
    """Prior.training_step (VariationalPrior) on the frozen tiny v2 RAVE, float32 and float64.
    train_prior.py clears the RAVE's gin configuration before it builds the prior (so the
    prior's cached_conv convolutions keep their biases, which v1.gin turns off for RAVE's); the
    prior's settings are passed as prior_v1.gin would bind them (the PyPI package does not ship
    that file)."""
    import rave.prior
    torch.manual_seed(SEED)
    model = build("v2", TINY_V2["bindings"])
    prepare(model)
    with torch.no_grad():
        q, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64))
        model.latent_pca.copy_(q.float())
        model.latent_mean.copy_(torch.randn(4) * 0.1)
    synths = {dtype: clone(model).to(dtype).eval() for dtype in (torch.float32, torch.float64)}
    gin.clear_config()
    make = lambda synth: rave.prior.VariationalPrior(pretrained_vae=synth, n_channels=1, sr=44100,  # noqa: E731
                                                     **TINY_PRIOR)
    prior32 = make(synths[torch.float32])
    x = test_signal(2, 4096, SEED + 3)
    w = Writer()
    w.add("input:x", x, "pcm16")
    add_weights(w, model)
    w.add("buffer:latent_pca", model.latent_pca)
    w.add("buffer:latent_mean", model.latent_mean)
    state = {k: v for k, v in prior32.state_dict().items() if not k.startswith("synth.")}
    names = [k for k, _ in prior32.named_parameters() if not k.startswith("synth.")]
    for k in names:
        w.add("prior:" + k, state[k])
    tape = NoiseTape()
    results = {}
    for dtype in (torch.float32, torch.float64):
        prior = make(synths[torch.float32])  # Prior.__init__ encodes float32 zeros
        prior.load_state_dict(state, strict=False)
        prior.to(dtype)
        prior.synth = synths[dtype]
        prior.log = lambda *a, **k: None
        seen = {}
        original = prior.forward

        def forward(t, original=original, seen=seen, dtype=dtype):
            # QuantizedNormal.to_stack_one_hot hands out float32 whatever the model's dtype:
            # its 0/1 values are exact in float64 too.
            seen.setdefault("input", t.detach().clone())
            return original(t.to(dtype))

        prior.forward = forward
        original_encode = prior.encode

        def encode(b, original_encode=original_encode, seen=seen):
            z = original_encode(b)
            seen.setdefault("latent", z.detach().clone())
            return z

        prior.encode = encode
        with (tape if not tape.draws else tape.replay()):
            loss = prior.training_step(x.to(dtype).clone(), 0)
        loss.backward()
        grads = {k: p.grad.detach().clone() for k, p in prior.named_parameters()
                 if not k.startswith("synth.") and p.grad is not None}
        results[dtype] = (float(loss), grads, seen)
        if dtype == torch.float64:
            # Prior.generate with argmax: frame by frame from the first frame of a quantised
            # random latent (its later frames are overwritten).
            with torch.no_grad():
                start = prior.quantized_normal.encode(prior.diagonal_shift(torch.randn(2, 2, 12)))
                generated = prior.generate(start.clone().to(dtype), argmax=True)
                # pre_process_latent: back to the RAVE's latent, the missing dimensions drawn.
                back_tape = NoiseTape()
                with back_tape:
                    to_rave = prior.pre_process_latent(seen["latent"])
    for i, d in enumerate(tape.draws):
        w.add(f"input:draw.{i}", d)
    l64, grads64, seen64 = results[torch.float64]
    w.add("output:latent", seen64["latent"], "float64")
    w.add("output:one_hot", seen64["input"], "float64")
    w.add("input:generate.start", start)
    w.add("output:generate.argmax", generated)
    w.add("input:to_rave.draw", back_tape.draws[0])
    w.add("output:to_rave", to_rave, "float64")
    for k, g in grads64.items():
        w.add("grad:" + k, g, "float64")
    m = header(model, "v2", {
        "options": dict(TINY_V2["options"], stft_scales=STEP_SCALES, pqmf_attenuation=100),
        "prior": dict(TINY_PRIOR, latent_size=int(prior32.latent_size)),
        "loss_float32": results[torch.float32][0], "loss": l64, "params": names,
        "draw_kinds": list(tape.kinds), "derived": derived(model)})
    m["model"] = "rave_prior"
    w.save(out, "rave_prior_step", m)


def make_resampler(out):
    """RAVE's export resampler (rave/resampler.py Resampler, offline convolutions) at ratios 2 and
    3: a stereo signal down to the model's rate and a model-rate signal up to the host's."""
    import cached_conv as cc
    from rave.resampler import Resampler
    cc.use_cached_conv(False)
    w = Writer()
    cases = []
    for host, model_sr in ((88200, 44100), (132300, 44100)):
        r = Resampler(host, model_sr)
        x = test_signal(2, 4096, SEED + host % 97).reshape(1, 2, 4096)
        z = test_signal(2, 1024, SEED + 5).reshape(1, 2, 1024)
        with torch.no_grad():
            w.add(f"input:{host}.x", x, "pcm16")
            w.add(f"input:{host}.z", z, "pcm16")
            w.add(f"output:{host}.to_model", r.to_model_sampling_rate(x))
            w.add(f"output:{host}.from_model", r.from_model_sampling_rate(z))
            w.add(f"output:{host}.down_filter", r.downsample.weight)
            w.add(f"output:{host}.up_filter", r.upsample.weight)
        cases.append({"host_rate": host, "model_rate": model_sr, "ratio": int(r.ratio)})
    m = {"format": FORMAT, "model": "rave_resampler", "generated_by": GENERATED_BY,
         "oracle": "acids-rave " + rave_version(), "torch": torch.__version__, "seed": SEED, "cases": cases}
    w.save(out, "rave_resampler", m)


def make_configs(out):
    """RAVE's configurations as `rave train --config a [--config b …]` builds them (CONFIG_STACKS), at full size from the gin
    files alone: every state_dict entry's name and shape, and what training_step, its callbacks
    and configure_optimizers do with them, read from the objects RAVE builds (nothing taken from
    the gin text): the loss weights and crop, feature matching (probed: relative or not, L1 or L2),
    skipped features, the discriminator cadence, phase 1's length, both optimizers, the generator's
    LinearLR and BetaWarmupCallback's β at sampled batches (RAVE's own objects stepped there)."""
    configs = {}
    for config in CONFIG_STACKS:
        torch.manual_seed(SEED)
        model = build(config, [])
        sd = model.state_dict()
        # The feature-matching function gin bound: 2 against 1 tells relative (÷ the target) and
        # the norm (L1 |d| = 1, L2 d² = 1; relative: 1/2 and 1/4).
        fm = float(model.feature_matching_fun(torch.tensor([2.0]), torch.tensor([1.0])))
        fm_kind = {1.0: ("L1", False), 0.5: ("L1", True), 0.25: ("L2", True)}[fm]
        gen, dis = model.configure_optimizers()
        gen_opt, sched = gen["optimizer"], gen["lr_scheduler"]["scheduler"]
        dis_opt = dis["optimizer"]
        warmup = int(model.warmup)
        lr_at = sorted({0, 1, 1000, warmup // 2, warmup - 1, warmup, warmup + 5})
        lrs, b = {}, 0
        for target in lr_at:  # the lr the generator's optimizer holds during batch `target`
            while b < target:
                sched.step()
                b += 1
            lrs[str(target)] = gen_opt.param_groups[0]["lr"]
        cb = rave.BetaWarmupCallback()
        beta_at = sorted({0, 1, 2, 100, 5000, 10000, 19998, 19999, 20000, 50000})
        betas, b = {}, 0
        for target in beta_at:  # the β training_step uses in batch `target` (0-based)
            while b <= target:
                cb.on_train_batch_start(None, model, None, b)
                b += 1
            betas[str(target)] = float(model.beta_factor)
        stft = model.audio_distance.multiscale_stft
        # cached_conv's zero padding (left, right) of every convolution it builds: what causal.gin
        # changes (cc.get_padding.mode), and nothing in the state_dict shows.
        padding = {name: [int(v) for v in m._pad] for name, m in model.named_modules()
                   if isinstance(m, torch.nn.Conv1d) and hasattr(m, "_pad")
                   and not name.startswith("discriminator")}
        configs[config] = {
            "conv_padding": padding,
            "state_dict": [[k, list(v.shape)] for k, v in sd.items()],
            "parameters": sum(p.numel() for p in model.parameters()),
            "sampling_rate": int(model.sr),
            "n_band": int(model.pqmf.n_band),
            "latent_size": int(model.latent_size),
            "valid_signal_crop": bool(model.valid_signal_crop),
            "weights": {k: float(v) for k, v in model.weights.items()},
            "feature_matching_norm": fm_kind[0],
            "feature_matching_relative": fm_kind[1],
            "num_skipped_features": int(model.num_skipped_features),
            "update_discriminator_every": int(model.update_discriminator_every),
            "phase_1_duration": warmup,
            "stft_scales": [int(v) for v in stft.scales],
            "log_epsilon": float(model.audio_distance.log_epsilon),
            "gen_optimizer": {"lr": gen_opt.defaults["lr"], "betas": list(gen_opt.defaults["betas"])},
            "dis_optimizer": {"lr": dis_opt.defaults["lr"], "betas": list(dis_opt.defaults["betas"])},
            "gen_lr_at_batch": lrs,
            "beta_at_batch": betas,
        }
        print(f"rave_configs: {config}: {len(sd)} state_dict entries, {configs[config]['parameters']} parameters",
              file=sys.stderr)
    m = {"format": FORMAT, "model": "rave_configs", "generated_by": GENERATED_BY,
         "oracle": "acids-rave " + rave_version(), "torch": torch.__version__, "seed": SEED,
         "configs": configs, "quantize_callback": quantize_callback_facts()}
    Writer().save(out, "rave_configs", m)


def main():
    a = rt_golden.golden_args(__doc__, (("--only",), {"default": "", "help": "comma-separated stems to make (default: all)"}))
    torch.set_num_threads(1)
    jobs = {"rave_v2_modules": lambda: make_modules(a.out, "v2", TINY_V2),
            "rave_v2_step": lambda: make_step(a.out, "v2", TINY_V2),
            "rave_v2_trajectory": lambda: make_trajectory(a.out, "v2", TINY_V2),
            "rave_split": lambda: make_split(a.out),
            "rave_prior_step": lambda: make_prior_step(a.out),
            "rave_resampler": lambda: make_resampler(a.out),
            "rave_configs": lambda: make_configs(a.out),
            "rave_windows": lambda: make_windows(a.out),
            "rave_augment": lambda: make_augment(a.out),
            "rave_angles": lambda: make_angles(a.out),
            "rave_pitch": lambda: make_pitch(a.out),
            "rave_v2_wasserstein_step": lambda: make_step(a.out, "v2+wasserstein", TINY_WASSERSTEIN),
            "rave_v2_spherical_step": lambda: make_step(a.out, "v2+spherical", TINY_SPHERICAL),
            "rave_rvq": lambda: make_rvq(a.out),
            "rave_ema": lambda: make_ema(a.out),
            "rave_v1_step": lambda: make_step(a.out, "v1", TINY_V1),
            "rave_hybrid_step": lambda: make_step(a.out, "hybrid", TINY_HYBRID),
            "rave_v3_step": lambda: make_step(a.out, "v3", TINY_V3),
            "rave_v2_descript_discriminator_step":
                lambda: make_step(a.out, "v2+descript_discriminator", TINY_V2_DESCRIPT),
            "rave_discrete_v3_step": lambda: make_step(a.out, "discrete_v3", TINY_DISCRETE_V3),
            "rave_hybrid_mel": lambda: make_mel(a.out),
            "rave_onnx_step": lambda: make_step(a.out, "onnx", TINY_ONNX),
            "rave_raspberry_step": lambda: make_step(a.out, "raspberry", TINY_ONNX),
            "rave_v2_small_step": lambda: make_step(a.out, "v2_small", TINY_V2_SMALL),
            "rave_v2_causal_step": lambda: make_step(a.out, "v2+causal", TINY_V2_CAUSAL),
            "rave_v2_noise_step": lambda: make_step(a.out, "v2+noise", TINY_V2_NOISE),
            "rave_v2_snake_step": lambda: make_step(a.out, "v2+snake", TINY_V2_SNAKE),
            "rave_v2_adain_step": lambda: make_step(a.out, "v2+adain", TINY_V2_ADAIN),
            "rave_v2_nopqmf_step": lambda: make_step(a.out, "v2_nopqmf", TINY_NOPQMF),
            "rave_discrete_step": lambda: make_step(a.out, "discrete", TINY_DISCRETE),
            "rave_v2_spectral_discriminator_step":
                lambda: make_step(a.out, "v2+spectral_discriminator", TINY_SPECTRAL)}
    only = [s for s in a.only.split(",") if s]
    for stem, job in jobs.items():
        if not only or stem in only:
            job()
    return 0


if __name__ == "__main__":
    sys.exit(main())
