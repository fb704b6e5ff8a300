// <ipuml/xtensor.hpp>: zero-copy views between Tensor and xtensor containers, both ways.
#include <catch2/catch.hpp>

#include <xtensor/xarray.hpp>
#include <xtensor/xtensor.hpp>

#include <ipuml/ipuml.hpp>
#include <ipuml/xtensor.hpp>

#include "../support/error_of.hpp"

using namespace ipuml;
using Catch::Matchers::Contains;
using ipuml::testing::error_of;

TEST_CASE("from_xtensor views an xarray's memory, writes seen both ways", "[xtensor]") {
  xt::xarray<float> a = {{1.f, 2.f, 3.f}, {4.f, 5.f, 6.f}};
  Tensor t = from_xtensor(a);
  REQUIRE(t.shape() == Shape{2, 3});
  CHECK(t.dtype() == kFloat32);
  CHECK(t.data_ptr<float>() == a.data());
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3, 4, 5, 6});
  // Ops read it like any tensor.
  CHECK(sum(t, {1}).to_vector<float>() == std::vector<float>{6, 15});
  // Writes through the tensor (and its views) reach the container, and the other way round.
  t.index_put_({1, 2}, 60.0);
  CHECK(a(1, 2) == 60.f);
  a(0, 0) = -1.f;
  CHECK(t.index({0, 0}).item<float>() == -1.f);
  t.index({indexing::Slice(), 1}).fill_(0.0);
  CHECK(a(0, 1) == 0.f);
  CHECK(a(1, 1) == 0.f);
}

TEST_CASE("from_xtensor keeps the strides of column-major and fixed-rank containers", "[xtensor]") {
  xt::xtensor<float, 3, xt::layout_type::column_major> c({2, 3, 4});
  for (size_t i = 0; i < 2; ++i)
    for (size_t j = 0; j < 3; ++j)
      for (size_t k = 0; k < 4; ++k) c(i, j, k) = static_cast<float>(100 * i + 10 * j + k);
  Tensor t = from_xtensor(c);
  REQUIRE(t.shape() == Shape{2, 3, 4});
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.index({1, 2, 3}).item<float>() == 123.f);
  CHECK(t.index({0, 1, 2}).item<float>() == 12.f);
  // contiguous() copies into row-major order.
  const auto v = t.contiguous().to_vector<float>();
  CHECK(v[static_cast<size_t>(1 * 12 + 2 * 4 + 3)] == 123.f);
  // And to_xtensor refuses the strided tensor rather than copying behind the caller's back.
  CHECK_THAT(error_of([&] { to_xtensor(t); }), Contains("expected a contiguous tensor"));
}

TEST_CASE("from_xtensor of an rvalue owns the container", "[xtensor]") {
  Tensor t;
  {
    xt::xtensor<float, 1> tmp = {1.f, 2.f, 3.f};
    t = from_xtensor(std::move(tmp));
  }
  CHECK(t.to_vector<float>() == std::vector<float>{1, 2, 3});
  Tensor u = mul(t, 2.0);
  CHECK(u.to_vector<float>() == std::vector<float>{2, 4, 6});
}

TEST_CASE("to_xtensor adapts a tensor's memory and keeps it alive", "[xtensor]") {
  Tensor t = arange(0.0, 6.0).reshape({2, 3});
  auto x = to_xtensor(t);
  REQUIRE(x.dimension() == 2);
  CHECK(x.shape()[0] == 2);
  CHECK(x.shape()[1] == 3);
  CHECK(x(1, 2) == 5.f);
  CHECK(x.data() == t.data_ptr<float>());
  x(0, 1) = 42.f;
  CHECK(t.index({0, 1}).item<float>() == 42.f);
  t.index_put_({1, 0}, -7.0);
  CHECK(x(1, 0) == -7.f);
  // xtensor expressions over the view.
  xt::xarray<float> doubled = 2.f * x;
  CHECK(doubled(0, 1) == 84.f);
  // The adaptor holds the storage, so it outlives the tensor handle.
  auto y = to_xtensor(arange(0.0, 4.0));
  CHECK(y(3) == 3.f);
  // Round trip: a view of the view is the same memory.
  Tensor back = from_xtensor(doubled);
  CHECK(back.to_vector<float>() == std::vector<float>{0, 84, 4, -14, 8, 10});
}

TEST_CASE("to_xtensor refuses other dtypes, strided and symbolic tensors", "[xtensor]") {
  CHECK_THAT(error_of([] { to_xtensor(arange(int64_t{4})); }), Contains("expected a float32"));
  CHECK_THAT(error_of([] {
               to_xtensor(arange(0.0, 6.0).reshape({2, 3}).t());
             }),
             Contains("contiguous"));
  CHECK_THAT(error_of([] { to_xtensor(Tensor()); }), Contains("undefined"));
}
