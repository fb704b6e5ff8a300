// ipuml-cellspike-gen: writes a cellSpike HDF5 file (and its meta yaml) from a simulated
// 4-compartment Hodgkin-Huxley neuron driven by 15 random conductances, for the Neuron-Inverter.
// Usage: ipuml-cellspike-gen --outPath data --cellName gen --train 8192 --val 1024 --test 1024
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include <CLI/CLI.hpp>

#include <ipuml/datasets/cellspike.hpp>
#include <ipuml/datasets/cellspike_gen.hpp>

#include "example_support.hpp"

int main(int argc, char** argv) {
  using namespace ipuml;
  CLI::App app{
      "Write a cellSpike HDF5 file from a simulated neuron (ipuml's Neuron-Inverter data)"};
  std::string out_path = ".", cell = "gen";
  datasets::CellSpikeGenOptions o;
  app.add_option("--outPath", out_path, "Directory for the data file and its meta yaml")
      ->capture_default_str();
  app.add_option("--cellName", cell,
                 "Cell name: the file is <cellName>_excite.cellSpike_4prB8kHz.data.h5")
      ->capture_default_str();
  app.add_option("--train", o.train(), "Training samples")
      ->check(examples::integer_at_least(1))
      ->capture_default_str();
  app.add_option("--val", o.val(), "Validation samples")
      ->check(examples::integer_at_least(1))
      ->capture_default_str();
  app.add_option("--test", o.test(), "Test samples")
      ->check(examples::integer_at_least(1))
      ->capture_default_str();
  app.add_option("--timeBins", o.time_bins(), "Time bins of 0.125 ms (the model expects 1600)")
      ->check(examples::integer_at_least(1))
      ->capture_default_str();
  app.add_flag("--fp16", o.fp16(), "Store float16 (as the _fp16 files) instead of float32");
  app.add_option("--seed", o.seed(), "Seed of the parameters and the noise")->capture_default_str();
  app.add_option("--noise", o.noise(), "Recording noise (standard deviation, in frame units)")
      ->check(examples::number_at_least(0))
      ->capture_default_str();
  app.add_option("--chunk", o.chunk_rows(), "Samples simulated and written at a time")
      ->check(examples::integer_at_least(1))
      ->capture_default_str();
  if (auto rc = examples::parse_command_line(app, argc, argv, "ipuml-cellspike-gen")) return *rc;
  try {
    std::filesystem::create_directories(out_path);
    const std::string data =
        (std::filesystem::path(out_path) / datasets::cellspike_data_file(cell)).string();
    const std::string meta =
        (std::filesystem::path(out_path) / datasets::cellspike_meta_file(cell)).string();
    const auto t0 = std::chrono::steady_clock::now();
    const bool tty = isatty(fileno(stderr)) != 0;
    datasets::generate_cellspike(data, o, [&](int64_t done, int64_t total) {
      if (tty) std::cerr << "\rsimulated " << done << "/" << total << std::flush;
    });
    if (tty) std::cerr << "\r" << std::string(40, ' ') << "\r";
    {
      std::ofstream m(meta);
      m << datasets::cellspike_meta_yaml(datasets::cellspike_gen_meta(o.time_bins()));
      IPUML_CHECK(m.good(), "ipuml-cellspike-gen: cannot write ", meta);
    }
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto bytes = std::filesystem::file_size(data);
    const int64_t samples = o.train() + o.val() + o.test();
    std::printf(
        "wrote %s (%.1f MB, %lld samples: %lld train, %lld val, %lld test, %s) and %s in "
        "%.1f s (%.0f samples/s)\n",
        data.c_str(), static_cast<double>(bytes) / 1e6, static_cast<long long>(samples),
        static_cast<long long>(o.train()), static_cast<long long>(o.val()),
        static_cast<long long>(o.test()), o.fp16() ? "float16" : "float32", meta.c_str(), secs,
        static_cast<double>(samples) / std::max(secs, 1e-9));
  } catch (const std::exception& e) {
    return examples::run_error("ipuml-cellspike-gen", e.what());
  }
  return 0;
}
