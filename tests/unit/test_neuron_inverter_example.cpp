// The Neuron-Inverter example end to end on a generated cellSpike file: logs, CSV, HTML plot,
// checkpoint and resume; and MPI data parallelism: `mpirun -np 2` with one replica each gives the
// weights of one process with two replicas, and a killed rank ends the job with a clear error.
#include <ipuml/datasets/cellspike.hpp>
#include <ipuml/datasets/cellspike_gen.hpp>
#include <ipuml/dist/communicator.hpp>
#include <ipuml/io/checkpoint.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include "../support/run_command.hpp"

#include "../support/temp_dir.hpp"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

using namespace ipuml;
namespace fs = std::filesystem;

namespace {

struct TempDir : ipuml::testing::TempDir {
  TempDir() : ipuml::testing::TempDir("ipuml_test_neuron_ex") {}
};

std::string run(const std::string& cmd, int* status) {
  return ipuml::testing::run_command(cmd, status);
}

const fs::path kExe =
    fs::path(IPUML_BINARY_DIR) / "examples" / "neuron_inverter" / "ipuml-neuron-inverter";

// A small generated data set: 160 training samples, 32 validation and test samples.
std::string make_data(const TempDir& dir) {
  datasets::generate_cellspike(dir.file(datasets::cellspike_data_file("t")),
                               datasets::CellSpikeGenOptions().train(160).val(32).test(32).seed(5));
  std::ofstream(dir.file(datasets::cellspike_meta_file("t")))
      << datasets::cellspike_meta_yaml(datasets::cellspike_gen_meta());
  return " --design hpar_dev --dataPath " + dir.path.string() +
         " --cellName t --device cpu --maxSamples 160 --maxValSamples 32 --localBS 8 "
         "--stepsPerIter 5 --threads 1 --no-profile";
}

// "train loss X, val loss Y (target variance Z)" of every epoch line (times left out).
std::string losses(const std::string& out) {
  std::istringstream in(out);
  std::string line, all;
  while (std::getline(in, line))
    if (line.rfind("Epoch ", 0) == 0 && line.find(": train loss") != std::string::npos)
      all += line.substr(0, line.find(", LR")) + "\n";
  return all;
}

std::string mpirun() {
  std::string cmd = "mpirun -np 2 --oversubscribe --bind-to none";
  if (::geteuid() == 0) cmd += " --allow-run-as-root";
  return cmd;
}

bool have_mpi() {
  int st = 0;
  run("mpirun --version", &st);
  return dist::mpi_built() && st == 0;
}

}  // namespace

TEST_CASE("neuron-inverter example: trains, logs, plots, checkpoints and resumes",
          "[neuron_example]") {
  if (!fs::exists(kExe)) {
    WARN("ipuml-neuron-inverter not built, skipping");
    return;
  }
  TempDir dir;
  const std::string base = kExe.string() + make_data(dir) + " --outPath " + dir.file("out");
  int st = 0;
  std::string out = run(base + " --epochs 2", &st);
  INFO(out);
  REQUIRE(st == 0);
  CHECK_THAT(out, Catch::Contains("design hpar_dev: 425347 parameters") &&
                      Catch::Contains("Epoch 1/2: train loss") &&
                      Catch::Contains("Avg samp/msec/IPU") && Catch::Contains("Epoch 2/2") &&
                      Catch::Contains("gNa_soma") && Catch::Contains("Test loss ") &&
                      Catch::Contains("target variance"));
  std::ifstream csv(dir.file("out/scalars.csv"));
  std::string header, row;
  std::getline(csv, header);
  CHECK(header.rfind("epoch,train_loss,val_loss,lr", 0) == 0);
  int rows = 0;
  while (std::getline(csv, row)) ++rows;
  CHECK(rows == 2);
  std::ifstream html(dir.file("out/training.html"));
  const std::string page((std::istreambuf_iterator<char>(html)), std::istreambuf_iterator<char>());
  CHECK_THAT(page, Catch::Contains("<svg") && Catch::Contains("<polyline"));
  CHECK(io::read_checkpoint(dir.file("out/checkpoint.h5")).step == 2);

  out = run(base + " --epochs 3", &st);
  CHECK(st == 0);
  CHECK_THAT(out, Catch::Contains("after epoch 2") && Catch::Contains("Epoch 3/3") &&
                      !Catch::Contains("Epoch 1/3"));

  out = run(kExe.string() + " --dataPath " + dir.file("nowhere"), &st);
  CHECK(st != 0);
  CHECK_THAT(out, Catch::Contains("ipuml-cellspike-gen"));
  out = run(kExe.string() + " --design no_such_design", &st);
  CHECK(st != 0);
  CHECK_THAT(out, Catch::Contains("no design 'no_such_design'"));
}

TEST_CASE("mpi: mpirun -np 2 with one replica each equals one process with two replicas", "[mpi]") {
  if (!fs::exists(kExe) || !have_mpi()) {
    WARN("ipuml-neuron-inverter or MPI not available, skipping");
    return;
  }
  TempDir dir;
  const std::string args = make_data(dir) + " --epochs 2";
  int st = 0;
  const std::string one =
      run(kExe.string() + args + " --replication-factor 2 --outPath " + dir.file("one"), &st);
  INFO(one);
  REQUIRE(st == 0);
  const std::string two = run(mpirun() + " -x IPUML_NUM_REPLICAS=2 " + kExe.string() + args +
                                  " --outPath " + dir.file("two"),
                              &st);
  INFO(two);
  REQUIRE(st == 0);
  CHECK_THAT(two, Catch::Contains("instances 2 (mpi), replicas 2 (1 per instance)"));
  // The same losses, and the same weights to 1e-6.
  CHECK(losses(one) == losses(two));
  CHECK(losses(one).size() > 0);
  const auto a = io::read_checkpoint(dir.file("one/checkpoint.h5"));
  const auto b = io::read_checkpoint(dir.file("two/checkpoint.h5"));
  REQUIRE(a.model.size() == b.model.size());
  double worst = 0;
  for (size_t i = 0; i < a.model.size(); ++i) {
    REQUIRE(a.model[i].first == b.model[i].first);
    const auto x = a.model[i].second.to_vector<float>(), y = b.model[i].second.to_vector<float>();
    REQUIRE(x.size() == y.size());
    for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, std::abs(double(x[k]) - y[k]));
  }
  CHECK(worst <= 1e-6);
  CHECK(a.step == 2);
}

TEST_CASE("mpi: a killed rank makes the other exit with a clear error instead of hanging",
          "[mpi]") {
  if (!fs::exists(kExe) || !have_mpi()) {
    WARN("ipuml-neuron-inverter or MPI not available, skipping");
    return;
  }
  TempDir dir;
  const std::string args = make_data(dir) + " --epochs 2 --outPath " + dir.file("out");
  int st = 0;
  const auto t0 = std::chrono::steady_clock::now();
  const std::string out = run("IPUML_DIST_TIMEOUT=20 timeout 120 " + mpirun() +
                                  " -x IPUML_NUM_REPLICAS=2 -x IPUML_DIST_TIMEOUT " +
                                  kExe.string() + args + " --test-kill-rank1-at 1",
                              &st);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  INFO(out);
  CHECK(st != 0);
  CHECK(st != 124);  // not the timeout's
  CHECK(secs < 60);
  CHECK_THAT(out, Catch::Contains("rank 1 kills itself") &&
                      (Catch::Contains("another rank of the job failed or was killed") ||
                       Catch::Contains("no answer from the other ranks") ||
                       Catch::Contains("exited on signal 9")));
}
