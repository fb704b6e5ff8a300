// The model zoo against its references: exact parameter counts (torchvision, Hugging Face, the
// Neuron-Inverter's), checkpoint names, tied weights listed once, shapes, causal and padding
// masks that really mask, a few optimizer steps lowering the loss, and IPU placement in traces.
#include <catch2/catch.hpp>

#include <ipuml/ipuml.hpp>
#include <ipuml/models/models.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <set>
#include <string>
#include <vector>

using namespace ipuml;
using namespace ipuml::models;

namespace {

int64_t count_params(const nn::Module& m) {
  int64_t n = 0;
  for (auto& p : m.parameters()) n += p.numel();
  return n;
}

bool has(const nn::StateDict& d, const std::string& name) {
  return nn::find_in(d, name) != nullptr;
}

void check_unique_names(const nn::Module& m) {
  std::set<std::string> seen;
  for (auto& [name, t] : m.state_dict()) {
    INFO(name);
    CHECK(seen.insert(name).second);
  }
}

// The IPU of every node of kind `k`, in graph order.
std::vector<int> ipus_of(const ir::Graph& g, ir::OpKind k) {
  std::vector<int> out;
  for (auto& n : g.nodes)
    if (n.kind == k) out.push_back(n.placement);
  return out;
}

// Traces forward + loss + backward without running anything.
template <typename F>
ir::Graph trace_step(F&& step) {
  ir::Tracer tracer;
  Tensor loss = step(tracer);
  loss.backward();
  return tracer.finish({loss}).graph;
}

double max_abs_diff(const Tensor& a, const Tensor& b) { return amax(abs(sub(a, b))).item<float>(); }

}  // namespace

// ---- ResNet -------------------------------------------------------------------------------

TEST_CASE("ResNet: torchvision's parameter counts and names", "[zoo][resnet][slow]") {
  manual_seed(0);
  // torchvision's figures (sum(p.numel() for p in resnetXX().parameters())).
  CHECK(count_params(*resnet18().ptr()) == 11'689'512);
  CHECK(count_params(*resnet34().ptr()) == 21'797'672);
  CHECK(count_params(*resnet101().ptr()) == 44'549'160);
  ResNet r50 = resnet50();
  CHECK(count_params(*r50.ptr()) == 25'557'032);
  // torchvision's state_dict: 161 parameters + 53 BatchNorms x 3 buffers.
  auto sd = r50->state_dict();
  CHECK(sd.size() == 320);
  check_unique_names(*r50.ptr());
  for (const char* name :
       {"conv1.weight", "bn1.weight", "bn1.bias", "bn1.running_mean", "bn1.running_var",
        "bn1.num_batches_tracked", "layer1.0.conv1.weight", "layer1.0.conv3.weight",
        "layer1.0.bn3.weight", "layer1.0.downsample.0.weight", "layer1.0.downsample.1.weight",
        "layer1.0.downsample.1.running_var", "layer3.5.conv2.weight", "layer4.2.bn3.bias",
        "fc.weight", "fc.bias"}) {
    INFO(name);
    CHECK(has(sd, name));
  }
  CHECK_FALSE(has(sd, "layer1.1.downsample.0.weight"));
  CHECK(nn::find_in(sd, "layer2.0.conv2.weight")->shape() == Shape{128, 128, 3, 3});
  CHECK(nn::find_in(sd, "layer4.0.downsample.0.weight")->shape() == Shape{2048, 1024, 1, 1});
  CHECK(nn::find_in(sd, "fc.weight")->shape() == Shape{1000, 2048});
  // v1.5: the stride is on the 3x3 conv of the bottleneck.
  CHECK(r50->layer2->at<BottleneckImpl>(0).conv2->options.stride()[0] == 2);
  CHECK(r50->layer2->at<BottleneckImpl>(0).conv1->options.stride()[0] == 1);

  ResNet r18 = resnet18();
  auto sd18 = r18->state_dict();
  CHECK(sd18.size() == 122);
  CHECK_FALSE(has(sd18, "layer1.0.downsample.0.weight"));
  CHECK(has(sd18, "layer2.0.downsample.1.weight"));
  CHECK(has(sd18, "layer4.1.bn2.running_mean"));
  CHECK(nn::find_in(sd18, "fc.weight")->shape() == Shape{1000, 512});
}

TEST_CASE("ResNet: options (classes, zero-init residual, CIFAR stem, GroupNorm) and errors",
          "[zoo][resnet]") {
  manual_seed(1);
  ResNet r = resnet18(ResNetOptions().num_classes(10).zero_init_residual(true).cifar_stem(true));
  // 11,689,512 - the 7x7 stem's extra taps (64*3*(49-9)) - the 990 classes' fc rows.
  CHECK(count_params(*r.ptr()) == 11'689'512 - 64 * 3 * 40 - 990 * 513);
  CHECK(r->conv1->weight.shape() == Shape{64, 3, 3, 3});
  CHECK(r->maxpool.is_empty());
  auto sd = r->state_dict();
  CHECK(amax(abs(*nn::find_in(sd, "layer1.0.bn2.weight"))).item<float>() == 0.0f);
  CHECK(amin(*nn::find_in(sd, "layer1.0.bn1.weight")).item<float>() == 1.0f);
  r->eval();
  CHECK(r(randn({2, 3, 8, 8})).shape() == Shape{2, 10});

  // One bottleneck model for both: GroupNorm's affine pairs replace BatchNorm's one for one,
  // and zero_init_residual zeroes the bottleneck's bn3 (whatever the norm is).
  ResNet g = resnet50(ResNetOptions().norm(ResNetNorm::Group).zero_init_residual(true));
  CHECK(count_params(*g.ptr()) == 25'557'032);
  CHECK(g->named_buffers().empty());
  auto z = g->state_dict();
  CHECK(has(z, "layer1.0.downsample.1.weight"));
  CHECK(amax(abs(*nn::find_in(z, "layer3.2.bn3.weight"))).item<float>() == 0.0f);
  CHECK(amin(*nn::find_in(z, "layer3.2.bn2.weight")).item<float>() == 1.0f);

  CHECK_THROWS_WITH(resnet("resnet19"), Catch::Contains("resnet19") && Catch::Contains("resnet18"));
  CHECK_THROWS_WITH(resnet_norm_from_name("layer"), Catch::Contains("'layer'"));
  CHECK_THROWS_WITH(resnet18(ResNetOptions().norm(ResNetNorm::Group).norm_groups(48)),
                    Catch::Contains("norm_groups=48"));
  CHECK_THROWS_WITH(resnet18(ResNetOptions().pipeline_splits({"layer5"})),
                    Catch::Contains("'layer5'") && Catch::Contains("expected"));
  CHECK_THROWS_WITH(resnet18(ResNetOptions().pipeline_splits({"layer1/2"})),
                    Catch::Contains("'layer1/2'") && Catch::Contains("0..1"));
  CHECK_THROWS_WITH(resnet18(ResNetOptions().pipeline_splits({"layer3", "layer2"})),
                    Catch::Contains("'layer2'") && Catch::Contains("forward order"));
  CHECK_THROWS_WITH(resnet18(ResNetOptions().pipeline_splits({"layer2", "layer2/0"})),
                    Catch::Contains("'layer2/0'"));
}

TEST_CASE("ResNet: SGD steps on a fixed batch lower the loss", "[zoo][resnet]") {
  manual_seed(2);
  ResNet r = resnet18(ResNetOptions().num_classes(4).cifar_stem(true));
  Generator g(5);
  Tensor x = randn({8, 3, 8, 8}, &g);
  Tensor y = from_vector<int64_t>({0, 1, 2, 3, 0, 1, 2, 3}, {8});
  optim::SGD opt(r->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  std::vector<float> losses;
  for (int step = 0; step < 6; ++step) {
    opt.zero_grad();
    Tensor loss = cross_entropy(r(x), y);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<float>());
  }
  INFO("losses " << losses.front() << " -> " << losses.back());
  CHECK(losses.back() < 0.5f * losses.front());
}

TEST_CASE("ResNet: pipeline_splits put stages and blocks on the next IPU", "[zoo][resnet]") {
  manual_seed(3);
  ResNet r = resnet18(ResNetOptions().num_classes(10).pipeline_splits({"layer2", "layer4/1"}));
  CHECK(r->num_ipus() == 3);
  ir::Graph g = trace_step([&](ir::Tracer& t) {
    Tensor x = t.input(randn({2, 3, 32, 32}), "x");
    Tensor y = t.input(from_vector<int64_t>({1, 2}, {2}), "y");
    return cross_entropy(r(x), y);
  });
  // Forward convs in order: stem + layer1 (5) on IPU 0; layer2, layer3 and layer4.0 (13) on
  // IPU 1 (each first block: conv1, conv2, downsample); layer4.1 (2) on IPU 2.
  std::vector<int> expected(5, 0);
  expected.insert(expected.end(), 13, 1);
  expected.insert(expected.end(), 2, 2);
  CHECK(ipus_of(g, ir::OpKind::Conv) == expected);
  CHECK(ipus_of(g, ir::OpKind::MatMul).front() == 2);  // fc
  CHECK(ipus_of(g, ir::OpKind::LogSoftmax) == std::vector<int>{2});
  // Backward follows forward: the stem's weight gradient (computed last) is on IPU 0.
  CHECK(ipus_of(g, ir::OpKind::ConvBackwardWeight).back() == 0);
  CHECK(ipus_of(g, ir::OpKind::ConvBackwardWeight).front() == 2);

  // The tutorial's form, BeginBlock on a whole stage, works on the holder as well.
  ResNet t = resnet18(ResNetOptions().num_classes(10));
  runtime::BeginBlock(t->layer4, 1);
  ir::Graph g2 = trace_step([&](ir::Tracer& tr) {
    Tensor x = tr.input(randn({2, 3, 32, 32}), "x");
    Tensor y = tr.input(from_vector<int64_t>({1, 2}, {2}), "y");
    return cross_entropy(t(x), y);
  });
  auto convs = ipus_of(g2, ir::OpKind::Conv);
  CHECK(std::count(convs.begin(), convs.end(), 1) == 5);  // layer4: 2 blocks + downsample
}

// ---- GPT-2 --------------------------------------------------------------------------------

TEST_CASE("GPT-2: Hugging Face's parameter count and names, LM head tied", "[zoo][gpt2][slow]") {
  manual_seed(4);
  GPT2LMHeadModel m(GPT2Config::small());
  // HF GPT2LMHeadModel.from_pretrained("gpt2").num_parameters(): lm_head.weight is wte's.
  CHECK(count_params(*m.ptr()) == 124'439'808);
  auto sd = m->state_dict();
  CHECK(sd.size() == 2 + 12 * 12 + 2);  // wte, wpe, 12 per block, ln_f
  check_unique_names(*m.ptr());
  CHECK(m->named_buffers().empty());  // the causal mask is made in forward, not stored
  for (const char* name :
       {"transformer.wte.weight", "transformer.wpe.weight", "transformer.h.0.ln_1.weight",
        "transformer.h.0.ln_1.bias", "transformer.h.0.attn.c_attn.weight",
        "transformer.h.0.attn.c_attn.bias", "transformer.h.0.attn.c_proj.weight",
        "transformer.h.5.ln_2.bias", "transformer.h.11.mlp.c_fc.weight",
        "transformer.h.11.mlp.c_proj.bias", "transformer.ln_f.weight", "transformer.ln_f.bias"}) {
    INFO(name);
    CHECK(has(sd, name));
  }
  CHECK_FALSE(has(sd, "lm_head.weight"));
  // HF's Conv1D stores [in, out].
  CHECK(nn::find_in(sd, "transformer.h.0.attn.c_attn.weight")->shape() == Shape{768, 2304});
  CHECK(nn::find_in(sd, "transformer.h.0.mlp.c_proj.weight")->shape() == Shape{3072, 768});
  CHECK(nn::find_in(sd, "transformer.wte.weight")->shape() == Shape{50257, 768});
  int wte_listed = 0;
  for (auto& p : m->parameters()) wte_listed += p.same(m->transformer->wte->weight);
  CHECK(wte_listed == 1);
  CHECK(GPT2Config::medium().n_layer() == 24);
  CHECK(GPT2Config::large().n_embd() == 1280);
  CHECK(GPT2Config::preset("gpt2-medium").n_head() == 16);
}

TEST_CASE("GPT-2: the XL preset has Hugging Face's gpt2-xl parameter count", "[zoo][gpt2][meta]") {
  CHECK(GPT2Config::preset("xl").n_layer() == 48);
  CHECK(GPT2Config::preset("gpt2-xl").n_embd() == 1600);
  CHECK(GPT2Config::xl().n_head() == 25);
  CHECK(GPT2Config::xl().head_dim() == 64);
  // Built on the meta device: 6.2 GB of fp32 weights as shapes only.
  DefaultDeviceGuard meta(kMeta);
  GPT2LMHeadModel m(GPT2Config::xl());
  CHECK(m->transformer->wte->weight.is_meta());
  // HF GPT2LMHeadModel.from_pretrained("gpt2-xl").num_parameters(), the LM head tied to wte.
  CHECK(count_params(*m.ptr()) == 1'557'611'200);
  CHECK(m->state_dict().size() == 2 + 48 * 12 + 2);
}

TEST_CASE("GPT-2: shapes, config errors and a causal mask that is causal", "[zoo][gpt2]") {
  manual_seed(5);
  GPT2LMHeadModel m(GPT2Config::tiny());
  m->eval();
  Generator g(7);
  Tensor ids = randint(0, 1000, {2, 12}, &g);
  Tensor logits = m(ids);
  CHECK(logits.shape() == Shape{2, 12, 1000});

  // Changing token 7 leaves positions 0..6 exactly as they were and changes 7..11.
  auto v = ids.to_vector<int64_t>();
  v[7] = (v[7] + 1) % 1000;
  v[12 + 7] = (v[12 + 7] + 3) % 1000;
  Tensor logits2 = m(from_vector<int64_t>(v, {2, 12}));
  CHECK(max_abs_diff(slice(logits, 1, 0, 7), slice(logits2, 1, 0, 7)) < 1e-5);
  for (int64_t p = 7; p < 12; ++p)
    CHECK(max_abs_diff(slice(logits, 1, p, p + 1), slice(logits2, 1, p, p + 1)) > 1e-4);

  CHECK_THROWS_WITH(GPT2LMHeadModel(GPT2Config::tiny().n_embd(65)),
                    Catch::Contains("n_embd=65") && Catch::Contains("n_head=2"));
  CHECK_THROWS_WITH(GPT2LMHeadModel(GPT2Config::tiny().layers_per_ipu({0, 1, 2})),
                    Catch::Contains("sums to 3") && Catch::Contains("n_layer=2"));
  CHECK_THROWS_WITH(GPT2Config::preset("huge"),
                    Catch::Contains("'huge'") && Catch::Contains("gpt2-xl"));
  CHECK_THROWS_WITH(m(randint(0, 1000, {1, 129})), Catch::Contains("n_positions=128"));
  CHECK_THROWS_WITH(m(randn({1, 4})), Catch::Contains("int64"));
}

TEST_CASE("GPT-2: AdamW steps on a fixed batch lower the next-token loss", "[zoo][gpt2]") {
  manual_seed(6);
  GPT2LMHeadModel m(GPT2Config::tiny());
  Generator g(8);
  auto [inputs, labels] = shift_tokens(randint(1, 1000, {4, 17}, &g));
  CHECK(inputs.shape() == Shape{4, 16});
  CHECK(labels.shape() == Shape{4, 16});
  optim::AdamW opt(m->parameters(), optim::AdamWOptions(3e-3));
  std::vector<float> losses;
  for (int step = 0; step < 8; ++step) {
    opt.zero_grad();
    Tensor loss = causal_lm_loss(m(inputs), labels);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<float>());
  }
  INFO("losses " << losses.front() << " -> " << losses.back());
  CHECK(losses.front() == Approx(std::log(1000.0)).margin(0.3));  // near-uniform at init
  CHECK(losses.back() < losses.front() - 1.5f);
}

TEST_CASE("GPT-2: layers_per_ipu places embeddings and head on IPU 0, blocks after",
          "[zoo][gpt2]") {
  manual_seed(7);
  GPT2LMHeadModel m(GPT2Config::tiny().n_layer(4).layers_per_ipu({0, 2, 2}));
  ir::Graph g = trace_step([&](ir::Tracer& t) {
    Tensor ids = t.input(randint(0, 1000, {2, 8}), "ids");
    Tensor labels = t.input(randint(0, 1000, {2, 8}), "labels");
    return causal_lm_loss(m(ids), labels);
  });
  CHECK(g.nodes.front().placement == 0);
  CHECK(ipus_of(g, ir::OpKind::IndexSelect).front() == 0);                 // token embedding
  CHECK(ipus_of(g, ir::OpKind::Softmax) == std::vector<int>{1, 1, 2, 2});  // one per block
  CHECK(ipus_of(g, ir::OpKind::LogSoftmax) == std::vector<int>{0});        // head and loss
  // 6 forward products per block, then the tied head: on IPU 0.
  auto mm = ipus_of(g, ir::OpKind::MatMul);
  REQUIRE(mm.size() > 25);
  CHECK(std::vector<int>(mm.begin(), mm.begin() + 24) ==
        std::vector<int>{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2});
  CHECK(mm[24] == 0);

  // A non-zero first entry keeps that many blocks with the embeddings on IPU 0.
  GPT2LMHeadModel m2(GPT2Config::tiny().n_layer(3).layers_per_ipu({1, 2}));
  ir::Graph g2 = trace_step([&](ir::Tracer& t) {
    Tensor ids = t.input(randint(0, 1000, {1, 8}), "ids");
    Tensor labels = t.input(randint(0, 1000, {1, 8}), "labels");
    return causal_lm_loss(m2(ids), labels);
  });
  CHECK(ipus_of(g2, ir::OpKind::Softmax) == std::vector<int>{0, 1, 1});
}

TEST_CASE("GPT-2: a compiled training step (trainingModel) matches eager mode", "[zoo][gpt2]") {
  // The mask is made with ops inside forward, so it is traced like the rest of the step.
  manual_seed(17);
  GPT2LMHeadModel a(GPT2Config::tiny().dropout(0.0).layers_per_ipu({0, 1, 1}));
  manual_seed(17);
  GPT2LMHeadModel b(GPT2Config::tiny().dropout(0.0));
  Generator g(18);
  auto [x, y] = shift_tokens(randint(0, 1000, {2, 9}, &g));
  optim::AdamW oa(a->parameters(), optim::AdamWOptions(1e-3));
  optim::AdamW ob(b->parameters(), optim::AdamWOptions(1e-3));
  auto ta = trainingModel(a.ptr(), Options().useIpuModel(false), oa, causal_lm_loss);
  for (int step = 0; step < 2; ++step) {
    Tensor compiled = ta(x, y);
    ob.zero_grad();
    Tensor eager = causal_lm_loss(b(x), y);
    eager.backward();
    ob.step();
    CHECK(compiled.item<float>() == Approx(eager.item<float>()).epsilon(1e-5));
  }
  auto pa = a->parameters(), pb = b->parameters();
  REQUIRE(pa.size() == pb.size());
  for (size_t i = 0; i < pa.size(); ++i) CHECK(max_abs_diff(pa[i], pb[i]) < 1e-5);
}

// ---- BERT ---------------------------------------------------------------------------------

TEST_CASE("BERT: Hugging Face's parameter counts and names, decoder tied", "[zoo][bert][slow]") {
  manual_seed(8);
  {
    BertForPreTraining m(BertConfig::base());
    // HF BertForPreTraining.from_pretrained("bert-base-uncased").num_parameters(): BertModel's
    // 109,482,240 + transform dense and LayerNorm + decoder bias + NSP; decoder weight tied.
    CHECK(count_params(*m.ptr()) == 110'106'428);
    auto sd = m->state_dict();
    check_unique_names(*m.ptr());
    CHECK(m->named_buffers().empty());  // position ids are made in forward
    for (const char* name :
         {"bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
          "bert.embeddings.token_type_embeddings.weight", "bert.embeddings.LayerNorm.weight",
          "bert.embeddings.LayerNorm.bias", "bert.encoder.layer.0.attention.self.query.weight",
          "bert.encoder.layer.0.attention.self.key.bias",
          "bert.encoder.layer.0.attention.self.value.weight",
          "bert.encoder.layer.3.attention.output.dense.weight",
          "bert.encoder.layer.3.attention.output.LayerNorm.bias",
          "bert.encoder.layer.7.intermediate.dense.weight",
          "bert.encoder.layer.11.output.dense.bias",
          "bert.encoder.layer.11.output.LayerNorm.weight", "bert.pooler.dense.weight",
          "cls.predictions.bias", "cls.predictions.transform.dense.weight",
          "cls.predictions.transform.LayerNorm.bias", "cls.seq_relationship.weight",
          "cls.seq_relationship.bias"}) {
      INFO(name);
      CHECK(has(sd, name));
    }
    CHECK_FALSE(has(sd, "cls.predictions.decoder.weight"));
    CHECK(nn::find_in(sd, "bert.encoder.layer.0.intermediate.dense.weight")->shape() ==
          Shape{3072, 768});
    const Tensor& wemb = m->bert->embeddings->word_embeddings->weight;
    CHECK(m->cls->predictions->decoder_weight.same(wemb));
    int listed = 0;
    for (auto& p : m->parameters()) listed += p.same(wemb);
    CHECK(listed == 1);
    // The padding row starts at zero (HF's padding_idx=0).
    CHECK(amax(abs(wemb.select(0, 0))).item<float>() == 0.0f);
  }
  // HF BertForQuestionAnswering builds BertModel without the pooler and adds qa_outputs
  // (hidden x 2 + 2): 109,482,240 - 590,592 + 1,538 = 108,893,186 for base. Checked on the tiny
  // config by the same arithmetic, to spare a second 110M-parameter initialisation.
  const BertConfig tc = BertConfig::tiny();
  const int64_t h = tc.hidden_size(), vocab = tc.vocab_size();
  BertForQuestionAnswering qa(tc);
  const int64_t pretraining = count_params(*BertForPreTraining(tc).ptr());
  const int64_t pooler = h * h + h, heads = (h * h + h) + 2 * h + vocab + (2 * h + 2);
  CHECK(count_params(*qa.ptr()) == pretraining - pooler - heads + (2 * h + 2));
  CHECK(has(qa->state_dict(), "qa_outputs.weight"));
  CHECK_FALSE(has(qa->state_dict(), "bert.pooler.dense.weight"));
  CHECK(BertConfig::large().num_hidden_layers() == 24);
  CHECK(BertConfig::base().layer_norm_eps() == 1e-12);
  CHECK(BertConfig::base().layer_norm_eps(1e-3).layer_norm_eps() == 1e-3);
}

TEST_CASE("BERT: shapes, config errors and a padding mask that masks", "[zoo][bert]") {
  manual_seed(9);
  BertForPreTraining m(BertConfig::tiny());
  m->eval();
  Generator g(10);
  Tensor ids = randint(1, 1000, {2, 10}, &g);
  Tensor types =
      from_vector<int64_t>({0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1}, {2, 10});
  // Sample 0 has 3 padding positions at the end; sample 1 none.
  std::vector<int64_t> mv(20, 1);
  for (int i = 7; i < 10; ++i) mv[static_cast<size_t>(i)] = 0;
  Tensor mask = from_vector<int64_t>(mv, {2, 10});
  auto [mlm, nsp] = m(ids, types, mask);
  CHECK(mlm.shape() == Shape{2, 10, 1000});
  CHECK(nsp.shape() == Shape{2, 2});

  // Other ids at the padded positions: nothing else changes (the pooled [CLS] included).
  auto v = ids.to_vector<int64_t>();
  for (int i = 7; i < 10; ++i) v[static_cast<size_t>(i)] = (v[static_cast<size_t>(i)] + 17) % 1000;
  auto [mlm2, nsp2] = m(from_vector<int64_t>(v, {2, 10}), types, mask);
  CHECK(max_abs_diff(slice(mlm, 1, 0, 7), slice(mlm2, 1, 0, 7)) < 1e-5);
  CHECK(max_abs_diff(nsp, nsp2) < 1e-5);
  CHECK(max_abs_diff(slice(mlm, 1, 7, 10), slice(mlm2, 1, 7, 10)) > 1e-4);  // their own rows do
  // Without the mask the same change reaches every position.
  auto [mlm3, nsp3] = m(ids, types, Tensor());
  auto [mlm4, nsp4] = m(from_vector<int64_t>(v, {2, 10}), types, Tensor());
  CHECK(max_abs_diff(slice(mlm3, 1, 0, 1), slice(mlm4, 1, 0, 1)) > 1e-4);

  // Masked-position form: MLM logits only where the labels are.
  Tensor pos = from_vector<int64_t>({1, 4, 2, 8}, {2, 2});
  auto [mlm_m, nsp_m] = m->forward_masked(ids, types, mask, pos);
  CHECK(mlm_m.shape() == Shape{2, 2, 1000});
  CHECK(max_abs_diff(mlm_m.select(0, 0).select(0, 1), mlm.select(0, 0).select(0, 4)) < 1e-5);
  CHECK(max_abs_diff(mlm_m.select(0, 1).select(0, 1), mlm.select(0, 1).select(0, 8)) < 1e-5);

  BertForQuestionAnswering qa(BertConfig::tiny());
  auto [start, end] = qa(ids, types, mask);
  CHECK(start.shape() == Shape{2, 10});
  CHECK(end.shape() == Shape{2, 10});

  CHECK_THROWS_WITH(BertForPreTraining(BertConfig::tiny().hidden_size(65)),
                    Catch::Contains("hidden_size=65") && Catch::Contains("num_attention_heads=2"));
  CHECK_THROWS_WITH(BertForPreTraining(BertConfig::tiny().layers_per_ipu({1, 1, 1})),
                    Catch::Contains("sums to 3") && Catch::Contains("num_hidden_layers=2"));
  CHECK_THROWS_WITH(BertConfig::preset("bert-huge"), Catch::Contains("'bert-huge'"));
  CHECK_THROWS_WITH(m(ids, types, from_vector<int64_t>({1, 1}, {1, 2})),
                    Catch::Contains("attention_mask"));
}

TEST_CASE("BERT: AdamW steps lower the pre-training and SQuAD losses", "[zoo][bert]") {
  manual_seed(11);
  Generator g(12);
  Tensor ids = randint(1, 1000, {4, 12}, &g);
  Tensor types = zeros({4, 12}, kInt64);
  Tensor mask = ones({4, 12}, kInt64);
  // Two labelled tokens per sequence, -100 (ignored) elsewhere.
  std::vector<int64_t> lv(48, -100);
  auto idv = ids.to_vector<int64_t>();
  for (size_t b = 0; b < 4; ++b)
    for (size_t p : {size_t{2}, size_t{9}}) lv[b * 12 + p] = idv[b * 12 + p];
  Tensor mlm_labels = from_vector<int64_t>(lv, {4, 12});
  Tensor nsp_labels = from_vector<int64_t>({0, 1, 1, 0}, {4});

  BertForPreTraining m(BertConfig::tiny());
  optim::AdamW opt(m->parameters(), optim::AdamWOptions(3e-3));
  std::vector<float> losses;
  for (int step = 0; step < 8; ++step) {
    opt.zero_grad();
    auto [mlm, nsp] = m(ids, types, mask);
    Tensor loss = bert_pretraining_loss(mlm, nsp, mlm_labels, nsp_labels);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<float>());
  }
  INFO("pre-training losses " << losses.front() << " -> " << losses.back());
  CHECK(losses.front() == Approx(std::log(1000.0) + std::log(2.0)).margin(0.5));
  CHECK(losses.back() < losses.front() - 1.5f);

  BertForQuestionAnswering qa(BertConfig::tiny());
  optim::AdamW qopt(qa->parameters(), optim::AdamWOptions(3e-3));
  Tensor sp = from_vector<int64_t>({1, 3, 5, 7}, {4}),
         ep = from_vector<int64_t>({2, 6, 8, 10}, {4});
  std::vector<float> qlosses;
  for (int step = 0; step < 8; ++step) {
    qopt.zero_grad();
    auto [s, e] = qa(ids, types, mask);
    Tensor loss = bert_squad_loss(s, e, sp, ep);
    loss.backward();
    qopt.step();
    qlosses.push_back(loss.item<float>());
  }
  INFO("SQuAD losses " << qlosses.front() << " -> " << qlosses.back());
  CHECK(qlosses.back() < 0.5f * qlosses.front());

  // The ignored labels really are ignored, and an all-ignored batch gives 0, not NaN.
  Tensor logits = randn({3, 5}, &g);
  Tensor lab = from_vector<int64_t>({2, -100, 4}, {3});
  Tensor kept = cross_entropy(index_select(logits, 0, from_vector<int64_t>({0, 2}, {2})),
                              from_vector<int64_t>({2, 4}, {2}));
  CHECK(cross_entropy_ignore(logits, lab).item<float>() == Approx(kept.item<float>()));
  CHECK(cross_entropy_ignore(logits, full({3}, -100.0, kInt64)).item<float>() == 0.0f);
}

TEST_CASE("BERT: layers_per_ipu places encoder layers, with embeddings, pooler and heads on IPU 0",
          "[zoo][bert]") {
  manual_seed(13);
  BertForPreTraining m(BertConfig::tiny().num_hidden_layers(4).layers_per_ipu({0, 2, 2}));
  ir::Graph g = trace_step([&](ir::Tracer& t) {
    Tensor ids = t.input(randint(1, 1000, {2, 8}), "ids");
    Tensor types = t.input(zeros({2, 8}, kInt64), "types");
    Tensor mask = t.input(ones({2, 8}, kInt64), "mask");
    Tensor labels = t.input(randint(0, 1000, {2, 8}), "labels");
    Tensor nsp_labels = t.input(from_vector<int64_t>({0, 1}, {2}), "nsp");
    auto [mlm, nsp] = m(ids, types, mask);
    return bert_pretraining_loss(mlm, nsp, labels, nsp_labels);
  });
  CHECK(g.nodes.front().placement == 0);
  auto emb = ipus_of(g, ir::OpKind::IndexSelect);
  CHECK(std::vector<int>(emb.begin(), emb.begin() + 3) == std::vector<int>{0, 0, 0});
  CHECK(ipus_of(g, ir::OpKind::Softmax) == std::vector<int>{1, 1, 2, 2});
  CHECK(ipus_of(g, ir::OpKind::Tanh).front() == 0);                     // pooler
  CHECK(ipus_of(g, ir::OpKind::LogSoftmax) == std::vector<int>{0, 0});  // MLM and NSP losses

  BertForQuestionAnswering qa(BertConfig::tiny().layers_per_ipu({1, 1}));
  ir::Graph g2 = trace_step([&](ir::Tracer& t) {
    Tensor ids = t.input(randint(1, 1000, {2, 8}), "ids");
    Tensor sp = t.input(from_vector<int64_t>({0, 1}, {2}), "sp");
    auto [s, e] = qa(ids, Tensor(), Tensor());
    return bert_squad_loss(s, e, sp, sp);
  });
  CHECK(ipus_of(g2, ir::OpKind::Softmax) == std::vector<int>{0, 1});
  CHECK(ipus_of(g2, ir::OpKind::LogSoftmax) == std::vector<int>{0, 0});
}

// ---- Neuron-Inverter ----------------------------------------------------------------------

TEST_CASE("Neuron-Inverter: hpar_gc4's parameter count, layout and reshape", "[zoo][neuron]") {
  manual_seed(14);
  NeuronInverter m(NeuronInverterDesign::hpar_gc4());
  CHECK(count_params(*m.ptr()) == 2'980'203);
  CHECK(m->design.conv_lengths() == std::vector<int64_t>{399, 99, 24});
  CHECK(m->design.flat_dim() == 4320);
  CHECK(m->named_buffers().empty());  // BatchNorm1d without running statistics
  CHECK_FALSE(m->flat_bn->options.track_running_stats());
  check_unique_names(*m.ptr());
  auto sd = m->state_dict();
  for (const char* name : {"cnn_block.0.weight", "cnn_block.3.weight", "cnn_block.6.bias",
                           "fc_block.0.weight", "fc_block.15.weight", "fc_block.15.bias"}) {
    INFO(name);
    CHECK(has(sd, name));
  }
  CHECK(nn::find_in(sd, "cnn_block.6.weight")->shape() == Shape{180, 90, 4});
  CHECK(nn::find_in(sd, "fc_block.0.weight")->shape() == Shape{512, 4320});
  CHECK(nn::find_in(sd, "fc_block.15.weight")->shape() == Shape{15, 128});
  CHECK(count_params(
            *NeuronInverter(NeuronInverterDesign::hpar_gc4().batch_norm_affine(true)).ptr()) ==
        2'980'203 + 2 * 4320);

  // x.view(-1, 4, 1600) of the stored (1600, 4) layout: a reshape, not a transpose.
  m->eval();
  Generator g(15);
  Tensor x = randn({3, 1600, 4}, &g);
  Tensor y = m(x);
  CHECK(y.shape() == Shape{3, 15});
  auto through = [&](const Tensor& in) {
    return m->fc_block(m->flat_bn(flatten(m->cnn_block(in), 1)));
  };
  CHECK(max_abs_diff(y, through(reshape(x, {3, 4, 1600}))) < 1e-5);
  CHECK(max_abs_diff(y, through(contiguous(transpose(x, 1, 2)))) > 1e-3);

  CHECK_THROWS_WITH(m(randn({2, 4, 1600})), Catch::Contains("[batch, 1600, 4]"));
  CHECK_THROWS_WITH(NeuronInverterDesign::preset("hpar_big"), Catch::Contains("'hpar_big'"));
  CHECK_THROWS_WITH(NeuronInverter(NeuronInverterDesign().conv_kernels({4, 4})),
                    Catch::Contains("one entry per conv block"));
  CHECK_THROWS_WITH(NeuronInverter(NeuronInverterDesign().num_time_bins(40)),
                    Catch::Contains("too short"));
}

TEST_CASE("Neuron-Inverter: design sizes a yaml could give are bounded before any allocation",
          "[zoo][neuron][hostile]") {
  using models::NeuronInverterDesign;
  // hpar_gc4's 2,980,203 parameters, and its 90 x 397 activations, are far inside the bounds.
  CHECK_NOTHROW(NeuronInverterDesign::hpar_gc4().validate());
  CHECK_NOTHROW(NeuronInverterDesign::hpar_dev().validate());
  // fc_dims [2^40] let std::bad_alloc escape; conv_filters [2^62] wrapped a weight's byte count
  // and crashed in zeros(); 2^62 time bins overflowed the input's size.
  for (const auto& d :
       {NeuronInverterDesign().fc_dims({int64_t{1} << 40}),
        NeuronInverterDesign().fc_dims({int64_t{1} << 33, int64_t{1} << 33}),
        NeuronInverterDesign().conv_filters({int64_t{1} << 62}).conv_kernels({4}).pool_sizes({4}),
        NeuronInverterDesign().conv_filters({3}).conv_kernels({4}).pool_sizes({4}).num_outputs(
            int64_t{1} << 62),
        NeuronInverterDesign()
            .num_time_bins(int64_t{1} << 62)
            .conv_filters({})
            .conv_kernels({})
            .pool_sizes({})}) {
    CHECK_THROWS_WITH(NeuronInverter(d), Catch::Contains("expected at most 2^32"));
  }
  CHECK_THROWS_WITH(NeuronInverterDesign()
                        .conv_filters({int64_t{1} << 62})
                        .conv_kernels({4})
                        .pool_sizes({4})
                        .validate(),
                    Catch::Contains("more than 2^63"));
  // At the bound: one probe of 2^32 + 1 time bins straight into one output needs 2^32 + 2
  // parameters (refused, the count named); 2^31 bins, 2^31 + 1 (accepted, only validated).
  auto linear = [](int64_t bins) {
    return NeuronInverterDesign()
        .num_features(1)
        .num_time_bins(bins)
        .num_outputs(1)
        .conv_filters({})
        .conv_kernels({})
        .pool_sizes({})
        .fc_dims({});
  };
  CHECK_THROWS_WITH(linear((int64_t{1} << 32) + 1).validate(), Catch::Contains("need 4294967298"));
  CHECK_NOTHROW(linear(int64_t{1} << 31).validate());
}

TEST_CASE("Neuron-Inverter: hpar_dev shapes and AdamW steps lowering the MSE", "[zoo][neuron]") {
  manual_seed(16);
  NeuronInverter m(NeuronInverterDesign::hpar_dev());
  CHECK(m->design.conv_lengths() == std::vector<int64_t>{399, 199, 99});
  CHECK(m->design.flat_dim() == 32 * 99);
  Generator g(17);
  Tensor x = randn({16, 1600, 4}, &g);
  Tensor target = uniform({16, 15}, -1.0, 1.0, &g);
  optim::AdamW opt(m->parameters(), optim::AdamWOptions(1e-3));
  std::vector<float> losses;
  for (int step = 0; step < 10; ++step) {
    opt.zero_grad();
    Tensor loss = neuron_inverter_loss(m(x), target);
    loss.backward();
    opt.step();
    losses.push_back(loss.item<float>());
  }
  INFO("losses " << losses.front() << " -> " << losses.back());
  CHECK(m(x).shape() == Shape{16, 15});
  CHECK(losses.back() < 0.5f * losses.front());
}
