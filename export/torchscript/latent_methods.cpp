#include "export/torchscript/latent_methods.h"

#include <cmath>

#include "export/torchscript/script_writer.h"

namespace rt::exporting {

void define_mel_features(torch::jit::Module& top, const graph::Mel& mel) {
  // RAVE's _mel_encode with torchaudio's MelSpectrogram (models/rave/mel.h), written out: the
  // centred STFT's reflect padding, the window-normalised power, the HTK bank, the last frame
  // dropped, log1p, the channels folded into the bins.
  top.register_buffer("mel_window", mel.window);
  top.register_buffer("mel_fb", mel.filters);
  const std::string n_fft = str(mel.n_fft), hop = str(mel.hop), pad = str(mel.n_fft / 2);
  top.define(
      "def mel_features(self, x: Tensor) -> Tensor:\n"
      "    b = x.size(0)\n"
      "    c = x.size(1)\n"
      "    flat = torch.reflection_pad1d(x.reshape(b * c, 1, x.size(2)), [" +
      pad + ", " + pad +
      "])\n"
      "    spec = torch.stft(flat.reshape(b * c, -1), " +
      n_fft + ", " + hop + ", " + n_fft +
      ", self.mel_window, False, True, True)\n"
      "    spec = spec / self.mel_window.pow(2.0).sum().sqrt()\n"
      "    power = spec.abs().pow(2.0)\n"
      "    mel = torch.matmul(power.transpose(-1, -2), self.mel_fb).transpose(-1, -2)\n"
      "    mel = mel[:, :, :-1]\n"
      "    return torch.log1p(mel).reshape(b, c * " +
      str(mel.n_mels) + ", mel.size(-1))\n");
}

void define_codebook_methods(torch::jit::Module& top, const graph::Latent& latent) {
  // RAVE's DiscreteScriptedRAVE: encode returns the residual quantiser's code indices (as
  // floats), decode sums the codes they name. The codebooks travel as one (Q, K, D) buffer;
  // the training statistics stay behind.
  top.register_buffer("codebooks", torch::stack(latent.codebooks, 0).contiguous());
  const std::string d = str(latent.full), k_max = str(latent.codebook_size - 1);
  const std::string q = str(static_cast<int64_t>(latent.codebooks.size()));
  top.define(
      "def quantize_latent(self, z: Tensor) -> Tensor:\n"
      "    residual = z.permute(0, 2, 1)\n"
      "    codes: List[Tensor] = []\n"
      "    for i in range(" +
      q +
      "):\n"
      "        embed = self.codebooks[i]\n"
      "        flat = residual.reshape(-1, " +
      d +
      ")\n"
      "        e = embed.t()\n"
      "        dist = -(flat.pow(2).sum(1, keepdim=True) - 2.0 * torch.matmul(flat, e) + e.pow(2).sum(0, "
      "keepdim=True))\n"
      "        index = torch.max(dist, -1)[1].reshape(residual.size(0), residual.size(1))\n"
      "        residual = residual - torch.embedding(embed, index)\n"
      "        codes.append(index)\n"
      "    return torch.stack(codes, 1).to(z.dtype)\n");
  top.define(
      "def dequantize_latent(self, codes: Tensor) -> Tensor:\n"
      "    index = torch.clamp(codes, 0, " +
      k_max +
      ").long()\n"
      "    out = torch.zeros([codes.size(0), " +
      d +
      ", codes.size(2)], dtype=self.codebooks.dtype, "
      "device=codes.device)\n"
      "    for i in range(" +
      q +
      "):\n"
      "        out = out + torch.embedding(self.codebooks[i], index[:, i]).permute(0, 2, 1)\n"
      "    return out\n");
}

void define_angle_methods(torch::jit::Module& top) {
  // RAVE's unit_norm_vector_to_angles and angles_to_unit_norm_vector (rave/blocks.py): the
  // L-dimensional latent as L − 1 angles scaled to [−1, 1], and back to a unit vector. Where
  // RAVE divides 0 by 0 (a latent frame whose trailing components are all zero: digital
  // silence, an all-zero input) and takes the arccos of NaN, the angle is 0, the usual
  // convention of hyperspherical coordinates; a ratio rounded past ±1 is clamped. So the file
  // never outputs NaN, and its angles equal RAVE's wherever RAVE's are finite.
  const std::string pi = num(M_PI);
  top.define(
      "def latent_to_angles(self, x: Tensor) -> Tensor:\n"
      "    norms = x.flip([1]).pow(2)\n"
      "    norms = torch.cat([norms[:, 1:2] + norms[:, 0:1], norms[:, 2:]], 1)\n"
      "    norms = norms.cumsum(1).flip([1]).sqrt()\n"
      "    defined = norms > 0.0\n"
      "    ones = torch.ones_like(norms)\n"
      "    ratio = torch.where(defined, x[:, :-1] / torch.where(defined, norms, ones), ones)\n"
      "    angles = torch.arccos(ratio.clamp(-1.0, 1.0))\n"
      "    last = torch.where(x[:, -1:] >= 0, angles[:, -1:], 2.0 * " +
      pi +
      " - angles[:, -1:])\n"
      "    angles = torch.cat([angles[:, :-1] / " +
      pi + ", last / (2.0 * " + pi +
      ")], 1)\n"
      "    return 2.0 * (angles - 0.5)\n");
  top.define(
      "def angles_to_latent(self, angles: Tensor) -> Tensor:\n"
      "    a = torch.remainder(angles / 2.0 + 0.5, 1.0)\n"
      "    a = torch.cat([a[:, :-1] * " +
      pi + ", a[:, -1:] * (2.0 * " + pi +
      ")], 1)\n"
      "    cos = a.cos()\n"
      "    sin = a.sin().cumprod(1)\n"
      "    ones = torch.ones([a.size(0), 1, a.size(2)], dtype=a.dtype, device=a.device)\n"
      "    return torch.cat([cos, ones], 1) * torch.cat([ones, sin], 1)\n");
}

}  // namespace rt::exporting
