// Body of the device executable: binding host tensors, running each compute set's vertices over
// unit chunks in the device's task arena, and recording cycles (compiled in
// src/lib/emu_executor.cpp).
#pragma once

#include <chrono>
#include <cstring>
#include <limits>

#include <tbb/parallel_for.h>
#include <tbb/parallel_pipeline.h>
#include <tbb/task_arena.h>

#include <ipuml/backends/cpu/graph_executor.hpp>
#include <ipuml/backends/cpu/kernels.hpp>
#include <ipuml/backends/cpu/kernels_common.hpp>
#include <ipuml/backends/cpu/kernels_half.hpp>
#include <ipuml/backends/cpu/kernels_reduce.hpp>
#include <ipuml/backends/emu/executor.hpp>
#include <ipuml/backends/emu/profile.hpp>
#include <ipuml/backends/emu/schedule.hpp>
#include <ipuml/backends/emu/trace.hpp>
#include <ipuml/core/parallel.hpp>
#include <ipuml/core/rng.hpp>
#include <ipuml/ir/stages.hpp>

namespace ipuml::emu {

namespace xdetail {

inline int64_t prod(const Shape& s, size_t b, size_t e) {
  int64_t r = 1;
  for (size_t i = b; i < e && i < s.size(); ++i) r *= s[i];
  return r;
}

// A view of rows [b, e) of dim d: direct when nothing precedes d, else a packed copy.
struct SliceIo {
  size_t outer = 1, dim = 1, inner_bytes = 0;
  size_t b = 0, e = 0;
  bool direct = true;
};

inline SliceIo slice_io(const ir::TensorMeta& m, int d, int64_t b, int64_t e) {
  SliceIo s;
  const size_t du = static_cast<size_t>(d);
  s.outer = static_cast<size_t>(prod(m.shape, 0, du));
  s.dim = static_cast<size_t>(m.shape[du]);
  s.inner_bytes = static_cast<size_t>(prod(m.shape, du + 1, m.shape.size())) * dtype_size(m.dtype);
  s.b = static_cast<size_t>(b);
  s.e = static_cast<size_t>(e);
  s.direct = s.outer == 1;
  return s;
}

inline void gather(const SliceIo& s, const char* src, char* dst) {
  const size_t row = (s.e - s.b) * s.inner_bytes;
  for (size_t o = 0; o < s.outer; ++o)
    std::memcpy(dst + o * row, src + (o * s.dim + s.b) * s.inner_bytes, row);
}
inline void scatter(const SliceIo& s, const char* src, char* dst) {
  const size_t row = (s.e - s.b) * s.inner_bytes;
  for (size_t o = 0; o < s.outer; ++o)
    std::memcpy(dst + (o * s.dim + s.b) * s.inner_bytes, src + o * row, row);
}

// Leaves of cpu::kdetail::pairwise_sum's recursion, `depth` levels down, in order.
inline void pairwise_leaves(int64_t off, int64_t n, int depth,
                            std::vector<std::pair<int64_t, int64_t>>& out) {
  if (depth == 0 || n <= 256) {
    out.emplace_back(off, n);
    return;
  }
  int64_t half = n / 2;
  half -= half % 8;
  pairwise_leaves(off, half, depth - 1, out);
  pairwise_leaves(off + half, n - half, depth - 1, out);
}
// Combines leaf sums in the order pairwise_sum adds its halves.
inline float pairwise_combine(int64_t n, int depth, const std::vector<float>& leaf, size_t& next) {
  if (depth == 0 || n <= 256) return leaf[next++];
  int64_t half = n / 2;
  half -= half % 8;
  const float l = pairwise_combine(half, depth - 1, leaf, next);
  const float r = pairwise_combine(n - half, depth - 1, leaf, next);
  return l + r;
}

// Reads element i of a float buffer of any float dtype as float, and writes it back.
inline float load_float(const void* p, DType dt, size_t i) {
  switch (dt) {
    case DType::Float16:
      return half_bits_to_float(static_cast<const uint16_t*>(p)[i]);
    case DType::BFloat16:
      return bf16_bits_to_float(static_cast<const uint16_t*>(p)[i]);
    default:
      return static_cast<const float*>(p)[i];
  }
}
inline void store_float(void* p, DType dt, size_t i, float v) {
  switch (dt) {
    case DType::Float16:
      static_cast<uint16_t*>(p)[i] = float_to_half_bits(v);
      break;
    case DType::BFloat16:
      static_cast<uint16_t*>(p)[i] = float_to_bf16_bits(v);
      break;
    default:
      static_cast<float*>(p)[i] = v;
  }
}
// Rounds v to the partials type (float stays as it is).
inline float round_to(DType dt, float v) {
  if (dt == DType::Float16) return half_bits_to_float(float_to_half_bits(v));
  if (dt == DType::BFloat16) return bf16_bits_to_float(float_to_bf16_bits(v));
  return v;
}

}  // namespace xdetail

struct Executable::Impl {
  ir::Graph graph;
  Plan plan;
  ExecOptions exec;
  cpu::MemoryPlan mem;
  // A micro-batch in flight: its activation arena and where every value lives. Slot 0 serves
  // run(); a pipelined run_many keeps one slot per micro-batch in flight.
  struct Slot {
    std::unique_ptr<Storage> arena;
    std::vector<void*> ptr;
    std::vector<Tensor> keep;  // contiguous copies of strided inputs
  };
  std::vector<Slot> slots;
  // Pipeline stages (ir/stages.hpp): nodes per stage in program order, and the stage whose end
  // applies each state update. pipeline_ok: stages may run different micro-batches at once
  // with the bits of a sequential run (every update's state is read only in its own stage).
  int num_stages = 1;
  std::vector<std::vector<size_t>> stage_nodes;
  std::vector<int> update_stage;
  bool pipeline_ok = false;
  std::vector<std::vector<cpu::ConstBuffer>> in_bufs;
  std::vector<std::vector<cpu::MutableBuffer>> out_bufs;
  std::vector<std::unique_ptr<tbb::task_arena>> devices;  // one per emulated device
  // A K-split matrix op's partial sums and operand slices, one set per pipeline stage: a
  // stage runs its nodes one at a time (a run without stages, all of them), so its nodes share
  // the buffers, kept between runs at the largest node's size. One set per node held every
  // convolution's partials at once: gigabytes for ResNet-50 at micro-batch 18.
  struct GridScratch {
    std::vector<std::vector<float>> parts;               // partial sums, one per K part run
    std::vector<float> acc;                              // running total of the K parts
    std::vector<std::vector<float>> extra;               // a later serial slice, per K part
    std::vector<std::vector<std::vector<char>>> slices;  // gathered operand slices
  };
  std::vector<GridScratch> grid_scratch;
  RunCycles last;
  double last_wall = 0;
  static constexpr size_t kHistory = 1000;
  std::vector<RunRecord> history;  // a ring: the oldest record at history_next once full
  size_t history_next = 0;
  uint64_t runs = 0;
  EngineOptions engine;
  std::string report_path;              // <report dir>/<program>, empty: no automatic reports
  int64_t pipelined_micro_batches = 0;  // of the last pipelined run_many, for the trace
  // The states a run writes (indices into graph.states): only their versions change, so
  // replicas that share read-only states (the weights) can run at the same time.
  std::vector<size_t> updated_states;

  // Runs fn in the device's task arena. In a pipelined run the stages' threads already share the
  // host's cores through the pipeline; entering an arena whose master slot another stage holds
  // would queue the work and block the thread, so there fn runs in the caller's arena.
  bool pipelining = false;
  template <typename Fn>
  void on_device(int32_t device, Fn&& fn) {
    if (pipelining)
      fn();
    else
      devices[static_cast<size_t>(device)]->execute(std::forward<Fn>(fn));
  }

  // Exchange checking (ExecOptions::check_exchange): each value's data in per-unit pieces.
  std::vector<std::vector<std::vector<char>>> pieces;  // [value][part of its layout]
  std::vector<char> on_units;                          // [value]: its pieces are current
  double checked_inter_device_bytes = 0;               // moved over device-Links in the last run

  std::string value_name(int64_t v) const {
    const auto& val = graph.values[static_cast<size_t>(v)];
    return "value " + std::to_string(v) +
           (val.name.empty() ? std::string() : " ('" + val.name + "'") +
           (val.name.empty() ? std::string() : ")");
  }
  // The bytes [first, second) of value v that part p of its layout holds on its unit: its share
  // of the layout's bytes, as the memory accounting places them (the compiler's for_each_piece).
  std::pair<size_t, size_t> piece_range(int64_t v, int64_t p) const {
    const auto& l = plan.values[static_cast<size_t>(v)];
    const size_t bytes = graph.values[static_cast<size_t>(v)].meta.nbytes();
    IPUML_CHECK(l.span.parts >= 1 && l.span.extent >= 1 && l.bytes >= 0 &&
                    static_cast<size_t>(l.bytes) <= bytes,
                "exchange check: the layout of ", value_name(v), " (", l.span.parts,
                " parts of extent ", l.span.extent, ", ", l.bytes, " bytes) does not fit its ",
                bytes, " bytes");
    auto at = [&](int64_t q) {
      return static_cast<size_t>(static_cast<double>(l.bytes) *
                                 static_cast<double>(l.span.begin(q)) /
                                 static_cast<double>(l.span.extent));
    };
    return {at(p), at(p + 1)};
  }
  // Puts value v's data (a whole buffer) into the pieces its layout gives its units.
  void to_units(int64_t v, const void* src) {
    const auto& l = plan.values[static_cast<size_t>(v)];
    auto& ps = pieces[static_cast<size_t>(v)];
    ps.assign(static_cast<size_t>(std::max(l.span.parts, 0)), {});
    size_t held = 0;
    for (int64_t p = 0; p < l.span.parts; ++p) {
      const auto [lo, hi] = piece_range(v, p);
      const char* from = static_cast<const char*>(src);
      ps[static_cast<size_t>(p)].assign(from + lo, from + hi);
      held += hi - lo;
    }
    const size_t bytes = graph.values[static_cast<size_t>(v)].meta.nbytes();
    IPUML_CHECK(held == bytes, "exchange check: the ", plan.machine.unit_noun, "s of ",
                value_name(v), " hold ", held, " of its ", bytes, " bytes");
    on_units[static_cast<size_t>(v)] = 1;
  }
  // The exchange: value v's pieces copied into a buffer for an op on `device`; bytes no piece
  // covers stay poison (all ones: NaN in every float type).
  void from_units(int64_t v, char* dst, int32_t device, double& inter) {
    IPUML_CHECK(on_units[static_cast<size_t>(v)], "exchange check: ", value_name(v),
                " is read before any op or host transfer put it on its ", plan.machine.unit_noun,
                "s");
    std::memset(dst, 0xff, graph.values[static_cast<size_t>(v)].meta.nbytes());
    const auto& l = plan.values[static_cast<size_t>(v)];
    for (int64_t p = 0; p < l.span.parts; ++p) {
      const auto& piece = pieces[static_cast<size_t>(v)][static_cast<size_t>(p)];
      std::memcpy(dst + piece_range(v, p).first, piece.data(), piece.size());
      if (l.span.device != device) inter += static_cast<double>(piece.size());
    }
  }
  void run_checked(Slot& sl, const cpu::KernelContext& ctx) {
    const auto& g = graph;
    pieces.assign(g.values.size(), {});
    on_units.assign(g.values.size(), 0);
    checked_inter_device_bytes = 0;
    // The host streams the inputs onto their units; states are already there.
    for (auto v : g.inputs) to_units(v, sl.ptr[static_cast<size_t>(v)]);
    for (auto v : g.states) to_units(v, sl.ptr[static_cast<size_t>(v)]);
    std::vector<void*> ptr = sl.ptr;
    for (size_t n = 0; n < g.nodes.size(); ++n) {
      const auto& node = g.nodes[n];
      const auto& np = plan.nodes[n];
      std::vector<std::vector<char>> ins(node.inputs.size()), outs(node.outputs.size());
      double inter = 0;
      for (size_t j = 0; j < node.inputs.size(); ++j) {
        const int64_t v = node.inputs[j];
        ins[j].resize(std::max<size_t>(g.values[static_cast<size_t>(v)].meta.nbytes(), 1));
        from_units(v, ins[j].data(), np.span.device, inter);
        ptr[static_cast<size_t>(v)] = ins[j].data();
      }
      IPUML_CHECK(inter <= np.inter_device_bytes + 0.5, "exchange check: op ", n, " (",
                  ir::op_name(node.kind), ") on ", plan.machine.device_noun, " ", np.span.device,
                  " receives ", inter, " bytes from other ", plan.machine.device_noun,
                  "s, but its plan pays for ", np.inter_device_bytes);
      checked_inter_device_bytes += inter;
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        const int64_t v = node.outputs[k];
        outs[k].assign(std::max<size_t>(g.values[static_cast<size_t>(v)].meta.nbytes(), 1),
                       static_cast<char>(0xff));
        ptr[static_cast<size_t>(v)] = outs[k].data();
      }
      run_node(n, ctx, ptr);
      for (size_t k = 0; k < node.outputs.size(); ++k) {
        const int64_t v = node.outputs[k];
        const auto& l = plan.values[static_cast<size_t>(v)];
        IPUML_CHECK(l.span.device == np.span.device, "exchange check: op ", n, " (",
                    ir::op_name(node.kind), ") runs on ", plan.machine.device_noun, " ",
                    np.span.device, " but its result ", value_name(v), " is laid out on ",
                    plan.machine.device_noun, " ", l.span.device);
        to_units(v, outs[k].data());
        // The host-visible copy: outputs and state updates are read from the slot at the end.
        if (sl.ptr[static_cast<size_t>(v)] != nullptr)
          std::memcpy(sl.ptr[static_cast<size_t>(v)], outs[k].data(),
                      g.values[static_cast<size_t>(v)].meta.nbytes());
      }
    }
  }

  void add_slot();
  void find_stages();
  void bind(Slot& sl, const std::vector<Tensor>& inputs, const std::vector<Tensor>& states);
  std::vector<Tensor> collect_outputs(const Slot& sl) const;
  void apply_updates(const Slot& sl, int stage);  // stage -1: every update
  void record(uint64_t step, double wall);

  // Rows [b, e) of node n's split: every unit in the range runs its vertex's slice in one call.
  void run_rows(size_t n, int64_t b, int64_t e, const cpu::KernelContext& ctx) {
    const auto& node = graph.nodes[n];
    const auto& np = plan.nodes[n];
    const auto& full_in = in_bufs[n];
    const auto& full_out = out_bufs[n];
    if (b == 0 && e == np.spec.extent) {
      cpu::run_kernel(node.kind, node.attrs, full_in, full_out, ctx);
      return;
    }
    std::vector<cpu::ConstBuffer> in(full_in);
    std::vector<cpu::MutableBuffer> out(full_out);
    std::vector<std::unique_ptr<char[]>> scratch;
    std::vector<std::pair<size_t, xdetail::SliceIo>> scatters;
    if (np.spec.kind == SplitKind::Flat) {
      for (auto& x : in) {
        const size_t es = dtype_size(x.meta.dtype);
        x.data = static_cast<const char*>(x.data) + static_cast<size_t>(b) * es;
        x.meta.shape = {e - b};
      }
      for (auto& x : out) {
        const size_t es = dtype_size(x.meta.dtype);
        x.data = static_cast<char*>(x.data) + static_cast<size_t>(b) * es;
        x.meta.shape = {e - b};
      }
    } else {
      for (size_t j = 0; j < in.size(); ++j) {
        const int d = np.spec.in_dim[j];
        if (d < 0) continue;
        const auto s = xdetail::slice_io(in[j].meta, d, b, e);
        in[j].meta.shape[static_cast<size_t>(d)] = e - b;
        if (s.direct) {
          in[j].data = static_cast<const char*>(in[j].data) + s.b * s.inner_bytes;
        } else {
          scratch.emplace_back(new char[std::max<size_t>(in[j].meta.nbytes(), 1)]);
          xdetail::gather(s, static_cast<const char*>(full_in[j].data), scratch.back().get());
          in[j].data = scratch.back().get();
        }
      }
      const int d = np.spec.out_dim;
      for (size_t j = 0; j < out.size(); ++j) {
        const auto s = xdetail::slice_io(out[j].meta, d, b, e);
        out[j].meta.shape[static_cast<size_t>(d)] = e - b;
        if (s.direct) {
          out[j].data = static_cast<char*>(out[j].data) + s.b * s.inner_bytes;
        } else {
          scratch.emplace_back(new char[std::max<size_t>(out[j].meta.nbytes(), 1)]);
          out[j].data = scratch.back().get();
          scatters.emplace_back(j, s);
        }
      }
    }
    cpu::run_kernel(node.kind, slice_attrs(graph, node, np.spec, b, e), in, out, ctx);
    for (auto& [j, s] : scatters)
      xdetail::scatter(s, static_cast<const char*>(out[j].data),
                       static_cast<char*>(full_out[j].data));
  }

  // A full float sum: leaves of the pairwise tree on the units, combined in the tree's order, so
  // the result is the CPU kernel's bit for bit.
  void run_tree_sum(size_t n, int64_t chunks) {
    const auto* x = static_cast<const float*>(in_bufs[n][0].data);
    auto* y = static_cast<float*>(out_bufs[n][0].data);
    const int64_t len = in_bufs[n][0].meta.numel();
    using cpu::kdetail::kReduceBlock;
    if (len > kReduceBlock) {
      const int64_t nb = (len + kReduceBlock - 1) / kReduceBlock;
      std::vector<double> part(static_cast<size_t>(nb));
      auto leaf = [&](int64_t i) {
        const int64_t b0 = i * kReduceBlock, e0 = std::min(len, b0 + kReduceBlock);
        part[static_cast<size_t>(i)] =
            static_cast<double>(cpu::kdetail::pairwise_sum(x + b0, e0 - b0));
      };
      if (chunks > 1)
        tbb::parallel_for(int64_t{0}, nb, leaf);
      else
        for (int64_t i = 0; i < nb; ++i) leaf(i);
      *y = static_cast<float>(cpu::kdetail::pairwise_sum_d(part.data(), nb));
      return;
    }
    int depth = 0;
    while ((int64_t{1} << depth) < plan.nodes[n].span.parts && depth < 20) ++depth;
    std::vector<std::pair<int64_t, int64_t>> leaves;
    xdetail::pairwise_leaves(0, len, depth, leaves);
    std::vector<float> sums(leaves.size());
    auto leaf = [&](size_t i) {
      sums[i] = cpu::kdetail::pairwise_sum(x + leaves[i].first, leaves[i].second);
    };
    if (chunks > 1)
      tbb::parallel_for(size_t{0}, leaves.size(), leaf);
    else
      for (size_t i = 0; i < leaves.size(); ++i) leaf(i);
    size_t next = 0;
    const float s = xdetail::pairwise_combine(len, depth, sums, next);
    *y = static_cast<float>(static_cast<double>(s));
  }

  // A matrix op whose K is split: each K part sums its serial slices, the parts' partial sums
  // (rounded to the partials type) are added in order, and the total is cast to the output's
  // type, as the units and the reduction compute set form them. K parts run in parallel when
  // their partials fit a modest buffer; the order of the final sum never changes.
  void run_grid_k(size_t n, const cpu::KernelContext& ctx) {
    const auto& node = graph.nodes[n];
    const auto& np = plan.nodes[n];
    auto& sc = grid_scratch[static_cast<size_t>(std::max(node.stage, 0))];
    const auto& full_in = in_bufs[n];
    const auto& out = out_bufs[n][0];
    const size_t numel = static_cast<size_t>(out.meta.numel());
    const int64_t K = np.spec.extent, sk = np.grid.sk, pk = np.grid.pk;
    const int64_t slices = np.grid.k_slices();
    const bool parallel = pk > 1 && numel * static_cast<size_t>(pk) * 4 <= (size_t{64} << 20);
    const size_t bufs = parallel ? static_cast<size_t>(pk) : 1;
    const bool out_f32 = out.meta.dtype == DType::Float32;
    const ir::TensorMeta fmeta{out.meta.shape, DType::Float32};
    const DType partials = plan.partials_type;
    sc.parts.resize(bufs);
    sc.slices.resize(bufs);
    sc.extra.resize(bufs);
    for (size_t i = 0; i < bufs; ++i) {
      sc.parts[i].resize(numel);
      sc.slices[i].resize(full_in.size());
    }
    // Part kp's partial sums into buffer `buf`.
    auto run_part = [&](int64_t kp, size_t buf) {
      float* part = sc.parts[buf].data();
      for (int64_t s = 0; s < sk; ++s) {
        const int64_t idx = kp * sk + s;
        const int64_t b = part_begin(K, 1, slices, idx), e = part_begin(K, 1, slices, idx + 1);
        if (e <= b) {
          if (s == 0) std::fill(part, part + numel, 0.0f);
          continue;
        }
        std::vector<cpu::ConstBuffer> in;
        for (size_t j = 0; j < full_in.size(); ++j) {
          const int d = np.spec.in_dim[j];
          if (d < 0) {  // a bias joins the first slice's sum only
            if (idx == 0) in.push_back(full_in[j]);
            continue;
          }
          cpu::ConstBuffer x = full_in[j];
          const auto io = xdetail::slice_io(x.meta, d, b, e);
          x.meta.shape[static_cast<size_t>(d)] = e - b;
          if (io.direct) {
            x.data = static_cast<const char*>(x.data) + io.b * io.inner_bytes;
          } else {
            auto& scratch = sc.slices[buf][j];
            scratch.resize(std::max<size_t>(x.meta.nbytes(), 1));
            xdetail::gather(io, static_cast<const char*>(full_in[j].data), scratch.data());
            x.data = scratch.data();
          }
          in.push_back(x);
        }
        // Slices sum in float whatever the output's type: half operands are widened, and only
        // the partials type and the final result round.
        if (s == 0) {  // the first slice writes the partials in place
          std::vector<cpu::MutableBuffer> o{{part, fmeta}};
          cpu::run_kernel(node.kind, node.attrs, in, o, ctx);
          continue;
        }
        sc.extra[buf].resize(numel);
        float* dst = sc.extra[buf].data();
        std::vector<cpu::MutableBuffer> o{{dst, fmeta}};
        cpu::run_kernel(node.kind, node.attrs, in, o, ctx);
        for (size_t i = 0; i < numel; ++i) part[i] += dst[i];
      }
      if (partials != DType::Float32)
        for (size_t i = 0; i < numel; ++i) part[i] = xdetail::round_to(partials, part[i]);
    };
    auto* outf = static_cast<float*>(out.data);
    auto finish = [&](size_t b, size_t e, const float* acc) {
      if (out_f32) {
        if (acc != outf) std::copy(acc + b, acc + e, outf + b);
      } else {
        for (size_t i = b; i < e; ++i) xdetail::store_float(out.data, out.meta.dtype, i, acc[i]);
      }
    };
    auto add_into = [&](float* acc, const float* part, size_t b, size_t e) {
      if (partials == DType::Float32) {
        for (size_t i = b; i < e; ++i) acc[i] += part[i];
      } else {
        for (size_t i = b; i < e; ++i) acc[i] = xdetail::round_to(partials, acc[i] + part[i]);
      }
    };
    const size_t grain = 1 << 14;
    if (parallel) {
      tbb::parallel_for(int64_t{0}, pk, [&](int64_t kp) { run_part(kp, static_cast<size_t>(kp)); });
      tbb::parallel_for(
          tbb::blocked_range<size_t>(0, numel, grain), [&](const tbb::blocked_range<size_t>& r) {
            float* acc = sc.parts[0].data();
            for (int64_t kp = 1; kp < pk; ++kp)
              add_into(acc, sc.parts[static_cast<size_t>(kp)].data(), r.begin(), r.end());
            finish(r.begin(), r.end(), acc);
          });
      return;
    }
    sc.acc.resize(numel);
    for (int64_t kp = 0; kp < pk; ++kp) {
      run_part(kp, 0);
      tbb::parallel_for(tbb::blocked_range<size_t>(0, numel, grain),
                        [&](const tbb::blocked_range<size_t>& r) {
                          if (kp == 0)
                            std::copy(sc.parts[0].data() + r.begin(), sc.parts[0].data() + r.end(),
                                      sc.acc.data() + r.begin());
                          else
                            add_into(sc.acc.data(), sc.parts[0].data(), r.begin(), r.end());
                        });
    }
    tbb::parallel_for(
        tbb::blocked_range<size_t>(0, numel, grain),
        [&](const tbb::blocked_range<size_t>& r) { finish(r.begin(), r.end(), sc.acc.data()); });
  }

  // Whether node n's half results are rounded stochastically: every arithmetic op and cast that
  // writes float16/bfloat16 (moving or creating elements rounds nothing).
  bool rounds_stochastically(size_t n) const {
    if (!exec.stochastic_rounding) return false;
    const auto k = graph.nodes[n].kind;
    if (cpu::kdetail::dtype_generic(k) && k != ir::OpKind::Cast) return false;
    for (auto& b : out_bufs[n])
      if (cpu::kdetail::is_half(b.meta.dtype)) return true;
    return false;
  }

  void run_node(size_t n, const cpu::KernelContext& ctx, const std::vector<void*>& ptr) {
    const auto& node = graph.nodes[n];
    for (size_t i = 0; i < node.inputs.size(); ++i)
      in_bufs[n][i].data = ptr[static_cast<size_t>(node.inputs[i])];
    for (size_t i = 0; i < node.outputs.size(); ++i)
      out_bufs[n][i].data = ptr[static_cast<size_t>(node.outputs[i])];
    if (!rounds_stochastically(n)) return run_node_body(n, ctx);
    // The op computes its half results in float32 scratch; each element is then rounded with
    // counter-based random bits (seed, node, step, element index), so the bits do not depend on
    // how the units were chunked over threads.
    const auto real = out_bufs[n];
    std::vector<std::vector<float>> wide(real.size());
    for (size_t i = 0; i < real.size(); ++i) {
      if (!cpu::kdetail::is_half(real[i].meta.dtype)) continue;
      wide[i].resize(static_cast<size_t>(real[i].meta.numel()));
      out_bufs[n][i] = {wide[i].data(), {real[i].meta.shape, DType::Float32}};
    }
    run_node_body(n, ctx);
    out_bufs[n] = real;
    const RandomStream rs{exec.rounding_seed ^ 0x5ec0'0d5a'11ce'd00dULL,
                          static_cast<uint64_t>(n) + (ctx.rng_step << 32)};
    for (size_t i = 0; i < real.size(); ++i) {
      if (wide[i].empty()) continue;
      const float* src = wide[i].data();
      auto* dst = static_cast<uint16_t*>(real[i].data);
      const bool f16 = real[i].meta.dtype == DType::Float16;
      const uint64_t salt = static_cast<uint64_t>(i) << 56;
      cpu::kdetail::parallel_blocks(
          real[i].meta.numel(), cpu::kdetail::kBlock, [&](int64_t b, int64_t e) {
            for (int64_t j = b; j < e; ++j) {
              const uint32_t r = rs.words(salt | static_cast<uint64_t>(j))[0];
              dst[j] = f16 ? float_to_half_bits_stochastic(src[j], r)
                           : float_to_bf16_bits_stochastic(src[j], r);
            }
          });
    }
  }

  void run_node_body(size_t n, const cpu::KernelContext& ctx) {
    const auto& node = graph.nodes[n];
    const auto& np = plan.nodes[n];
    if (np.spec.kind == SplitKind::Grid || np.spec.kind == SplitKind::Rows || np.follows >= 0) {
      // B, M and N parts, row ranges and elements on an input's layout give the same bits in
      // one call, which parallelises inside itself. K's partial sums change the arithmetic only
      // when they are rounded to half (setPartialsType(half)): float partials differ from one
      // call's float accumulation in the order of additions alone, an order the emulator does not
      // model within a unit either, so they run as one call too (at MNIST's sizes the many small
      // per-part calls cost more than the arithmetic). A sum asked for in float32 (Sum's flag: a
      // 16-bit mean or variance, as a batch norm's statistics) keeps float partials.
      const bool float_sum = node.kind == ir::OpKind::Sum && node.attrs.flag;
      if (np.spec.kind == SplitKind::Grid && np.grid.k_slices() > 1 &&
          plan.partials_type != DType::Float32 && k_parts_are_sums(node.kind) && !float_sum) {
        on_device(np.span.device, [&] { run_grid_k(n, ctx); });
      } else {
        cpu::run_kernel(node.kind, node.attrs, in_bufs[n], out_bufs[n], ctx);
      }
      return;
    }
    const int64_t parts = np.span.parts;
    double work = np.flops;
    for (auto& b : in_bufs[n]) work += static_cast<double>(b.meta.nbytes());
    for (auto& b : out_bufs[n]) work += static_cast<double>(b.meta.nbytes());
    int64_t chunks = exec.max_chunks > 0 ? exec.max_chunks : std::max(1, ipuml::get_num_threads());
    chunks = std::min(chunks, parts);
    if (np.spec.merge_all || np.spec.kind == SplitKind::Whole || work < exec.min_parallel_work)
      chunks = 1;
    auto body = [&] {
      if (np.spec.kind == SplitKind::TreeSum) return run_tree_sum(n, chunks);
      if (chunks <= 1)
        return run_rows(n, 0, np.spec.kind == SplitKind::Whole ? np.spec.extent : np.spec.extent,
                        ctx);
      // Chunk c takes whole units [parts*c/C, parts*(c+1)/C): each unit's slice, merged.
      tbb::parallel_for(
          tbb::blocked_range<int64_t>(0, chunks, 1),
          [&](const tbb::blocked_range<int64_t>& r) {
            for (int64_t c = r.begin(); c < r.end(); ++c) {
              const int64_t p0 = parts * c / chunks, p1 = parts * (c + 1) / chunks;
              const int64_t b = np.span.begin(p0), e = np.span.begin(p1);
              if (e > b) run_rows(n, b, e, ctx);
            }
          },
          tbb::simple_partitioner());
    };
    if (chunks <= 1 && np.spec.kind != SplitKind::TreeSum)
      body();  // one call: the kernel parallelises inside itself
    else
      on_device(np.span.device, body);
  }
};

IPUML_INLINE Executable::Executable(ir::Graph graph, Plan plan, ExecOptions exec)
    : impl_(std::make_unique<Impl>()) {
  auto& m = *impl_;
  m.graph = std::move(graph);
  m.plan = std::move(plan);
  m.exec = exec;
  IPUML_CHECK(m.plan.model != nullptr && m.plan.machine == m.plan.model->machine(),
              "emulator executable: the plan carries no target model matching its machine (a plan "
              "read with load_plan needs compile_plan, which checks it and attaches the model)");
  IPUML_CHECK(
      m.plan.nodes.size() == m.graph.nodes.size() && m.plan.values.size() == m.graph.values.size(),
      "emulator executable: the plan has ", m.plan.nodes.size(), " nodes and ",
      m.plan.values.size(), " values but the graph has ", m.graph.nodes.size(), " and ",
      m.graph.values.size());
  for (size_t n = 0; n < m.graph.nodes.size(); ++n) {
    const auto& np = m.plan.nodes[n];
    IPUML_CHECK(
        np.span.parts >= 1 && np.span.device >= 0 && np.span.device < m.plan.machine.devices &&
            np.spec.in_dim.size() == (np.spec.kind == SplitKind::Whole && np.spec.in_dim.empty()
                                          ? 0
                                          : m.graph.nodes[n].inputs.size()),
        "emulator executable: the plan of node ", n, " does not fit the graph");
  }
  m.mem = cpu::plan_memory(m.graph);
  // The host memory of the values is allocated at the first run (add_slot), not here: a program
  // compiled to be sized (a compile-only estimate of a model on the meta device) never has it.
  m.in_bufs.resize(m.graph.nodes.size());
  m.out_bufs.resize(m.graph.nodes.size());
  for (size_t n = 0; n < m.graph.nodes.size(); ++n) {
    for (auto v : m.graph.nodes[n].inputs)
      m.in_bufs[n].push_back({nullptr, m.graph.values[static_cast<size_t>(v)].meta});
    for (auto v : m.graph.nodes[n].outputs)
      m.out_bufs[n].push_back({nullptr, m.graph.values[static_cast<size_t>(v)].meta});
  }
  m.find_stages();
  m.grid_scratch.resize(static_cast<size_t>(std::max(m.num_stages, 1)));
  for (int64_t i = 0; i < m.plan.machine.devices; ++i)
    m.devices.push_back(std::make_unique<tbb::task_arena>());
  m.last = m.plan.cycles;
  m.engine = engine_options_from_env();  // an invalid IPUML_ENGINE_OPTIONS is an error anyway
  if (m.engine.check_exchange) m.exec.check_exchange = true;
  if (m.exec.check_exchange) {
    // One vertex call per unit: each sees only the slice its unit was given.
    m.exec.max_chunks = std::numeric_limits<int64_t>::max();
    m.exec.min_parallel_work = 0;
  }
  for (size_t i = 0; i < m.graph.states.size(); ++i)
    for (const auto& u : m.graph.updates)
      if (u.state == m.graph.states[i]) {
        m.updated_states.push_back(i);
        break;
      }
  std::string dir = m.exec.report_dir;
  if (dir.empty() && m.engine.auto_report) dir = m.engine.directory;
  if (!dir.empty() && m.exec.write_reports) {
    m.report_path = claim_report_directory(dir, m.exec.program_name);
    write_profile(m.report_path);
  }
}

IPUML_INLINE Executable::~Executable() = default;

IPUML_INLINE void Executable::set_host_threads(int threads) {
  for (auto& a : impl_->devices)
    a = threads > 0 ? std::make_unique<tbb::task_arena>(threads)
                    : std::make_unique<tbb::task_arena>();
}

IPUML_INLINE std::unique_ptr<Executable> Executable::replica() const {
  ExecOptions e = impl_->exec;
  e.write_reports = false;
  return std::make_unique<Executable>(impl_->graph, impl_->plan, e);
}

IPUML_INLINE void Executable::Impl::add_slot() {
  Slot sl;
  try {
    sl.arena = std::make_unique<Storage>(std::max<size_t>(mem.arena_bytes, 64));
  } catch (const std::bad_alloc&) {
    HostAllocator::instance().empty_cache();
    fail("emulator: out of host memory: the program's values need ", mem.arena_bytes,
         " bytes of this machine's memory to run (expected a smaller batch or model; a "
         "compile-only estimate needs none)");
  }
  sl.ptr.assign(graph.values.size(), nullptr);
  for (size_t v = 0; v < graph.values.size(); ++v)
    if (mem.offset[v] >= 0) sl.ptr[v] = static_cast<char*>(sl.arena->data()) + mem.offset[v];
  slots.push_back(std::move(sl));
}

IPUML_INLINE void Executable::Impl::find_stages() {
  const auto& g = graph;
  num_stages = ir::stage_count(g);
  stage_nodes.assign(static_cast<size_t>(num_stages), {});
  for (size_t n = 0; n < g.nodes.size(); ++n)
    stage_nodes[static_cast<size_t>(std::max(g.nodes[n].stage, 0))].push_back(n);
  // Stages must follow program order for a stage to find its inputs computed.
  pipeline_ok = num_stages > 1;
  for (size_t n = 1; n < g.nodes.size(); ++n)
    pipeline_ok = pipeline_ok && g.nodes[n].stage >= g.nodes[n - 1].stage;
  std::vector<int> reader_lo(g.values.size(), num_stages), reader_hi(g.values.size(), -1);
  for (auto& node : g.nodes)
    for (auto v : node.inputs) {
      reader_lo[static_cast<size_t>(v)] = std::min(reader_lo[static_cast<size_t>(v)], node.stage);
      reader_hi[static_cast<size_t>(v)] = std::max(reader_hi[static_cast<size_t>(v)], node.stage);
    }
  update_stage.assign(g.updates.size(), num_stages - 1);
  for (size_t i = 0; i < g.updates.size(); ++i) {
    const auto& u = g.updates[i];
    const auto& val = g.values[static_cast<size_t>(u.value)];
    if (val.kind != ir::ValueKind::Op || val.node < 0) {
      pipeline_ok = false;
      continue;
    }
    const int st = std::max(g.nodes[static_cast<size_t>(val.node)].stage, 0);
    update_stage[i] = st;
    const size_t sv = static_cast<size_t>(u.state);
    if (reader_hi[sv] >= 0 && (reader_lo[sv] != st || reader_hi[sv] != st)) pipeline_ok = false;
  }
}

IPUML_INLINE void Executable::Impl::bind(Slot& sl, const std::vector<Tensor>& inputs,
                                         const std::vector<Tensor>& states) {
  const auto& g = graph;
  IPUML_CHECK(inputs.size() == g.inputs.size(), "emulator run: the graph takes ", g.inputs.size(),
              " inputs, got ", inputs.size());
  IPUML_CHECK(states.size() == g.states.size(), "emulator run: the graph binds ", g.states.size(),
              " state tensors, got ", states.size());
  sl.keep.clear();
  auto one = [&](int64_t v, const Tensor& t, const char* what, size_t i) {
    const auto& meta = g.values[static_cast<size_t>(v)].meta;
    IPUML_CHECK(t.defined() && t.shape() == meta.shape && t.dtype() == meta.dtype,
                "emulator run: ", what, " ", i, " ('", g.values[static_cast<size_t>(v)].name,
                "') must have shape ", shape_str(meta.shape), " and dtype ", dtype_name(meta.dtype),
                ", got ", t.defined() ? shape_str(t.shape()) : "undefined", " ",
                t.defined() ? dtype_name(t.dtype()) : "");
    IPUML_CHECK(!t.is_symbolic(), "emulator run: ", what, " ", i, " is symbolic");
    if (t.is_contiguous()) {
      sl.ptr[static_cast<size_t>(v)] = t.raw_data();
    } else {
      IPUML_CHECK(std::string(what) == "input", "emulator run: state tensor ", i, " ('",
                  g.values[static_cast<size_t>(v)].name, "') is not contiguous");
      sl.keep.push_back(t.contiguous());
      sl.ptr[static_cast<size_t>(v)] = sl.keep.back().raw_data();
    }
  };
  for (size_t i = 0; i < inputs.size(); ++i) one(g.inputs[i], inputs[i], "input", i);
  for (size_t i = 0; i < states.size(); ++i) one(g.states[i], states[i], "state", i);
}

IPUML_INLINE std::vector<Tensor> Executable::Impl::collect_outputs(const Slot& sl) const {
  std::vector<Tensor> outputs;
  for (auto v : graph.outputs) {
    const auto& meta = graph.values[static_cast<size_t>(v)].meta;
    auto impl = std::make_shared<TensorImpl>();
    impl->shape = meta.shape;
    impl->strides = contiguous_strides(meta.shape);
    impl->dtype = meta.dtype;
    impl->storage = std::make_shared<Storage>(meta.nbytes());
    std::memcpy(impl->storage->data(), sl.ptr[static_cast<size_t>(v)], meta.nbytes());
    outputs.emplace_back(std::move(impl));
  }
  return outputs;
}

IPUML_INLINE void Executable::Impl::apply_updates(const Slot& sl, int stage) {
  const auto& g = graph;
  // Every update reads the step's values before any state changes (a state may feed another).
  std::vector<std::vector<char>> snap(g.updates.size());
  auto mine = [&](size_t i) { return stage < 0 || update_stage[i] == stage; };
  for (size_t i = 0; i < g.updates.size(); ++i) {
    const auto& u = g.updates[i];
    if (mine(i) && g.values[static_cast<size_t>(u.value)].kind != ir::ValueKind::Op) {
      const char* src = static_cast<const char*>(sl.ptr[static_cast<size_t>(u.value)]);
      snap[i].assign(src, src + g.values[static_cast<size_t>(u.value)].meta.nbytes());
    }
  }
  for (size_t i = 0; i < g.updates.size(); ++i) {
    if (!mine(i)) continue;
    const auto& u = g.updates[i];
    const void* src = snap[i].empty() ? sl.ptr[static_cast<size_t>(u.value)] : snap[i].data();
    std::memcpy(sl.ptr[static_cast<size_t>(u.state)], src,
                g.values[static_cast<size_t>(u.state)].meta.nbytes());
  }
}

IPUML_INLINE void Executable::Impl::record(uint64_t step, double wall) {
  last = plan.cycles;  // the schedule is static, so every run costs the plan's cycles
  last_wall = wall;
  // A ring of the last kHistory runs, rotated into order when read.
  if (history.size() < kHistory) {
    history.push_back(RunRecord{step, last, wall});
  } else {
    history[history_next] = RunRecord{step, last, wall};
    history_next = (history_next + 1) % kHistory;
  }
  ++runs;
}

IPUML_INLINE std::vector<Tensor> Executable::run(const std::vector<Tensor>& inputs,
                                                 const std::vector<Tensor>& states, uint64_t step) {
  auto& m = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  if (m.slots.empty()) m.add_slot();
  auto& sl = m.slots[0];
  m.bind(sl, inputs, states);
  cpu::KernelContext ctx;
  ctx.rng_step = step;
  if (m.exec.check_exchange)
    m.run_checked(sl, ctx);
  else
    for (size_t n = 0; n < m.graph.nodes.size(); ++n) m.run_node(n, ctx, sl.ptr);
  std::vector<Tensor> outputs = m.collect_outputs(sl);
  m.apply_updates(sl, -1);
  sl.keep.clear();
  for (size_t i : m.updated_states) states[i].impl()->version++;
  m.record(step, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  if (!m.report_path.empty() && m.runs == 1) write_profile(m.report_path);
  return outputs;
}

IPUML_INLINE std::vector<std::vector<Tensor>> Executable::run_many(
    const std::vector<RunItem>& items, bool pipelined) {
  auto& m = *impl_;
  std::vector<std::vector<Tensor>> outs(items.size());
  // Slots in flight: one per stage at most, within a memory budget for the extra arenas.
  size_t in_flight = std::min(items.size(), static_cast<size_t>(m.num_stages));
  const size_t budget = size_t{2} << 30;
  if (m.mem.arena_bytes > 0)
    in_flight = std::min(in_flight, std::max<size_t>(1, budget / m.mem.arena_bytes));
  if (!pipelined || !m.pipeline_ok || in_flight < 2 || m.exec.check_exchange) {
    for (size_t i = 0; i < items.size(); ++i)
      outs[i] = run(items[i].inputs, *items[i].states, items[i].step);
    return outs;
  }
  while (m.slots.size() < in_flight) m.add_slot();
  const auto t0 = std::chrono::steady_clock::now();
  // Micro-batch i lives in slot i % in_flight; a token for it exists only once micro-batch
  // i - in_flight has left the last stage. Every stage takes micro-batches in order, one at a
  // time, so each node and each state sees the order of a sequential run: the same bits.
  size_t next = 0;
  auto filters = tbb::make_filter<void, size_t>(
      tbb::filter_mode::serial_in_order, [&](tbb::flow_control& fc) -> size_t {
        if (next == items.size()) {
          fc.stop();
          return 0;
        }
        const size_t i = next++;
        m.bind(m.slots[i % in_flight], items[i].inputs, *items[i].states);
        return i;
      });
  for (int st = 0; st < m.num_stages; ++st) {
    filters =
        filters & tbb::make_filter<size_t, size_t>(
                      tbb::filter_mode::serial_in_order, [&m, &items, st, in_flight](size_t i) {
                        auto& sl = m.slots[i % in_flight];
                        cpu::KernelContext ctx;
                        ctx.rng_step = items[i].step;
                        for (size_t n : m.stage_nodes[static_cast<size_t>(st)])
                          m.run_node(n, ctx, sl.ptr);
                        m.apply_updates(sl, st);
                        return i;
                      });
  }
  const auto last =
      filters & tbb::make_filter<size_t, void>(tbb::filter_mode::serial_in_order, [&](size_t i) {
        auto& sl = m.slots[i % in_flight];
        outs[i] = m.collect_outputs(sl);
        sl.keep.clear();
        for (size_t k : m.updated_states) (*items[i].states)[k].impl()->version++;
      });
  m.pipelining = true;
  try {
    tbb::parallel_pipeline(in_flight, last);
  } catch (...) {
    m.pipelining = false;
    throw;
  }
  m.pipelining = false;
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() /
                      static_cast<double>(items.size());
  const bool first = m.runs == 0;
  for (auto& it : items) m.record(it.step, wall);
  m.pipelined_micro_batches = static_cast<int64_t>(items.size());
  if (!m.report_path.empty() && first) write_profile(m.report_path);
  return outs;
}

IPUML_INLINE bool Executable::pipelinable() const { return impl_->pipeline_ok; }
IPUML_INLINE int Executable::num_stages() const { return impl_->num_stages; }

IPUML_INLINE double Executable::cycles_for(int64_t micro_batches, bool pipelined) const {
  const auto& m = *impl_;
  if (!pipelined || m.num_stages <= 1)
    return m.plan.cycles.total * static_cast<double>(std::max<int64_t>(micro_batches, 0));
  return pipelined_cycles(stage_cycles(m.graph, m.plan), *m.plan.model, micro_batches);
}

IPUML_INLINE const ir::Graph& Executable::graph() const { return impl_->graph; }
IPUML_INLINE const Plan& Executable::plan() const { return impl_->plan; }
IPUML_INLINE const emu::TargetModel& Executable::model() const { return *impl_->plan.model; }
IPUML_INLINE const emu::Machine& Executable::machine() const { return impl_->plan.machine; }
IPUML_INLINE const MemoryReport& Executable::memory_report() const { return impl_->plan.memory; }
IPUML_INLINE bool Executable::loaded_from_cache() const { return impl_->plan.from_cache; }
IPUML_INLINE void Executable::set_memory_report(MemoryReport m) {
  impl_->plan.memory = std::move(m);
}
IPUML_INLINE void Executable::set_cycles(const RunCycles& c) {
  impl_->plan.cycles = c;
  impl_->last = c;
}
IPUML_INLINE void Executable::set_exec_options(const ExecOptions& e) { impl_->exec = e; }
IPUML_INLINE const RunCycles& Executable::last_run_cycles() const { return impl_->last; }
IPUML_INLINE double Executable::checked_inter_device_bytes() const {
  return impl_->checked_inter_device_bytes;
}
IPUML_INLINE double Executable::last_run_wall_seconds() const { return impl_->last_wall; }
IPUML_INLINE std::vector<RunRecord> Executable::run_history() const {
  const auto& h = impl_->history;
  std::vector<RunRecord> out(h.begin() + static_cast<std::ptrdiff_t>(impl_->history_next), h.end());
  out.insert(out.end(), h.begin(), h.begin() + static_cast<std::ptrdiff_t>(impl_->history_next));
  return out;
}

IPUML_INLINE std::string Executable::profile_json(double samples_per_step) const {
  return make_profile_json(impl_->graph, impl_->plan, run_history(), samples_per_step);
}
IPUML_INLINE std::string Executable::trace_json() const {
  TraceOptions o;
  o.program = impl_->exec.program_name;
  o.pipelined_micro_batches = impl_->pipelined_micro_batches;
  return make_trace_json(impl_->graph, impl_->plan, o);
}
IPUML_INLINE void Executable::write_profile(const std::string& directory,
                                            double samples_per_step) const {
  write_report_file(directory, "profile.json", profile_json(samples_per_step));
  write_report_file(directory, "trace.json", trace_json());
}
IPUML_INLINE const std::string& Executable::report_directory() const { return impl_->report_path; }
IPUML_INLINE const std::string& Executable::program_name() const {
  return impl_->exec.program_name;
}
IPUML_INLINE void Executable::print_profile_summary(std::ostream& os,
                                                    double samples_per_step) const {
  emu::print_profile_summary(os, impl_->graph, impl_->plan, run_history(), samples_per_step);
}

IPUML_INLINE std::unique_ptr<Executable> compile(const ir::Graph& graph,
                                                 const TargetModelPtr& target,
                                                 const CompileOptions& options) {
  ExecOptions exec;
  exec.stochastic_rounding = options.stochastic_rounding;
  exec.rounding_seed = options.rounding_seed;
  exec.check_exchange = options.check_exchange;
  exec.program_name = options.program_name;
  exec.report_dir = options.report_dir;
  return std::make_unique<Executable>(graph, compile_plan(graph, target, options), exec);
}

}  // namespace ipuml::emu
