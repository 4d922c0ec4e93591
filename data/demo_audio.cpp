#include "data/demo_audio.h"

#include <cmath>
#include <functional>
#include <random>

#include "data/audio_io.h"
#include "util/error.h"
#include "util/path_kind.h"
#include "util/signals.h"

namespace rt {
namespace {

constexpr double kTwoPi = 6.283185307179586;

using Synth = std::function<void(AudioData&, std::mt19937_64&)>;

double uniform(std::mt19937_64& rng, double lo, double hi) {
  return std::uniform_real_distribution<double>(lo, hi)(rng);
}

// Additive tone with 1/k harmonics, slow vibrato and a tremolo envelope.
void harmonic_tone(AudioData& a, std::mt19937_64& rng) {
  const double sr = a.sample_rate;
  for (size_t c = 0; c < a.channels.size(); ++c) {
    const double f0 = uniform(rng, 110.0, 440.0);
    const double vib = uniform(rng, 4.0, 6.0);
    double phase = 0.0;
    for (size_t t = 0; t < a.channels[c].size(); ++t) {
      const double time = static_cast<double>(t) / sr;
      phase += kTwoPi * f0 * (1.0 + 0.005 * std::sin(kTwoPi * vib * time)) / sr;
      double v = 0.0;
      for (int k = 1; k <= 8 && k * f0 < sr / 2; ++k) v += std::sin(k * phase) / k;
      a.channels[c][t] = static_cast<float>(0.25 * v * (0.8 + 0.2 * std::sin(kTwoPi * 0.5 * time)));
    }
  }
}

// Exponential sine sweep 50 Hz → 0.45·sr, repeated every 2 s.
void chirp(AudioData& a, std::mt19937_64& rng) {
  const double sr = a.sample_rate, period = 2.0, f_lo = 50.0, f_hi = 0.45 * sr;
  const double k = std::log(f_hi / f_lo) / period;
  const double offset = uniform(rng, 0.0, period);
  for (auto& ch : a.channels) {
    for (size_t t = 0; t < ch.size(); ++t) {
      const double tau = std::fmod(static_cast<double>(t) / sr + offset, period);
      ch[t] = static_cast<float>(0.4 * std::sin(kTwoPi * f_lo * (std::exp(k * tau) - 1.0) / k));
    }
  }
}

// Low-passed white noise in short bursts with exponential decay.
void noise_bursts(AudioData& a, std::mt19937_64& rng) {
  std::normal_distribution<double> gauss(0.0, 1.0);
  const double sr = a.sample_rate;
  const size_t hop = static_cast<size_t>(uniform(rng, 0.15, 0.35) * sr);
  for (auto& ch : a.channels) {
    double lp = 0.0;
    const double alpha = uniform(rng, 0.1, 0.6);
    for (size_t t = 0; t < ch.size(); ++t) {
      lp += alpha * (gauss(rng) - lp);
      const double env = std::exp(-static_cast<double>(t % hop) / (0.04 * sr));
      ch[t] = static_cast<float>(0.3 * lp * env);
    }
  }
}

// Karplus–Strong plucked strings at random pitches.
void plucks(AudioData& a, std::mt19937_64& rng) {
  const double sr = a.sample_rate;
  const size_t n = a.channels.empty() ? 0 : a.channels[0].size();
  const size_t hop = static_cast<size_t>(0.5 * sr);
  for (auto& ch : a.channels) std::fill(ch.begin(), ch.end(), 0.0f);
  for (size_t start = 0; start < n; start += hop) {
    const size_t delay = static_cast<size_t>(sr / uniform(rng, 80.0, 660.0));
    std::vector<double> line(delay);
    for (auto& v : line) v = uniform(rng, -0.5, 0.5);
    const double pan = uniform(rng, 0.2, 0.8);
    size_t pos = 0;
    for (size_t t = start; t < std::min(n, start + 2 * hop); ++t) {
      const double out = line[pos];
      line[pos] = 0.996 * 0.5 * (line[pos] + line[(pos + 1) % delay]);
      pos = (pos + 1) % delay;
      for (size_t c = 0; c < a.channels.size(); ++c) {
        const double gain = a.channels.size() == 1 ? 1.0 : (c == 0 ? 1.0 - pan : pan);
        a.channels[c][t] += static_cast<float>(0.6 * gain * out);
      }
    }
  }
}

// A slow chord progression of three sines per chord.
void chords(AudioData& a, std::mt19937_64& rng) {
  const double sr = a.sample_rate;
  const double root = uniform(rng, 130.0, 260.0);
  const double ratios[4][3] = {{1.0, 1.25, 1.5}, {1.0, 1.2, 1.5}, {1.125, 1.5, 1.875}, {0.75, 1.0, 1.25}};
  for (size_t c = 0; c < a.channels.size(); ++c) {
    for (size_t t = 0; t < a.channels[c].size(); ++t) {
      const double time = static_cast<double>(t) / sr;
      const auto& chord = ratios[static_cast<size_t>(time) % 4];
      double v = 0.0;
      for (double r : chord) v += std::sin(kTwoPi * root * r * (1.0 + 0.002 * static_cast<double>(c)) * time);
      a.channels[c][t] = static_cast<float>(0.2 * v);
    }
  }
}

struct Recipe {
  const char* path;
  const char* format;
  int sample_rate;
  int channels;
  Synth synth;
};

}  // namespace

std::vector<DemoFile> generate_demo_audio(const std::filesystem::path& dir, double seconds_per_file,
                                          uint64_t seed, bool replace) {
  // Every file is synthesised in memory: an hour of 48 kHz stereo is 1.4 GB of floats.
  if (!(seconds_per_file > 0 && seconds_per_file <= kMaxDemoSeconds)) {
    throw Error("--demo_seconds " + std::to_string(seconds_per_file) + ": must be in (0, " +
                std::to_string(static_cast<int>(kMaxDemoSeconds)) + "] seconds");
  }
  const std::vector<Recipe> recipes = {
      {"tones/harmonic_44k_mono.wav", "wav16", 44100, 1, harmonic_tone},
      {"tones/chords_48k_stereo.wav", "wav24", 48000, 2, chords},
      {"chirps/chirp_32k_mono.flac", "flac16", 32000, 1, chirp},
      {"chirps/chirp_22k_stereo.aiff", "aiff16", 22050, 2, chirp},
      {"noise/bursts_16k_mono.ogg", "ogg", 16000, 1, noise_bursts},
      {"plucks/plucks_44k_stereo.flac", "flac24", 44100, 2, plucks},
      {"plucks/nested/deeper/plucks_24k_mono.aiff", "aiff24", 24000, 1, plucks},
      {"mixed_48k_stereo.ogg", "ogg", 48000, 2, harmonic_tone},
  };
  if (!replace) {
    for (const auto& r : recipes) {
      if (something_is_at(dir / r.path)) {
        throw Error("--generate_demo: '" + (dir / r.path).string() +
                    "' already exists; pass --force to replace the demo's files, or choose another folder");
      }
    }
  }
  std::vector<DemoFile> written;
  for (size_t i = 0; i < recipes.size(); ++i) {
    const auto& r = recipes[i];
    throw_if_stop_requested("while writing demo audio to " + dir.string());
    std::mt19937_64 rng(seed * 1000003ULL + i);
    AudioData audio;
    audio.sample_rate = r.sample_rate;
    const size_t frames = static_cast<size_t>(std::llround(seconds_per_file * r.sample_rate));
    audio.channels.assign(static_cast<size_t>(r.channels), std::vector<float>(frames, 0.0f));
    r.synth(audio, rng);
    write_audio_file(dir / r.path, audio, audio_format_from_name(r.format));
    written.push_back(
        {r.path, r.format, r.sample_rate, r.channels, static_cast<double>(frames) / r.sample_rate});
  }
  return written;
}

}  // namespace rt
