// The Tensor value type: creation, views sharing storage, dtype conversion, printing, and the
// errors of each op family.
#include <sstream>

#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>

using namespace ipuml;

TEST_CASE("views share storage, clone does not", "[tensor]") {
  Tensor x = arange(0.0, 12.0, 1.0).reshape({3, 4});
  Tensor t = x.t();
  CHECK_FALSE(t.is_contiguous());
  CHECK(t.shape() == Shape{4, 3});
  CHECK(t.contiguous().to_vector<float>() ==
        std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
  Tensor row = x.select(0, 1);
  row.fill_(-1.0);
  CHECK(x.to_vector<float>()[4] == -1.0f);
  Tensor c = x.clone();
  c.fill_(7.0);
  CHECK(x.to_vector<float>()[0] == 0.0f);
  Tensor e = from_vector<float>({1, 2}, {2, 1}).expand({2, 3});
  CHECK(e.to_vector<float>() == std::vector<float>{1, 1, 1, 2, 2, 2});
  CHECK(x.slice(1, 1, 4, 2).to_vector<float>() == std::vector<float>{1, 3, -1, -1, 9, 11});
}

TEST_CASE("float16 and bfloat16 round to nearest even", "[tensor][dtype]") {
  // 1 + 2^-11 is halfway between two float16 values: rounds to the even one (1.0).
  Tensor h =
      from_vector<float>({1.0f + 0x1p-11f, 1.0f + 3 * 0x1p-11f, 65520.0f, 1e-8f}, {4}).to(kFloat16);
  auto v = h.to_vector<float>();
  CHECK(v[0] == 1.0f);
  CHECK(v[1] == 1.0f + 0x1p-9f);
  CHECK(std::isinf(v[2]));
  CHECK(v[3] == Approx(5.96e-8).margin(6e-8));
  Tensor b = from_vector<float>({1.0f + 0x1p-8f, 3.14159f}, {2}).to(kBFloat16);
  auto bv = b.to_vector<float>();
  CHECK(bv[0] == 1.0f);
  CHECK(bv[1] == 3.140625f);
  CHECK(from_vector<float>({2.7f, -2.7f}, {2}).to(kInt64).to_vector<int64_t>() ==
        std::vector<int64_t>{2, -2});
}

TEST_CASE("printing shows values, shape and dtype", "[tensor]") {
  std::ostringstream os;
  os << from_vector<float>({1, 2, 3, 4}, {2, 2});
  CHECK(os.str() ==
        "tensor([[1.0000, 2.0000],\n        [3.0000, 4.0000]], shape=[2, 2], dtype=float32)");
  std::ostringstream os2;
  os2 << arange(3);
  CHECK(os2.str() == "tensor([0, 1, 2], shape=[3], dtype=int64)");
}

TEST_CASE("each op family rejects bad input with a clear error", "[tensor][errors]") {
  Tensor a = ones({2, 3}), b = ones({4, 3});
  CHECK_THROWS_WITH(add(a, b), Catch::Contains("[2, 3] and [4, 3] cannot be broadcast"));
  CHECK_THROWS_WITH(matmul(a, b), Catch::Contains("inner dimensions differ"));
  CHECK_THROWS_WITH(a.reshape({5}), Catch::Contains("cannot reshape a tensor of shape [2, 3]"));
  CHECK_THROWS_WITH(sum(a, {2}), Catch::Contains("out of range"));
  CHECK_THROWS_WITH(add(a, ones({2, 3}, kInt64)), Catch::Contains("dtypes differ"));
  CHECK_THROWS_WITH(conv2d(ones({1, 3, 8, 8}), ones({4, 2, 3, 3})),
                    Catch::Contains("input channels"));
  CHECK_THROWS_WITH(conv2d(ones({1, 1, 2, 2}), ones({1, 1, 3, 3})), Catch::Contains("too small"));
  CHECK_THROWS_WITH(max_pool2d(ones({1, 1, 1, 1}), {2, 2}),
                    Catch::Contains("smaller than the kernel"));
  CHECK_THROWS_WITH(index_select(ones({3, 2}), 0, from_vector<int64_t>({0, 5}, {2})),
                    Catch::Contains("out of range"));
  CHECK_THROWS_WITH(cross_entropy(ones({2, 10}), from_vector<int64_t>({1, 12}, {2})),
                    Catch::Contains("target 12 is out of range for 10 classes"));
  CHECK_THROWS_WITH(cross_entropy(ones({2, 10}), from_vector<int64_t>({1, 2, 3}, {3})),
                    Catch::Contains("does not match input"));
  CHECK_THROWS_WITH(dropout(a, 1.5, true), Catch::Contains("[0, 1]"));
  CHECK_THROWS_WITH(cat({a, ones({2, 4})}, 0), Catch::Contains("differs from"));
  CHECK_THROWS_WITH(exp(ones({2}, kInt64)), Catch::Contains("expected a floating-point"));
  CHECK_THROWS_WITH(layer_norm(a, {4}), Catch::Contains("does not end with normalized_shape"));
  CHECK_THROWS_WITH(embedding(ones({4, 2}), ones({3})), Catch::Contains("indices must be"));
  CHECK_THROWS_WITH(Tensor().shape(), Catch::Contains("undefined tensor"));
  CHECK_THROWS_WITH(a.item<float>(), Catch::Contains("one element"));
  CHECK_THROWS_WITH(from_vector<float>({1, 2, 3}, {2, 2}), Catch::Contains("do not fill shape"));
  // 0-dim inputs: a dim 0 is in range for reductions, but there is no dim to slice or index.
  const Tensor scalar = ones({});
  CHECK_THROWS_WITH(slice(scalar, 0, 0, 1), Catch::Contains("0-d tensor"));
  CHECK_THROWS_WITH(cat({scalar, scalar}, 0), Catch::Contains("0-dim"));
  CHECK_THROWS_WITH(index_select(scalar, 0, from_vector<int64_t>({0}, {1})),
                    Catch::Contains("rank >= 1"));
}

TEST_CASE("shapes too large for memory give an error, never a wrapped count or a crash",
          "[tensor][errors]") {
  const int64_t big = int64_t{1} << 62;
  // 2^62 x 4 x 4 elements wrapped to 0 and zeros() wrote past a 64-byte block.
  CHECK_THROWS_WITH(zeros({big, 4, 4}), Catch::Contains("has more than 2^63 elements") &&
                                            Catch::Contains("[4611686018427387904, 4, 4]"));
  CHECK_THROWS_WITH(numel({big, 4}), Catch::Contains("more than 2^63 elements"));
  // 2^61 float32 elements count fine but need 2^63 bytes.
  CHECK_THROWS_WITH(
      empty({int64_t{1} << 61}, kFloat32),
      Catch::Contains("empty: shape [2305843009213693952] needs more than 2^63 bytes") &&
          Catch::Contains("4 bytes per element"));
  CHECK_THROWS_WITH(ones({2, -3}), Catch::Contains("negative size in shape [2, -3]"));
  CHECK_THROWS_WITH(empty({2, -3}), Catch::Contains("negative dimension in shape [2, -3]"));
  // A count that fits but memory that does not: 128 TiB, the whole of x86-64's user address
  // space, is refused by any allocator, overcommitting or not.
  CHECK_THROWS_WITH(
      empty({int64_t{1} << 45}, kFloat32),
      Catch::Contains("out of host memory: could not allocate 140737488355328 bytes") &&
          Catch::Contains("float32 tensor of shape [35184372088832]"));
  // A reshape whose element count would wrap to the source's is refused, not viewed.
  Tensor x = zeros({0});
  CHECK_THROWS_WITH(x.reshape({big, 4}), Catch::Contains("more than 2^63 elements"));
  // The allocator is still usable afterwards.
  CHECK(ones({3, 3}).sum().item<float>() == 9.0f);
}
