// set_flush_denormal: denormal results and inputs become zero on every thread that runs ipuml's
// kernels (oneTBB workers included), and turning it off brings them back.
#include <ipuml/ipuml.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

namespace {

// Restores the default thread count and keeps denormals, whatever the test did.
struct DenormalGuard {
  ~DenormalGuard() {
    ipuml::set_flush_denormal(false);
    ipuml::set_num_threads(0);
  }
};

bool all_zero(const ipuml::Tensor& t) {
  const auto v = t.to_vector<float>();
  return std::all_of(v.begin(), v.end(), [](float x) { return x == 0.0f; });
}
bool all_equal(const ipuml::Tensor& t, float want) {
  const auto v = t.to_vector<float>();
  return std::all_of(v.begin(), v.end(), [&](float x) { return x == want; });
}

}  // namespace

TEST_CASE("set_flush_denormal flushes denormals on every thread and can be undone", "[denormal]") {
  DenormalGuard guard;
  if (!ipuml::set_flush_denormal(false)) {
    WARN("this CPU has no flush-to-zero mode; nothing to test");
    return;
  }
  CHECK_FALSE(ipuml::flush_denormal());
  const float denormal = 1e-40f;  // below FLT_MIN (1.18e-38)
  REQUIRE(denormal > 0.0f);
  // Large enough that the elementwise kernels split the work over threads.
  const ipuml::Shape shape{1 << 18};
  const ipuml::Tensor small = ipuml::full(shape, 1e-20);
  const ipuml::Tensor tiny =
      ipuml::from_vector(std::vector<float>(size_t(1) << 18, denormal), shape);
  for (int threads : {1, 2}) {
    INFO("threads=" << threads);
    ipuml::set_num_threads(threads);
    REQUIRE(ipuml::set_flush_denormal(true));
    CHECK(ipuml::flush_denormal());
    CHECK(all_zero(small * small));  // 1e-40 as a result: flushed (FTZ)
    CHECK(all_zero(tiny * 1e10));    // 1e-40 as an input: read as zero (DAZ)
    REQUIRE(ipuml::set_flush_denormal(false));
    CHECK(all_equal(small * small, 1e-20f * 1e-20f));
    CHECK(all_equal(tiny * 1e10, denormal * 1e10f));
  }
}
