// headscope-cli on a mixture of experts (a Qwen 3 MoE checkpoint of 3
// layers, layer 1 dense, 8 experts, 3 a token): attention's router against
// the double-precision reference (family_reference.h), --ablate-expert
// against the reference without those experts, the contributions adding up
// to the reference's logit, info's experts, and every bad expert answered
// by one line, exit 2.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "family_models.h"
#include "family_reference.h"
#include "model_writer.h"
#include "process.h"

using namespace headscope;
using namespace headscope::test;
using nlohmann::json;

namespace {

class CliMoe : public ::testing::Test {
protected:
    static const LoadedFamily& moe() { return loaded_family("qwen3_moe", family_variant("qwen3_moe")); }
    static const FamilySpec& spec() { return moe().checkpoint.spec; }
    static std::string model() { return moe().dir.path.string(); }
    // Layer l's first choice at the first token, <s>, which routes alike in every text (causal).
    static int first_choice(int l) {
        const FamilyReference bos = family_reference(moe().checkpoint, {{spec().bos_id}}, AttentionOptions{});
        return bos.router_experts.at(size_t(l) * spec().experts_per_token);
    }

    static ProcessRun run(std::vector<std::string> args) {
        args.insert(args.begin(), cli_program());
        return run_program(args, moe().dir.path);
    }
    // The CLI's JSON for `args`; a failed run fails the test.
    static json run_json(const std::vector<std::string>& args) {
        const ProcessRun r = run(args);
        EXPECT_EQ(r.status, 0) << r.err;
        return r.status == 0 ? json::parse(r.out) : json::object();
    }
};

// The texts the CLI ran, read back from its JSON.
std::vector<std::vector<int32_t>> texts_of(const json& j) {
    return j.at("token_ids").get<std::vector<std::vector<int32_t>>>();
}

// router[slot][b][t] lists the reference's choices at layer layers[slot],
// text b, position t, by falling weight; [] at a dense layer.
void expect_router(const json& router, const FamilyReference& ref, const FamilySpec& s, const std::vector<int>& layers,
                   const std::vector<std::vector<int32_t>>& texts) {
    const size_t B = texts.size(), T = ref.fully_masked.size() / B, k = s.experts_per_token;
    ASSERT_EQ(router.size(), layers.size());
    for (size_t slot = 0; slot < layers.size(); ++slot) {
        const int l = layers[slot];
        ASSERT_EQ(router[slot].size(), B);
        for (size_t b = 0; b < B; ++b) {
            ASSERT_EQ(router[slot][b].size(), texts[b].size()) << "layer " << l;
            for (size_t t = 0; t < texts[b].size(); ++t) {
                const json& choices = router[slot][b][t];
                const std::string where =
                    "layer " + std::to_string(l) + " text " + std::to_string(b) + " position " + std::to_string(t);
                if (!s.expert_layer(l)) {
                    EXPECT_TRUE(choices.empty()) << where;
                    continue;
                }
                ASSERT_EQ(choices.size(), k) << where;
                const size_t at = ((size_t(l) * B + b) * T + t) * k;
                for (size_t i = 0; i < k; ++i) {
                    EXPECT_EQ(choices[i]["expert"], ref.router_experts[at + i]) << where;
                    EXPECT_NEAR(choices[i]["weight"].get<double>(), ref.router_weights[at + i], 1e-5) << where;
                }
            }
        }
    }
}

// Without predictions the forward still runs the last returned layer's
// experts (layer 2 here); dense layer 1 routes nothing. The .npy run prints
// the same router in its metadata.
TEST_F(CliMoe, RouterIsTheReferences) {
    const std::vector<std::string> args = {"attention", "--model", model(),    "--text", "The cat sat on the",
                                           "--text",    "Hello!",  "--layers", "1,2"};
    const json j = run_json(args);
    ASSERT_TRUE(j.contains("router"));
    EXPECT_FALSE(j.contains("ablated_experts"));
    const auto texts = texts_of(j);
    AttentionOptions opt;
    opt.layers = {1, 2};
    expect_router(j["router"], family_reference(moe().checkpoint, texts, opt), spec(), opt.layers, texts);

    std::vector<std::string> npy = args;
    npy.insert(npy.end(), {"--format", "npy", "--out", (moe().dir.path / "attention.npy").string()});
    EXPECT_EQ(run_json(npy)["router"], j["router"]);
}

// Knocked out (a comma list and a repeated flag, in any order, repeats
// once), the experts leave their layers' choices: the routes are the
// reference's without them, and the JSON names them.
TEST_F(CliMoe, AblatedExpertsAreTheReferenceWithoutThem) {
    const int first = first_choice(0), later = first_choice(2);
    const std::string knocked = "2." + std::to_string(later) + ",0." + std::to_string(first);
    const json j = run_json({"attention", "--model", model(), "--text", "The cat sat on the", "--ablate-expert",
                             knocked, "--ablate-expert", "0." + std::to_string(first), "--top-k", "1"});
    EXPECT_EQ(j["ablated_experts"], json::array({{0, first}, {2, later}}));
    const auto texts = texts_of(j);
    ASSERT_EQ(texts.at(0).at(0), spec().bos_id);
    AttentionOptions opt;
    opt.ablate_experts = {{0, first}, {2, later}};
    expect_router(j["router"], family_reference(moe().checkpoint, texts, opt), spec(), {0, 1, 2}, texts);
    for (const json& choices : j["router"][0][0])
        for (const json& choice : choices) EXPECT_NE(choice["expert"], first);
}

// With an expert knocked out (one the first token takes), the heads' attributions and the other parts
// (each layer's MLP, its experts' weighted sum among them) add up at every
// position to the top token's logit, which is the reference's logit of
// that token, computed in double without the expert.
TEST_F(CliMoe, ContributionsAddUpToTheReferencesLogit) {
    const int knocked = first_choice(2);
    const json j = run_json({"attention", "--model", model(), "--text", "The cat sat on the", "--contributions",
                             "--ablate-expert", "2." + std::to_string(knocked)});
    const auto texts = texts_of(j);
    AttentionOptions opt;
    opt.ablate_experts = {{2, knocked}};
    const FamilyReference ref = family_reference(moe().checkpoint, texts, opt);
    const size_t C = spec().n_embd, T = texts[0].size(), last_layer = spec().n_layer - 1;
    for (size_t t = 0; t < T; ++t) {
        double sum = 0;
        for (const json& layer : j["head_logit_attribution"])
            for (const json& head : layer[0]) sum += head[t].get<double>();
        for (const json& part : j["logit_parts"][0][t]) sum += part.get<double>();
        const double attributed = j["attributed_logit"][0][t].get<double>();
        EXPECT_NEAR(sum, attributed, 1e-4 * (1 + std::abs(attributed))) << "position " << t;
        const std::vector<double> row(ref.residual.begin() + (last_layer * T + t) * C,
                                      ref.residual.begin() + (last_layer * T + t + 1) * C);
        const double logit = family_logits(moe().checkpoint, row).at(j["predictions"][0][t][0]["id"].get<size_t>());
        EXPECT_NEAR(attributed, logit, 1e-4 * (1 + std::abs(logit))) << "position " << t;
    }
}

// info: how many experts, how many a token takes, their hidden size, the
// dense layers and the routing rule, in JSON and in the table.
TEST_F(CliMoe, InfoNamesTheExperts) {
    const json experts = run_json({"info", "--model", model(), "--format", "json"})["experts"];
    EXPECT_EQ(experts["count"], spec().n_experts);
    EXPECT_EQ(experts["per_token"], spec().experts_per_token);
    EXPECT_EQ(experts["hidden_size"], spec().expert_mlp_dim);
    EXPECT_EQ(experts["dense_layers"], json::array({1}));
    EXPECT_EQ(experts["routing"],
              "softmax over the 8 experts, the 3 largest kept (equal ones: the lower expert), divided by their sum");
    const ProcessRun table = run({"info", "--model", model(), "--format", "table"});
    ASSERT_EQ(table.status, 0) << table.err;
    for (const char* line : {"experts.count         8\n", "experts.per_token     3\n", "experts.dense_layers  [1]\n"})
        EXPECT_NE(table.out.find(line), std::string::npos) << line << " in:\n" << table.out;
}

// Not L.E, out of range, of a dense layer, too many of a layer, or of a
// model without experts: one line naming the problem, exit 2.
TEST_F(CliMoe, BadExpertsAreOneLine) {
    const auto attention = [](const std::string& model, const std::string& experts) {
        return std::vector<std::string>{"attention", "--model", model, "--text", "hi", "--ablate-expert", experts};
    };
    const std::pair<std::string, std::string> cases[] = {
        {"1.x", "--ablate-expert: '1.x' is not an expert (expected LAYER.EXPERT,...)"},
        {"0", "--ablate-expert: '0' is not an expert"},
        {"0.8", "--ablate-expert: expert 0.8 to knock out is not one of the model's (layers 0..2, experts 0..7)"},
        {"3.0", "--ablate-expert: expert 3.0 to knock out is not one of the model's"},
        {"1.0", "--ablate-expert: expert 1.0 to knock out: layer 1's MLP is dense, without experts"},
        {"0.0,0.1,0.2,0.3,0.4,0.5", "knocking out 6 of layer 0's 8 experts leaves fewer than the 3 each token takes"}};
    for (const auto& [experts, names] : cases)
        expect_one_line_error(run(attention(model(), experts)), "headscope-cli", names);

    // A model without experts: refused knock-outs, and neither router nor experts in its JSON.
    TempDir dense;
    write_test_model(dense.path / "model", {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_positions = 16});
    const std::string gpt2 = (dense.path / "model").string();
    expect_one_line_error(run(attention(gpt2, "0.0")), "headscope-cli",
                          "--ablate-expert: expert 0.0 to knock out: the model has no experts");
    EXPECT_FALSE(run_json({"attention", "--model", gpt2, "--text", "hi"}).contains("router"));
    EXPECT_FALSE(run_json({"info", "--model", gpt2, "--format", "json"}).contains("experts"));
}

}  // namespace
