// The Neuron-Inverter regression network (1-d CNN + MLP from 4-probe voltage traces to 15
// conductance parameters), with the hpar_gc4 and hpar_dev designs and its MSE loss.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <ipuml/nn/nn.hpp>

namespace ipuml::models {

struct NeuronInverterDesign {
  // The IPU run's design: 2,980,203 parameters.
  static NeuronInverterDesign hpar_gc4() { return NeuronInverterDesign(); }
  // The small development design. Its conv list [4, 16, 32] is read as the three layers'
  // output channels (three entries, as kernel and pool have), so the convs are 4->4->16->32.
  static NeuronInverterDesign hpar_dev() {
    return NeuronInverterDesign()
        .conv_filters({4, 16, 32})
        .conv_kernels({4, 2, 2})
        .pool_sizes({4, 2, 2})
        .fc_dims({128, 128});
  }
  static NeuronInverterDesign preset(const std::string& name) {
    if (name == "hpar_gc4") return hpar_gc4();
    if (name == "hpar_dev") return hpar_dev();
    fail("NeuronInverterDesign: unknown design '", name, "' (expected hpar_gc4 or hpar_dev)");
  }

  // The time-bin length after each conv (no padding, stride 1) + max-pool; throws when a stage
  // would leave nothing.
  std::vector<int64_t> conv_lengths() const {
    std::vector<int64_t> out;
    int64_t len = num_time_bins_;
    for (size_t i = 0; i < conv_filters_.size(); ++i) {
      const int64_t conv = len - conv_kernels_[i] + 1;
      IPUML_CHECK(conv >= pool_sizes_[i], "NeuronInverterDesign: conv block ", i, " gets length ",
                  len, ", too short for kernel ", conv_kernels_[i], " and pool ", pool_sizes_[i]);
      len = conv / pool_sizes_[i];
      out.push_back(len);
    }
    return out;
  }
  int64_t flat_dim() const {
    return conv_filters_.empty() ? num_features_ * num_time_bins_
                                 : conv_filters_.back() * conv_lengths().back();
  }

  void validate() const {
    IPUML_CHECK(num_features_ > 0 && num_time_bins_ > 0 && num_outputs_ > 0,
                "NeuronInverterDesign: num_features, num_time_bins and num_outputs must be "
                "positive, got ",
                num_features_, ", ", num_time_bins_, ", ", num_outputs_);
    IPUML_CHECK(
        conv_kernels_.size() == conv_filters_.size() && pool_sizes_.size() == conv_filters_.size(),
        "NeuronInverterDesign: conv_filters ", conv_filters_, ", conv_kernels ", conv_kernels_,
        " and pool_sizes ", pool_sizes_, " must have one entry per conv block each");
    for (size_t i = 0; i < conv_filters_.size(); ++i)
      IPUML_CHECK(conv_filters_[i] > 0 && conv_kernels_[i] > 0 && pool_sizes_[i] > 0,
                  "NeuronInverterDesign: conv block ", i,
                  " needs positive filters, kernel and "
                  "pool, got ",
                  conv_filters_[i], ", ", conv_kernels_[i], ", ", pool_sizes_[i]);
    for (int64_t d : fc_dims_)
      IPUML_CHECK(d > 0, "NeuronInverterDesign: fc_dims must be positive, got ", fc_dims_);
    IPUML_CHECK(dropout_ >= 0.0 && dropout_ < 1.0,
                "NeuronInverterDesign: dropout must be in "
                "[0, 1), got ",
                dropout_);
    const auto lengths = conv_lengths();
    // Every size a design file gives, overflow-checked and bounded before a tensor is sized from
    // it: fc_dims [2^40] let std::bad_alloc escape and conv_filters [2^62] wrapped a weight's
    // byte count (a crash in zeros()).
    int64_t params = 0, acts = 0;
    bool overflow = __builtin_mul_overflow(num_features_, num_time_bins_, &acts);
    auto add_layer = [&](int64_t in, int64_t out, int64_t k) {  // weight [out, in, k] + bias
      int64_t w = 0;
      overflow = overflow || __builtin_mul_overflow(in, out, &w) ||
                 __builtin_mul_overflow(w, k, &w) || __builtin_add_overflow(w, out, &w) ||
                 __builtin_add_overflow(params, w, &params);
    };
    int64_t in = num_features_;
    for (size_t i = 0; i < conv_filters_.size(); ++i) {
      add_layer(in, conv_filters_[i], conv_kernels_[i]);
      int64_t a = 0;  // the conv's output per sample, before pooling
      overflow =
          overflow || __builtin_mul_overflow(conv_filters_[i], lengths[i] * pool_sizes_[i], &a);
      acts = std::max(acts, a);
      in = conv_filters_[i];
    }
    if (!overflow) {
      in = flat_dim();
      for (int64_t d : fc_dims_) {
        add_layer(in, d, 1);
        in = d;
      }
      add_layer(in, num_outputs_, 1);
    }
    IPUML_CHECK(!overflow && params <= kMaxParameters && acts <= kMaxParameters,
                "NeuronInverterDesign: conv_filters ", conv_filters_, ", conv_kernels ",
                conv_kernels_, ", fc_dims ", fc_dims_, " and ", num_time_bins_, " x ",
                num_features_, " inputs need ",
                overflow ? std::string("more than 2^63") : std::to_string(std::max(params, acts)),
                " parameters or activations per sample, expected at most 2^32");
  }
  static constexpr int64_t kMaxParameters = int64_t{1} << 32;

  IPUML_ARG(int64_t, num_features) = 4;  // probes: soma, axon, apical dendrite, soma-dendrite
  IPUML_ARG(int64_t, num_time_bins) = 1600;
  IPUML_ARG(std::vector<int64_t>, conv_filters) = {30, 90, 180};
  IPUML_ARG(std::vector<int64_t>, conv_kernels) = {4, 4, 4};
  IPUML_ARG(std::vector<int64_t>, pool_sizes) = {4, 4, 4};
  IPUML_ARG(std::vector<int64_t>, fc_dims) = {512, 512, 512, 256, 128};
  IPUML_ARG(double, dropout) = 0.05;
  IPUML_ARG(int64_t, num_outputs) = 15;
  // BatchNorm1d over the flattened features, always on batch statistics (no running stats).
  IPUML_ARG(bool, batch_norm_flat) = true;
  // The reference count of 2,980,203 is exactly convs + linears, so its flattened BatchNorm has
  // no learnable scale and shift; true adds them (2 x flat_dim parameters, 8,640 for hpar_gc4).
  IPUML_ARG(bool, batch_norm_affine) = false;
};

// x [B, 1600, 4] (time bins x probes, as stored) -> [B, 15].
class NeuronInverterImpl : public nn::Module {
 public:
  explicit NeuronInverterImpl(const NeuronInverterDesign& d = NeuronInverterDesign())
      : nn::Module("NeuronInverter"), design(d) {
    design.validate();
    cnn_block = register_module("cnn_block", nn::Sequential());
    int64_t in = d.num_features();
    for (size_t i = 0; i < d.conv_filters().size(); ++i) {
      cnn_block->push_back(nn::Conv1d(in, d.conv_filters()[i], d.conv_kernels()[i]));
      cnn_block->push_back(nn::MaxPool1d(d.pool_sizes()[i]));
      cnn_block->push_back(nn::ReLU());
      in = d.conv_filters()[i];
    }
    const int64_t flat = d.flat_dim();
    if (d.batch_norm_flat())
      flat_bn = register_module(
          "flat_bn", nn::BatchNorm1d(nn::BatchNorm1dOptions(flat).track_running_stats(false).affine(
                         d.batch_norm_affine())));
    fc_block = register_module("fc_block", nn::Sequential());
    in = flat;
    for (int64_t dim : d.fc_dims()) {
      fc_block->push_back(nn::Linear(in, dim));
      fc_block->push_back(nn::ReLU());
      if (d.dropout() > 0) fc_block->push_back(nn::Dropout(d.dropout()));
      in = dim;
    }
    // The last layer has no activation and no dropout: unbounded regression outputs.
    fc_block->push_back(nn::Linear(in, d.num_outputs()));
  }

  Tensor forward(const Tensor& x) override {
    const auto& d = design;
    IPUML_CHECK(x.dim() == 3 && x.size(1) == d.num_time_bins() && x.size(2) == d.num_features(),
                "NeuronInverter: expected an input [batch, ", d.num_time_bins(), ", ",
                d.num_features(), "], got shape ", shape_str(x.shape()));
    // The original's x.view(-1, 4, 1600): a reshape of the (1600, 4) layout, not a transpose,
    // so each "channel" holds interleaved probes. Kept, because the trained results depend on it.
    Tensor h = cnn_block(reshape(x, {-1, d.num_features(), d.num_time_bins()}));
    h = flatten(h, 1);
    if (flat_bn) h = flat_bn(h);
    return fc_block(h);
  }

  NeuronInverterDesign design;
  nn::Sequential cnn_block{nullptr};
  nn::BatchNorm1d flat_bn{nullptr};
  nn::Sequential fc_block{nullptr};
};
IPUML_MODULE(NeuronInverter);

// The training loss: MSE against the normalised parameters [B, 15].
inline Tensor neuron_inverter_loss(const Tensor& pred, const Tensor& target) {
  return mse_loss(pred, target);
}

}  // namespace ipuml::models
