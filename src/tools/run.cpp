// ipuml-run: launches a data-parallel ipuml program as several instances, poprun's role:
//   ipuml-run --num-instances 2 --num-replicas 4 -- ipuml-neuron-inverter --design hpar_dev
// runs 2 processes through mpirun (or srun), each with 4 / 2 local replicas; the total travels in
// IPUML_NUM_REPLICAS. One instance runs the program directly (no MPI needed).
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "example_support.hpp"

int main(int argc, char** argv) {
  CLI::App app{"Run an ipuml program as data-parallel instances over MPI (as poprun does)"};
  int instances = 1, replicas = 0;
  std::string launcher = "mpirun";
  bool print_only = false;
  std::vector<std::string> extra, command;
  app.add_option("--num-instances", instances, "Processes (instances)")
      ->check(ipuml::examples::integer_in(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--num-replicas", replicas,
                 "Replicas over all instances (default: one per instance); must divide evenly")
      ->check(ipuml::examples::integer_in(0, 1 << 20));
  app.add_option("--launcher", launcher, "mpirun (OpenMPI) or srun (Slurm)")
      ->check(CLI::IsMember({"mpirun", "srun"}))
      ->capture_default_str();
  app.add_option("--launcher-arg", extra, "An extra argument for the launcher (repeatable)");
  app.add_flag("--print", print_only, "Print the command instead of running it");
  app.add_option("command", command, "The program and its arguments (after --)")->required();
  if (auto rc = ipuml::examples::parse_command_line(app, argc, argv, "ipuml-run")) return *rc;
  if (replicas == 0) replicas = instances;
  if (replicas % instances != 0)
    return ipuml::examples::usage_error("ipuml-run", std::to_string(replicas) +
                                                         " replicas do not divide evenly over " +
                                                         std::to_string(instances) + " instances");
  const std::string rep = std::to_string(replicas);
  std::vector<std::string> args;
  if (instances == 1) {
    ::setenv("IPUML_NUM_REPLICAS", rep.c_str(), 1);
    args = command;
  } else if (launcher == "srun") {
    ::setenv("IPUML_NUM_REPLICAS", rep.c_str(), 1);
    args = {"srun", "--ntasks", std::to_string(instances), "--export=ALL"};
  } else {
    // --oversubscribe: more instances than cores is allowed (a test on a laptop); no binding, so
    // each instance's thread pool may use every core it is given (--threads sets it).
    args = {"mpirun", "-np", std::to_string(instances),  "--oversubscribe", "--bind-to",
            "none",   "-x",  "IPUML_NUM_REPLICAS=" + rep};
    if (::geteuid() == 0) args.push_back("--allow-run-as-root");
  }
  if (instances > 1) {
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), command.begin(), command.end());
  }
  if (print_only) {
    for (size_t i = 0; i < args.size(); ++i) std::cout << (i ? " " : "") << args[i];
    std::cout << "\n";
    return 0;
  }
  std::vector<char*> cargv;
  for (auto& a : args) cargv.push_back(a.data());
  cargv.push_back(nullptr);
  ::execvp(cargv[0], cargv.data());
  std::cerr << "ipuml-run: cannot run " << args[0] << " ("
            << (instances > 1 ? "is OpenMPI "
                                "installed? scripts/install-deps.sh"
                              : "not found")
            << ")\n";
  return 127;
}
