// Bodies of the cellSpike generator (compiled once in src/lib/datasets_cellspike.cpp).
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include <nlohmann/json.hpp>

#include <ipuml/core/dtype.hpp>
#include <ipuml/core/parallel.hpp>
#include <ipuml/core/rng.hpp>
#include <ipuml/datasets/cellspike_gen.hpp>
#include <ipuml/io/hdf5.hpp>

namespace ipuml::datasets {

namespace detail {

// Hodgkin-Huxley gates (V in mV, rest -65) tabulated as steady state and the exponential-Euler
// decay over one time step, so a step costs table reads instead of exponentials.
struct HHTables {
  static constexpr double kVMin = -120.0, kVMax = 80.0, kStep = 0.05;
  static constexpr int kSize = static_cast<int>((kVMax - kVMin) / kStep) + 1;
  std::vector<float> inf[3], decay[3];  // m, h, n

  explicit HHTables(double dt) {
    for (int g = 0; g < 3; ++g) {
      inf[g].resize(kSize);
      decay[g].resize(kSize);
    }
    auto vtrap = [](double x, double y) {  // x / (exp(x/y) - 1), finite at x = 0
      return std::abs(x / y) < 1e-6 ? y * (1.0 - x / y / 2.0) : x / (std::exp(x / y) - 1.0);
    };
    for (int i = 0; i < kSize; ++i) {
      const double v = kVMin + i * kStep;
      const double am = 0.1 * vtrap(-(v + 40.0), 10.0), bm = 4.0 * std::exp(-(v + 65.0) / 18.0);
      const double ah = 0.07 * std::exp(-(v + 65.0) / 20.0),
                   bh = 1.0 / (1.0 + std::exp(-(v + 35.0) / 10.0));
      const double an = 0.01 * vtrap(-(v + 55.0), 10.0), bn = 0.125 * std::exp(-(v + 65.0) / 80.0);
      const double a[3] = {am, ah, an}, b[3] = {bm, bh, bn};
      for (int g = 0; g < 3; ++g) {
        inf[g][static_cast<size_t>(i)] = static_cast<float>(a[g] / (a[g] + b[g]));
        decay[g][static_cast<size_t>(i)] = static_cast<float>(std::exp(-dt * (a[g] + b[g])));
      }
    }
  }
  static int index(float v) {
    const double x = (static_cast<double>(v) - kVMin) / kStep;
    return std::clamp(static_cast<int>(x + 0.5), 0, kSize - 1);
  }
};

inline const HHTables& hh_tables() {
  static const HHTables t(0.025);
  return t;
}

// Log-scale ranges: parameter p in [-1, 1] gives base * spread^p.
struct HHParam {
  double base, spread;
};
inline constexpr std::array<HHParam, 15> kHHParams = {{
    {120.0, 2.0},  // 0 soma gNa (mS/cm^2)
    {36.0, 2.0},   // 1 soma gK
    {0.3, 2.0},    // 2 soma gL
    {200.0, 2.0},  // 3 axon gNa
    {40.0, 2.0},   // 4 axon gK
    {0.3, 2.0},    // 5 axon gL
    {20.0, 2.0},   // 6 apical gNa
    {10.0, 2.0},   // 7 apical gK
    {0.2, 2.0},    // 8 apical gL
    {5.0, 2.0},    // 9 basal gK
    {0.2, 2.0},    // 10 basal gL
    {2.0, 2.0},    // 11 soma-axon coupling
    {1.0, 2.0},    // 12 soma-apical coupling
    {1.0, 2.0},    // 13 soma-basal coupling
    {1.0, 1.5},    // 14 membrane capacitance (uF/cm^2)
}};

// The "excite" stimulus into the soma: three current steps of rising amplitude (uA/cm^2).
inline double excite_current(double t_ms) {
  if (t_ms >= 20 && t_ms < 60) return 4.0;
  if (t_ms >= 80 && t_ms < 120) return 8.0;
  if (t_ms >= 140 && t_ms < 180) return 15.0;
  return 0.0;
}

inline const char* kSplitNames[3] = {"train", "val", "test"};

}  // namespace detail

IPUML_INLINE CellSpikeMeta cellspike_gen_meta(int64_t time_bins) {
  CellSpikeMeta m;
  m.num_features = kCellSpikeProbes;
  m.num_time_bins = time_bins;
  m.num_par = kCellSpikeParams;
  m.feature_names = {"soma", "axon", "dend", "sodend"};
  m.par_names = {"gNa_soma",  "gK_soma",  "gL_soma", "gNa_axon",  "gK_axon",
                 "gL_axon",   "gNa_dend", "gK_dend", "gL_dend",   "gK_sodend",
                 "gL_sodend", "gc_axon",  "gc_dend", "gc_sodend", "cm"};
  return m;
}

IPUML_INLINE void simulate_cellspike(const float* unit_par, int64_t time_bins, float* frames) {
  using detail::HHTables;
  const HHTables& tab = detail::hh_tables();
  constexpr double dt = 0.025;  // ms; 5 steps per 0.125 ms bin (8 kHz)
  constexpr int kSub = 5;
  constexpr double ENa = 50.0, EK = -77.0, EL = -54.4;
  double q[15];
  for (int i = 0; i < 15; ++i) {
    const double p = std::clamp(static_cast<double>(unit_par[i]), -1.0, 1.0);
    q[i] = detail::kHHParams[static_cast<size_t>(i)].base *
           std::pow(detail::kHHParams[static_cast<size_t>(i)].spread, p);
  }
  // Compartments: 0 soma, 1 axon, 2 apical dendrite, 3 basal dendrite (no Na).
  const double gna[4] = {q[0], q[3], q[6], 0.0}, gk[4] = {q[1], q[4], q[7], q[9]},
               gl[4] = {q[2], q[5], q[8], q[10]}, gc[4] = {0.0, q[11], q[12], q[13]};
  const double cm = q[14];
  double v[4], m[4], h[4], n[4];
  for (int c = 0; c < 4; ++c) {
    v[c] = -65.0;
    const int k = HHTables::index(static_cast<float>(v[c]));
    m[c] = tab.inf[0][static_cast<size_t>(k)];
    h[c] = tab.inf[1][static_cast<size_t>(k)];
    n[c] = tab.inf[2][static_cast<size_t>(k)];
  }
  for (int64_t bin = 0; bin < time_bins; ++bin) {
    for (int s = 0; s < kSub; ++s) {
      const double t = (static_cast<double>(bin) * kSub + s) * dt;
      const double vs = v[0];
      double vnew[4];
      for (int c = 0; c < 4; ++c) {
        const size_t k = static_cast<size_t>(HHTables::index(static_cast<float>(v[c])));
        m[c] = tab.inf[0][k] + (m[c] - tab.inf[0][k]) * tab.decay[0][k];
        h[c] = tab.inf[1][k] + (h[c] - tab.inf[1][k]) * tab.decay[1][k];
        n[c] = tab.inf[2][k] + (n[c] - tab.inf[2][k]) * tab.decay[2][k];
        const double g_na = gna[c] * m[c] * m[c] * m[c] * h[c];
        const double n2 = n[c] * n[c], g_k = gk[c] * n2 * n2;
        // The soma couples to every other compartment; each of them to the soma only.
        double g_couple = 0, i_couple = 0;
        if (c == 0) {
          for (int o = 1; o < 4; ++o) {
            g_couple += gc[o];
            i_couple += gc[o] * v[o];
          }
        } else {
          g_couple = gc[c];
          i_couple = gc[c] * vs;
        }
        const double g = g_na + g_k + gl[c] + g_couple;
        const double i = g_na * ENa + g_k * EK + gl[c] * EL + i_couple +
                         (c == 0 ? detail::excite_current(t) : 0.0);
        // Implicit in each compartment's own conductance: stable at any conductance.
        vnew[c] = (cm / dt * v[c] + i) / (cm / dt + g);
      }
      for (int c = 0; c < 4; ++c) v[c] = vnew[c];
    }
    for (int c = 0; c < 4; ++c) frames[bin * 4 + c] = static_cast<float>((v[c] + 65.0) / 40.0);
  }
}

IPUML_INLINE void generate_cellspike(const std::string& path, const CellSpikeGenOptions& o,
                                     const std::function<void(int64_t, int64_t)>& progress) {
  const int64_t counts[3] = {o.train(), o.val(), o.test()};
  for (int s = 0; s < 3; ++s)
    IPUML_CHECK(counts[s] >= 1, "generate_cellspike: the ", detail::kSplitNames[s],
                " split needs at least 1 sample, got ", counts[s]);
  IPUML_CHECK(o.time_bins() >= 1 && o.chunk_rows() >= 1 && o.noise() >= 0,
              "generate_cellspike: time_bins and chunk_rows must be >= 1 and noise >= 0, got ",
              o.time_bins(), ", ", o.chunk_rows(), ", ", o.noise());
  const int64_t total = counts[0] + counts[1] + counts[2];
  const int64_t T = o.time_bins(), F = kCellSpikeProbes, P = kCellSpikeParams;
  const io::H5Dtype dt = o.fp16() ? io::H5Dtype::float16 : io::H5Dtype::float32;
  const CellSpikeMeta meta = cellspike_gen_meta(T);
  io::atomic_write(path, [&](io::H5File& f) {
    nlohmann::json j = {{"numFeature", F},
                        {"numTimeBin", T},
                        {"numPar", P},
                        {"featureName", meta.feature_names},
                        {"parName", meta.par_names},
                        {"simulator", "ipuml 4-compartment HH"},
                        {"seed", o.seed()},
                        {"noise", o.noise()}};
    f.write_string("meta.JSON", j.dump());
    int64_t done = 0;
    for (int s = 0; s < 3; ++s) {
      const std::string split = detail::kSplitNames[s];
      const int64_t n = counts[s];
      f.create_dataset(split + "_frames", dt, {n, T, F});
      f.create_dataset(split + "_unitStar_par", dt, {n, P});
      const RandomStream par_rng{o.seed(), 2 * static_cast<uint64_t>(s)};
      const RandomStream noise_rng{o.seed(), 2 * static_cast<uint64_t>(s) + 1};
      std::vector<float> frames, pars;
      std::vector<uint16_t> half;
      for (int64_t first = 0; first < n; first += o.chunk_rows()) {
        const int64_t rows = std::min(o.chunk_rows(), n - first);
        frames.resize(static_cast<size_t>(rows * T * F));
        pars.resize(static_cast<size_t>(rows * P));
        parallel_for(rows, 1, [&](int64_t b, int64_t e) {
          for (int64_t r = b; r < e; ++r) {
            const uint64_t idx = static_cast<uint64_t>(first + r);
            float* pr = pars.data() + r * P;
            for (int64_t k = 0; k < P; ++k)
              pr[k] = 2.0f * par_rng.uniform(idx * static_cast<uint64_t>(P) +
                                             static_cast<uint64_t>(k)) -
                      1.0f;
            float* fr = frames.data() + r * T * F;
            simulate_cellspike(pr, T, fr);
            if (o.noise() > 0)
              for (int64_t k = 0; k < T * F; ++k)
                fr[k] +=
                    static_cast<float>(o.noise()) *
                    noise_rng.normal(idx * static_cast<uint64_t>(T * F) + static_cast<uint64_t>(k));
          }
        });
        auto put = [&](const std::string& name, const std::vector<float>& v) {
          if (!o.fp16()) {
            f.write_rows(name, dt, first, rows, v.data());
            return;
          }
          half.resize(v.size());
          for (size_t k = 0; k < v.size(); ++k) half[k] = float_to_half_bits(v[k]);
          f.write_rows(name, dt, first, rows, half.data());
        };
        put(split + "_frames", frames);
        put(split + "_unitStar_par", pars);
        done += rows;
        if (progress) progress(done, total);
      }
    }
  });
}

}  // namespace ipuml::datasets
