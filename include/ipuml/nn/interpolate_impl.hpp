// Bodies of F::interpolate (compiled once in src/lib/nn_interpolate.cpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <utility>

#include <ipuml/core/error.hpp>
#include <ipuml/nn/interpolate.hpp>
#include <ipuml/tensor/ops.hpp>

namespace ipuml::nn {

IPUML_INLINE std::string interpolate_mode_name(InterpolateMode mode) {
  switch (mode) {
    case InterpolateMode::Nearest:
      return "nearest";
    case InterpolateMode::NearestExact:
      return "nearest-exact";
    case InterpolateMode::Linear:
      return "linear";
    case InterpolateMode::Bilinear:
      return "bilinear";
    case InterpolateMode::Bicubic:
      return "bicubic";
    case InterpolateMode::Trilinear:
      return "trilinear";
    case InterpolateMode::Area:
      return "area";
  }
  return "unknown";
}

}  // namespace ipuml::nn

namespace ipuml::nn::functional {

namespace interpolate_detail {

// One spatial dimension's resampling: output position o reads input positions index[k][o] with
// weights weight[k][o] (no weights: a plain pick).
struct Taps {
  std::vector<std::vector<int64_t>> index;
  std::vector<std::vector<float>> weight;
};

// PyTorch's coordinate arithmetic (ATen/native/UpSample.h), in float as its float32 kernels
// do it, so that indices and weights round the same way.
inline float scales_value(std::optional<double> scale, int64_t in, int64_t out) {
  return scale && *scale > 0.0 ? static_cast<float>(1.0 / *scale)
                               : static_cast<float>(in) / static_cast<float>(out);
}
inline float pixel_scale(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  if (align_corners)
    return out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  return scales_value(scale, in, out);
}
inline float source_index(float scale, int64_t o, bool align_corners, bool cubic) {
  if (align_corners) return scale * static_cast<float>(o);
  const float src = scale * (static_cast<float>(o) + 0.5f) - 0.5f;
  return !cubic && src < 0.0f ? 0.0f : src;
}

inline Taps nearest(int64_t in, int64_t out, std::optional<double> scale, bool exact) {
  Taps t;
  t.index.resize(1);
  auto& idx = t.index[0];
  const float s = scales_value(scale, in, out);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i;
    if (exact)  // nearest_neighbor_exact_compute_source_index: (o + 0.5) in double
      i = static_cast<int64_t>(
          std::floor(static_cast<float>((static_cast<double>(o) + 0.5) * static_cast<double>(s))));
    else if (out == in)
      i = o;
    else if (out == 2 * in)
      i = o >> 1;
    else
      i = static_cast<int64_t>(std::floor(static_cast<float>(o) * s));
    idx.push_back(std::min(i, in - 1));
  }
  return t;
}

inline Taps linear(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  Taps t;
  t.index.assign(2, {});
  t.weight.assign(2, {});
  const float s = pixel_scale(in, out, align_corners, scale);
  for (int64_t o = 0; o < out; ++o) {
    int64_t i0 = o, i1 = o;
    float l0 = 1.0f, l1 = 0.0f;
    if (out != in) {
      const float src = source_index(s, o, align_corners, false);
      i0 = std::min(static_cast<int64_t>(src), in - 1);
      i1 = i0 + (i0 < in - 1 ? 1 : 0);
      l1 = std::clamp(src - static_cast<float>(i0), 0.0f, 1.0f);
      l0 = 1.0f - l1;
    }
    t.index[0].push_back(i0);
    t.index[1].push_back(i1);
    t.weight[0].push_back(l0);
    t.weight[1].push_back(l1);
  }
  return t;
}

// Keys' cubic convolution with A = -0.75 (PyTorch's get_cubic_upsample_coefficients).
inline float cubic1(float x, float a) { return ((a + 2) * x - (a + 3)) * x * x + 1; }
inline float cubic2(float x, float a) { return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a; }

inline Taps cubic(int64_t in, int64_t out, bool align_corners, std::optional<double> scale) {
  Taps t;
  t.index.assign(4, {});
  t.weight.assign(4, {});
  const float s = pixel_scale(in, out, align_corners, scale);
  const float a = -0.75f;
  for (int64_t o = 0; o < out; ++o) {
    const float src = source_index(s, o, align_corners, true);
    const int64_t i = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    const float x = std::clamp(src - static_cast<float>(i), 0.0f, 1.0f);
    const float w[4] = {cubic2(x + 1.0f, a), cubic1(x, a), cubic1(1.0f - x, a),
                        cubic2(1.0f - x + 1.0f, a)};
    for (int64_t k = 0; k < 4; ++k) {
      // Reads past the borders repeat the border sample.
      t.index[static_cast<size_t>(k)].push_back(std::clamp<int64_t>(i - 1 + k, 0, in - 1));
      t.weight[static_cast<size_t>(k)].push_back(w[k]);
    }
  }
  return t;
}

// x resampled along `dim` by `taps`: sum over k of x[..., index[k], ...] * weight[k].
inline Tensor apply(const Tensor& x, int64_t dim, const Taps& taps) {
  const int64_t out = static_cast<int64_t>(taps.index[0].size());
  Shape wshape(static_cast<size_t>(x.dim()), 1);
  wshape[static_cast<size_t>(dim)] = out;
  // The index and weight tensors go where x is (a traced x captures them as constants).
  const bool moved = !x.is_symbolic() && !x.device().is_cpu();
  Tensor sum;
  for (size_t k = 0; k < taps.index.size(); ++k) {
    Tensor index = from_vector<int64_t>(taps.index[k], {out});
    if (moved) index = index.to(x.device());
    Tensor picked = index_select(x, dim, index);
    if (taps.weight.empty()) return picked;
    Tensor w = from_vector<float>(taps.weight[k], wshape);
    if (w.dtype() != x.dtype()) w = cast(w, x.dtype());
    if (moved) w = w.to(x.device());
    Tensor term = mul(picked, w);
    sum = sum.defined() ? add(sum, term) : term;
  }
  return sum;
}

}  // namespace interpolate_detail

IPUML_INLINE InterpolateFuncOptions& InterpolateFuncOptions::mode(init::Nonlinearity linear) {
  IPUML_CHECK(linear == init::Nonlinearity::Linear,
              "InterpolateFuncOptions::mode: expected an interpolation mode (kNearest, kLinear, "
              "kBilinear, kBicubic, kTrilinear, kArea, kNearestExact), got a nonlinearity other "
              "than kLinear");
  mode_ = InterpolateMode::Linear;
  return *this;
}

IPUML_INLINE Tensor interpolate(const Tensor& input, const InterpolateFuncOptions& o) {
  using namespace interpolate_detail;
  const InterpolateMode mode = o.mode();
  const std::string name = interpolate_mode_name(mode);
  IPUML_CHECK(input.defined(), "interpolate: the input is an undefined tensor");
  const int64_t rank = input.dim();
  IPUML_CHECK(rank >= 3 && rank <= 5, "interpolate: only 3-d, 4-d and 5-d inputs ([N, C, L], [N, ",
              "C, H, W], [N, C, D, H, W]) are supported, got shape ", shape_str(input.shape()),
              " for mode ", name);
  const bool interpolating = mode == InterpolateMode::Linear || mode == InterpolateMode::Bilinear ||
                             mode == InterpolateMode::Bicubic || mode == InterpolateMode::Trilinear;
  IPUML_CHECK(interpolating || !o.align_corners(),
              "interpolate: align_corners option can only be set with the interpolating modes: "
              "linear | bilinear | bicubic | trilinear (got mode ",
              name, ")");
  const int64_t needs = mode == InterpolateMode::Linear      ? 3
                        : mode == InterpolateMode::Bilinear  ? 4
                        : mode == InterpolateMode::Bicubic   ? 4
                        : mode == InterpolateMode::Trilinear ? 5
                                                             : rank;
  IPUML_CHECK(needs == rank, "interpolate: got ", rank, "D input, but ", name, " mode needs ",
              needs, "D input");
  IPUML_CHECK(mode != InterpolateMode::Area || rank < 5,
              "interpolate: area mode supports 3-d and 4-d inputs, got shape ",
              shape_str(input.shape()));
  IPUML_CHECK(!o.antialias(), "interpolate: antialias is not implemented (expected false)");
  IPUML_CHECK(o.size() || o.scale_factor(),
              "interpolate: either size or scale_factor should be defined");
  IPUML_CHECK(!(o.size() && o.scale_factor()),
              "interpolate: only one of size or scale_factor should be defined");
  const int64_t spatial = rank - 2;
  for (int64_t d = 2; d < rank; ++d)
    IPUML_CHECK(input.size(d) > 0,
                "interpolate: the input's spatial sizes must be positive, got "
                "shape ",
                shape_str(input.shape()));
  IPUML_CHECK(!interpolating || is_floating(input.dtype()), "interpolate: ", name,
              " mode needs a floating-point input, got ", dtype_name(input.dtype()));

  // The output size, and the scales the kernels map coordinates with (PyTorch passes the given
  // scale factors unless recompute_scale_factor is set).
  std::vector<int64_t> out_size;
  std::vector<std::optional<double>> scales(static_cast<size_t>(spatial));
  if (o.size()) {
    out_size = *o.size();
    IPUML_CHECK(static_cast<int64_t>(out_size.size()) == spatial, "interpolate: size must have ",
                spatial, " values for a ", rank, "-d input (one per spatial dimension), got ",
                out_size);
  } else {
    const std::vector<double>& f = *o.scale_factor();
    IPUML_CHECK(static_cast<int64_t>(f.size()) == spatial,
                "interpolate: scale_factor shape must match input shape. Input is ", spatial,
                "D, scale_factor size is ", f);
    for (int64_t d = 0; d < spatial; ++d) {
      const double factor = f[static_cast<size_t>(d)];
      IPUML_CHECK(std::isfinite(factor) && factor > 0.0,
                  "interpolate: scale_factor values must be finite and > 0, got ", f);
      const double size = std::floor(static_cast<double>(input.size(d + 2)) * factor);
      IPUML_CHECK(size <= 9.0e15, "interpolate: scale_factor ", factor, " makes dimension ", d + 2,
                  " too large");
      out_size.push_back(static_cast<int64_t>(size));
      if (!o.recompute_scale_factor().value_or(false)) scales[static_cast<size_t>(d)] = factor;
    }
  }
  for (int64_t s : out_size)
    IPUML_CHECK(s > 0, "interpolate: the output's spatial sizes must be positive, got ", out_size,
                " for input shape ", shape_str(input.shape()));

  if (mode == InterpolateMode::Area) {  // adaptive average pooling, as LibTorch does it
    if (rank == 4) return adaptive_avg_pool2d(input, out_size);
    return adaptive_avg_pool2d(input.unsqueeze(2), {1, out_size[0]}).squeeze(2);
  }
  const bool align = o.align_corners().value_or(false);
  // The last dimension first, as PyTorch's separable kernels nest the sums.
  Tensor x = input;
  for (int64_t d = spatial; d-- > 0;) {
    const int64_t in = input.size(d + 2), out = out_size[static_cast<size_t>(d)];
    const std::optional<double> scale = scales[static_cast<size_t>(d)];
    Taps taps;
    switch (mode) {
      case InterpolateMode::Nearest:
      case InterpolateMode::NearestExact:
        if (mode == InterpolateMode::Nearest && out == in) continue;  // a copy
        taps = nearest(in, out, scale, mode == InterpolateMode::NearestExact);
        break;
      case InterpolateMode::Bicubic:
        taps = cubic(in, out, align, scale);
        break;
      default:
        if (out == in) continue;  // PyTorch's weights (1, 0): a copy
        taps = linear(in, out, align, scale);
        break;
    }
    x = apply(x, d + 2, taps);
  }
  return x;
}

}  // namespace ipuml::nn::functional
