// headscope-cli on a quantized GGUF file (tests/gguf_models.h: a llama in
// Q4_K, its byte-level vocabulary from the file's metadata): generation
// through the prefix cache against whole forwards, the direct logit
// attribution against the engine's own logits, the logit lens's last layer
// against the predictions, a re-split with a head knocked out, and the dance
// naming the weights' blocks, info's tensor types and bits per weight, a bad
// file's one line; info on a Qwen 3 MoE file naming its experts.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "gguf_models.h"
#include "gguf_writer.h"
#include "headscope/compute/backend.h"
#include "headscope/model/model.h"
#include "process.h"

using namespace headscope;
using nlohmann::json;

namespace {

class CliGguf : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::write_gguf_family(file(), test::gguf_family_spec(test::Family::llama), DType::Q4_K);
    }
    static void TearDownTestSuite() { delete dir_; }
    static std::string file() { return (dir_->path / "llama-Q4_K.gguf").string(); }

    // The CLI's JSON for `args` on the file; a failed run fails the test.
    static json run(std::vector<std::string> args) {
        args.insert(args.begin(), test::cli_program());
        args.insert(args.begin() + 2, {"--model", file()});
        const test::ProcessRun r = test::run_program(args, dir_->path);
        EXPECT_EQ(r.status, 0) << r.err;
        return r.status == 0 ? json::parse(r.out) : json::object();
    }
    static std::string ids(const std::vector<int32_t>& tokens) {
        std::string text;
        for (int32_t id : tokens) text += (text.empty() ? "" : ",") + std::to_string(id);
        return text;
    }

    static test::TempDir* dir_;
};
test::TempDir* CliGguf::dir_ = nullptr;

const std::vector<int32_t> prompt = {257, 84, 104, 101, 32, 99, 97, 116};  // bos "The cat"

// Each greedy token, chosen after a forward that reused the earlier tokens'
// keys and values, is the one a whole forward of the text so far puts first,
// with the same probability.
TEST_F(CliGguf, GeneratedTokensAreTheWholeForwardsFirstPredictions) {
    const json generated = run({"generate", "--token-ids", ids(prompt), "--tokens", "4"});
    ASSERT_EQ(generated["steps"].size(), 4u);
    std::vector<int32_t> text = prompt;
    for (const json& step : generated["steps"]) {
        const json whole = run({"attention", "--token-ids", ids(text), "--top-k", "1", "--format", "none"});
        const json& first = whole["predictions"][0][text.size() - 1][0];
        EXPECT_EQ(step["id"], first["id"]) << "after " << ids(text);
        EXPECT_NEAR(step["p"].get<double>(), first["p"].get<double>(), 1e-4) << "after " << ids(text);
        text.push_back(step["id"].get<int32_t>());
    }
    EXPECT_EQ(generated["token_ids"], json(text));
}

// The heads' direct attributions and the other parts add up to the logit of
// the top token, which the engine's own forward computes here in-process;
// the lens after the last layer is the model's prediction.
TEST_F(CliGguf, ContributionsAddUpToTheEnginesLogitAndTheLastLensIsThePrediction) {
    const json j = run({"attention", "--token-ids", ids(prompt), "--contributions", "--logit-lens"});
    const Model model = load_model(file());
    const std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    AttentionOptions options;
    options.top_k = 1;
    AttentionResult result;
    backend->forward(Batch{{prompt}, model.config.pad_id()}, options, result);

    const size_t last = prompt.size() - 1;
    for (size_t t = 0; t <= last; ++t) {
        double sum = 0;
        for (const json& layer : j["head_logit_attribution"])
            for (const json& head : layer[0]) sum += head[t].get<double>();
        for (const json& part : j["logit_parts"][0][t]) sum += part.get<double>();
        const double attributed = j["attributed_logit"][0][t].get<double>();
        EXPECT_NEAR(sum, attributed, 1e-4 * (1 + std::abs(attributed))) << "position " << t;
        EXPECT_EQ(j["lens"].back()[0][t]["id"], j["predictions"][0][t][0]["id"]) << "position " << t;
    }
    const int32_t top = j["predictions"][0][last][0]["id"].get<int32_t>();
    EXPECT_EQ(top, result.predictions_at(0, static_cast<int>(last))[0].id);
    const double logit = result.last_logits[static_cast<size_t>(top)];
    EXPECT_NEAR(j["attributed_logit"][0][last].get<double>(), logit, 1e-4 * (1 + std::abs(logit)));
}

// 16 heads of 16 from the file's 8 of 32 keep the groups of 4; knocking one
// out changes the loss, and a causal row never reaches past its query.
TEST_F(CliGguf, ResplitWithAHeadKnockedOut) {
    const json j = run({"attention", "--token-ids", ids(prompt), "--heads", "16", "--ablate", "1.3", "--top-k", "1"});
    const json whole = run({"attention", "--token-ids", ids(prompt), "--heads", "16", "--top-k", "1"});
    EXPECT_NE(j["loss"][0], whole["loss"][0]);
    EXPECT_EQ(j["n_head"], 16);
    EXPECT_EQ(j["d_head"], 16);
    EXPECT_EQ(j["n_kv_head"], 4);
    EXPECT_EQ(j["ablated"], json::parse("[[1, 3]]"));
    const json& maps = j["attention"];  // [layer][b][head][query][key]
    ASSERT_EQ(maps.size(), 2u);
    ASSERT_EQ(maps[1][0].size(), 16u);
    for (int layer = 0; layer < 2; ++layer)
        for (int head = 0; head < 16; ++head)
            for (size_t q = 0; q < prompt.size(); ++q)
                for (size_t k = 0; k < prompt.size(); ++k) {
                    const double w = maps[layer][0][head][q][k].get<double>();
                    if (k > q) {
                        EXPECT_EQ(w, 0) << layer << "." << head << " " << q << " " << k;
                    }
                }
}

// The dance's projections name the file's Q4_K blocks: 256 values in
// 2 + 2 + 12 + 128 bytes (ggml-common.h), one block per row of C = 256 inputs.
TEST_F(CliGguf, DanceNamesTheQuantizedWeights) {
    const json j = run({"dance", "--text", "The cat", "--layer", "1"});
    const json& steps = j["steps"];
    ASSERT_FALSE(steps.empty());
    const std::string q = steps[0]["weights"][0];
    EXPECT_EQ(q.rfind("q_proj's weight, 256 outputs by 256 inputs, stored as Q4_K: each stored row of 256 inputs is "
                      "144 bytes, 1 block of 256 values in 144 bytes each (",
                      0),
              0u)
        << q;
    const std::string o = steps.back()["weights"][0];
    EXPECT_EQ(o.rfind("o_proj's weight, 256 outputs by 256 inputs, stored as Q4_K", 0), 0u) << o;
}

// info on the Q4_K file: its tensors counted by dtype and its bits per
// weight, against the tensor list's shapes and each type's block size
// (Q4_K: 144 bytes for 256 weights; F32: 4 bytes a weight).
TEST_F(CliGguf, InfoCountsTheTensorTypesAndTheirBitsPerWeight) {
    const json info = run({"info", "--format", "json"});
    std::map<std::string, int> counted;
    double bytes = 0, weights = 0;
    for (const json& t : info["tensors"]) {
        double n = 1;
        for (const json& d : t["shape"]) n *= d.get<double>();
        const std::string dtype = t["dtype"];
        ++counted[dtype];
        ASSERT_TRUE(dtype == "Q4_K" || dtype == "F32") << t.dump();
        EXPECT_EQ(t["bytes"].get<double>(), dtype == "Q4_K" ? n / 256 * 144 : 4 * n) << t.dump();
        bytes += t["bytes"].get<double>(), weights += n;
    }
    std::map<std::string, int> listed;
    for (const json& d : info["tensor_dtypes"]) listed[d["dtype"]] = d["tensors"];
    EXPECT_EQ(listed, counted);
    EXPECT_GT(counted["Q4_K"], 0);
    EXPECT_NEAR(info["bits_per_weight"].get<double>(), 8 * bytes / weights, 1e-9);
}

// A GGUF file cut short, and one that is not GGUF: one line naming the file
// and what is wrong, exit 2 (core's every cut and hostile header: test_gguf).
TEST_F(CliGguf, ABadFileIsOneLineAndExitTwo) {
    const std::string whole = read_file(file());
    const auto cut = dir_->path / "cut.gguf", other = dir_->path / "other.gguf";
    test::write_bytes(cut, whole.substr(0, 100));
    test::write_bytes(other, "GGUX" + whole.substr(4));
    for (const auto& [path, names] : {std::pair{cut, std::string("more than the rest of the file holds")},
                                      std::pair{other, std::string("not a GGUF file")}}) {
        const test::ProcessRun r = test::run_program(
            {test::cli_program(), "attention", "--model", path.string(), "--text", "The cat"}, dir_->path);
        test::expect_one_line_error(r, "headscope-cli", names);
        EXPECT_NE(r.err.find(path.string() + ": "), std::string::npos) << r.err;
    }
}

}  // namespace

// info on a Qwen 3 MoE GGUF file (Q8_0) names its experts as a Hugging Face
// checkpoint's (test_cli_moe.cpp): as llama.cpp reads the file, every layer
// of experts, the chosen weights renormalized; its tensors list each
// expert's three matrices, each the file's Q8_0 slice of its 3-D tensor.
TEST(CliGgufExperts, InfoNamesTheExperts) {
    test::TempDir dir;
    const std::string file = (dir.path / "qwen3moe-Q8_0.gguf").string();
    const test::FamilySpec spec = test::gguf_family_spec(test::Family::qwen3_moe);
    test::write_gguf_family(file, spec, DType::Q8_0);
    const test::ProcessRun r =
        test::run_program({test::cli_program(), "info", "--model", file, "--format", "json"}, dir.path);
    ASSERT_EQ(r.status, 0) << r.err;
    const json info = json::parse(r.out);
    const json& experts = info["experts"];
    EXPECT_EQ(experts["count"], spec.n_experts);
    EXPECT_EQ(experts["per_token"], spec.experts_per_token);
    EXPECT_EQ(experts["hidden_size"], spec.expert_mlp_dim);
    EXPECT_EQ(experts["dense_layers"], json::array());
    EXPECT_EQ(experts["routing"],
              "softmax over the 4 experts, the 2 largest kept (equal ones: the lower expert), divided by their sum");
    int expert_matrices = 0;
    for (const json& t : info["tensors"])
        if (t["name"].get<std::string>().find(".mlp.experts.") != std::string::npos) {
            ++expert_matrices;
            EXPECT_EQ(t["dtype"], "Q8_0") << t.dump();
            EXPECT_EQ(t["bytes"], spec.n_embd * spec.expert_mlp_dim / 32 * 34) << t.dump();
        }
    EXPECT_EQ(expert_matrices, spec.n_layer * spec.n_experts * 3);
}
