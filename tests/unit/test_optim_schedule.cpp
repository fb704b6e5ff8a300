// LR schedulers against PyTorch's sequences (tests/golden/optim.json), the Neuron-Inverter
// warm-up-then-plateau schedule, and scheduler state save/restore.
#include <catch2/catch.hpp>

#include <ipuml/optim/optim.hpp>

#include "../support/golden.hpp"

using namespace ipuml;
using Json = nlohmann::json;

namespace {

const Json& golden_schedule(const std::string& name) {
  static const Json doc = ipuml::testing::load_golden("optim.json");
  for (auto& s : doc.at("schedulers"))
    if (s.at("name") == name) return s;
  FAIL("no scheduler case " << name);
  return doc;
}

struct Dummy {
  Tensor p = zeros({1}).requires_grad_();
  optim::SGD opt;
  explicit Dummy(double lr) : opt({p}, optim::SGDOptions(lr)) {}
};

void check_lr(const optim::Optimizer& opt, double expect, size_t i) {
  INFO("step " << i);
  CHECK(opt.get_lr(0) == Approx(expect).epsilon(1e-8).margin(1e-12));
  CHECK(opt.lr_tensor(0).item<float>() == static_cast<float>(opt.get_lr(0)));
}

}  // namespace

TEST_CASE("StepLR matches PyTorch", "[optim]") {
  const Json& g = golden_schedule("step_lr");
  Dummy d(g.at("options").at("lr"));
  optim::StepLR sch(d.opt, g.at("options").at("step_size"), g.at("options").at("gamma"));
  const auto lrs = g.at("lrs").get<std::vector<double>>();
  for (size_t i = 0; i < lrs.size(); ++i) {
    check_lr(d.opt, lrs[i], i);
    d.opt.step();
    sch.step();
  }
  CHECK(sch.last_epoch() == static_cast<int64_t>(lrs.size()));
  CHECK_THROWS_WITH(optim::StepLR(d.opt, 0), Catch::Contains("step_size 0"));
}

TEST_CASE("cosine schedule with linear warm-up matches the recorded formula", "[optim]") {
  const Json& g = golden_schedule("cosine_warmup");
  Dummy d(g.at("options").at("lr"));
  optim::CosineWithWarmup sch(d.opt, g.at("options").at("warmup_steps"),
                              g.at("options").at("total_steps"));
  const auto lrs = g.at("lrs").get<std::vector<double>>();
  for (size_t i = 0; i < lrs.size(); ++i) {
    check_lr(d.opt, lrs[i], i);
    CHECK(sch.get_last_lr()[0] == d.opt.get_lr(0));
    sch.step();
  }
  sch.step();
  CHECK(d.opt.get_lr(0) == 0.0);  // held at 0 past total_steps
  CHECK_THROWS_WITH(optim::CosineWithWarmup(d.opt, 5, 5), Catch::Contains("total_steps"));
}

TEST_CASE("ReduceLROnPlateau matches PyTorch on the recorded losses", "[optim]") {
  const Json& g = golden_schedule("reduce_on_plateau");
  const Json& o = g.at("options");
  Dummy d(o.at("lr"));
  optim::ReduceLROnPlateau sch(d.opt, optim::ReduceLROnPlateauOptions()
                                          .mode(o.at("mode"))
                                          .factor(o.at("factor"))
                                          .patience(o.at("patience"))
                                          .cooldown(o.at("cooldown"))
                                          .threshold(o.at("threshold"))
                                          .threshold_mode(o.at("threshold_mode"))
                                          .min_lr(o.at("min_lr"))
                                          .eps(o.at("eps")));
  const auto losses = g.at("losses").get<std::vector<double>>();
  const auto lrs = g.at("lrs").get<std::vector<double>>();
  for (size_t i = 0; i < losses.size(); ++i) {
    sch.step(losses[i]);
    check_lr(d.opt, lrs[i], i);
  }
  CHECK_THROWS_WITH(sch.step(), Catch::Contains("step(metric)"));
  CHECK_THROWS_WITH(optim::ReduceLROnPlateau(d.opt, optim::ReduceLROnPlateauOptions().factor(1.5)),
                    Catch::Contains("factor 1.5") && Catch::Contains("[0, 1)"));
  CHECK_THROWS_WITH(optim::ReduceLROnPlateau(d.opt, optim::ReduceLROnPlateauOptions().mode("up")),
                    Catch::Contains("mode 'up'"));
}

TEST_CASE("ReduceLROnPlateau in max mode with an absolute threshold and min_lr", "[optim]") {
  Dummy d(1.0);
  optim::ReduceLROnPlateau sch(d.opt, optim::ReduceLROnPlateauOptions()
                                          .mode("max")
                                          .threshold_mode("abs")
                                          .threshold(0.1)
                                          .patience(0)
                                          .factor(0.5)
                                          .min_lr(0.3));
  sch.step(1.0);  // best 1.0
  CHECK(d.opt.get_lr(0) == 1.0);
  sch.step(1.05);  // not better than 1.0 + 0.1
  CHECK(d.opt.get_lr(0) == 0.5);
  sch.step(1.2);  // better
  CHECK(d.opt.get_lr(0) == 0.5);
  sch.step(1.0);
  CHECK(d.opt.get_lr(0) == 0.3);  // clamped at min_lr
  sch.step(0.0);
  CHECK(d.opt.get_lr(0) == 0.3);
}

TEST_CASE("linear warm-up then ReduceLROnPlateau (the Neuron-Inverter schedule)", "[optim]") {
  Dummy d(0.1);
  optim::LinearWarmupThenPlateau sch(d.opt, 3,
                                     optim::ReduceLROnPlateauOptions().factor(0.5).patience(0));
  CHECK(d.opt.get_lr(0) == Approx(0.1 * 1 / 3));  // epoch 0
  CHECK(sch.in_warmup());
  // Validation losses of warm-up epochs (0.1 here) must not reach the plateau detector:
  // otherwise the 1.0 of epoch 3 would count as a bad epoch and halve the lr at once.
  const std::vector<double> losses = {0.1, 0.1, 0.1, 1.0, 1.0, 0.5, 0.6};
  const std::vector<double> lrs = {0.2 / 3, 0.1, 0.1, 0.1, 0.05, 0.05, 0.025};
  for (size_t i = 0; i < losses.size(); ++i) {
    sch.step(losses[i]);
    INFO("after epoch " << i);
    CHECK(d.opt.get_lr(0) == Approx(lrs[i]));
    CHECK(sch.get_last_lr()[0] == d.opt.get_lr(0));
  }
  CHECK_FALSE(sch.in_warmup());
  CHECK(sch.plateau().state().best == 0.5);
}

TEST_CASE("scheduler state restores the schedule", "[optim]") {
  Dummy a(0.1), b(0.1);
  optim::StepLR sa(a.opt, 2, 0.5), sb(b.opt, 2, 0.5);
  for (int i = 0; i < 3; ++i) sa.step();
  const optim::SchedulerState saved = sa.state();
  sb.load_state(saved);
  CHECK(b.opt.get_lr(0) == a.opt.get_lr(0));
  for (int i = 0; i < 4; ++i) {
    sa.step();
    sb.step();
    CHECK(b.opt.get_lr(0) == a.opt.get_lr(0));
  }

  Dummy c(0.1), e(0.1);
  auto opts = optim::ReduceLROnPlateauOptions().patience(1).factor(0.5);
  optim::LinearWarmupThenPlateau sc(c.opt, 1, opts), se(e.opt, 1, opts);
  for (double l : {1.0, 1.0, 0.9}) sc.step(l);
  se.load_full_state(sc.full_state());
  for (double l : {0.95, 0.95, 0.95, 0.95}) {
    sc.step(l);
    se.step(l);
    CHECK(e.opt.get_lr(0) == c.opt.get_lr(0));
  }
  CHECK(c.opt.get_lr(0) < 0.1);
}
