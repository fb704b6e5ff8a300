// Counter-based random numbers (Philox4x32-10): a value depends only on (seed, stream, index),
// never on thread count or partition, so dropout masks and initialisation are reproducible.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>

namespace ipuml {

struct Philox {
  static std::array<uint32_t, 4> block(std::array<uint32_t, 4> ctr, std::array<uint32_t, 2> key) {
    constexpr uint32_t M0 = 0xD2511F53u, M1 = 0xCD9E8D57u, W0 = 0x9E3779B9u, W1 = 0xBB67AE85u;
    for (int r = 0; r < 10; ++r) {
      const uint64_t p0 = static_cast<uint64_t>(M0) * ctr[0];
      const uint64_t p1 = static_cast<uint64_t>(M1) * ctr[2];
      ctr = {static_cast<uint32_t>(p1 >> 32) ^ ctr[1] ^ key[0], static_cast<uint32_t>(p1),
             static_cast<uint32_t>(p0 >> 32) ^ ctr[3] ^ key[1], static_cast<uint32_t>(p0)};
      key[0] += W0;
      key[1] += W1;
    }
    return ctr;
  }
};

// One random stream: (seed, stream) select it; element `index` picks 4 words of it.
struct RandomStream {
  uint64_t seed = 0;
  uint64_t stream = 0;

  std::array<uint32_t, 4> words(uint64_t index) const {
    return Philox::block({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                          static_cast<uint32_t>(stream), static_cast<uint32_t>(stream >> 32)},
                         {static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)});
  }
  // Uniform in [0, 1) with 24 random bits.
  static float to_unit(uint32_t w) { return static_cast<float>(w >> 8) * (1.0f / 16777216.0f); }
  float uniform(uint64_t index) const { return to_unit(words(index)[0]); }
  // Standard normal by Box-Muller over two words of the same block.
  float normal(uint64_t index) const {
    const auto w = words(index);
    const double u1 = (static_cast<double>(w[0] >> 8) + 1.0) * (1.0 / 16777217.0);
    const double u2 = static_cast<double>(w[1] >> 8) * (1.0 / 16777216.0);
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
  // Uniform integer in [low, high) (high > low).
  int64_t integer(uint64_t index, int64_t low, int64_t high) const {
    const auto w = words(index);
    const uint64_t r = (static_cast<uint64_t>(w[0]) << 32) | w[1];
    return low + static_cast<int64_t>(r % static_cast<uint64_t>(high - low));
  }
};

// The default generator: a seed plus a count of streams handed out so far. Each random op takes
// the next stream, so a program's random numbers depend only on its seed and op order.
class Generator {
 public:
  explicit Generator(uint64_t seed = 0) : seed_(seed) {}
  void manual_seed(uint64_t seed) {
    seed_ = seed;
    next_stream_ = 0;
  }
  uint64_t seed() const { return seed_; }
  RandomStream next() { return {seed_, next_stream_++}; }
  uint64_t position() const { return next_stream_; }
  void set_position(uint64_t p) { next_stream_ = p; }

 private:
  uint64_t seed_;
  uint64_t next_stream_ = 0;
};

inline Generator& default_generator() {
  static thread_local Generator g(0);
  return g;
}

inline void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

}  // namespace ipuml
