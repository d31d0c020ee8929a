// headscope-cli attention --top-k 5 on every decoder architecture Headscope
// reads, as a user runs it: a GGUF file of each of llama.cpp's with every
// type Headscope reads among its matrices, and Llama's, Qwen 3's and GPT-2's
// in F32, F16 and BF16 alone (gguf_architecture_cases; BERT's and T5's of
// every type: test_cli_encoders, test_cli_encoder_decoders), and the Hugging
// Face folders of the round-two families (Gemma 2 and 3, Phi-3 and its
// LongRoPE, OLMo 2, Mixtral, OLMoE; family_models.h). One process a model:
// every map against the double-precision reference on the values the file
// holds (family_reference.h), the top 5 next tokens and their probabilities
// at every position against the reference's logits, and a GGUF file's token
// ids and top 5 after the text against llama.cpp's on the same file. Gemma
// 3's dance names its buffers' shapes from the spec, and Gemma 3's and
// Gemma 2's their scores' own scale and cap; Phi-3's splits its fused
// projection by strides and turns part of each head, OLMo 2's norms the
// whole projection before the heads, Mixtral's groups its heads as its
// config says.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <tuple>
#include <vector>

#include "cli_test.h"
#include "family_models.h"
#include "family_reference.h"
#include "gguf_models.h"
#include "gguf_vocabs.h"
#include "llama_cpp.h"
#include "prediction_checks.h"

using namespace headscope;
using namespace headscope::test;
using nlohmann::json;

namespace cli_architectures {

// The largest difference between the CLI's maps (layers, 1, NH, T, T) and the reference's.
double worst_difference(const json& attention, const FamilyReference& want, int T) {
    double worst = 0;
    for (size_t l = 0; l < attention.size(); ++l)
        for (int h = 0; h < want.NH; ++h)
            for (int i = 0; i < T; ++i)
                for (int j = 0; j < T; ++j) {
                    const double w = want.weights[((l * want.NH + h) * T + i) * T + j];
                    worst = std::max(worst, std::abs(attention[l][0][h][i][j].get<double>() - w));
                }
    return worst;
}

// The CLI's JSON of `attention --top-k 5` on one text against the reference
// on the checkpoint `checkpoint` (the values the model's files hold): as
// many maps as layers and heads, each within `tolerance`, and the top 5 at
// every position within it of the reference's softmax (expect_top_5).
// Returns the reference's next-token logits after the text (V).
std::vector<double> expect_the_references(const json& got, const FamilyCheckpoint& checkpoint, double tolerance) {
    const FamilySpec& spec = checkpoint.spec;
    const std::vector<int32_t> ids = got["token_ids"][0];
    const int T = static_cast<int>(ids.size());
    AttentionOptions options;
    options.sliding_window = spec.sliding_window;  // the CLI's default: the model's window
    const FamilyReference want = family_reference(checkpoint, {ids}, options);
    EXPECT_EQ(got["attention"].size(), static_cast<size_t>(spec.n_layer));
    EXPECT_EQ(got["attention"][0][0].size(), static_cast<size_t>(want.NH));
    if (got["attention"].size() == static_cast<size_t>(spec.n_layer)) {
        EXPECT_LT(worst_difference(got["attention"], want, T), tolerance);
    }
    const std::vector<double> logits =
        family_logits(checkpoint, real_rows(want.residual, spec.n_layer - 1, {ids}, T, spec.n_embd));
    expect_top_5(cli_predictions(got), {ids}, logits, spec.vocab_size, tolerance);
    return {logits.end() - spec.vocab_size, logits.end()};
}

json attention(const std::vector<std::string>& args, const std::filesystem::path& scratch) {
    const ProcessRun r = run_cli(args, scratch);
    EXPECT_EQ(r.status, 0) << r.err;
    return r.status == 0 ? json::parse(r.out) : json();
}

// Every GGUF architecture (gguf_architecture_cases): `attention --model
// FILE.gguf --text ... --top-k 5`, a file of rotated types holding all 16
// (the writer's record of them), the file's token ids llama.cpp's, and
// llama.cpp's top 5 after the text the CLI's (expect_llama_cpps_top_5,
// against the reference's logits, which the CLI's top 5 matched, within
// llama_cpp_tolerance: a file of mixed types by its quantized types' rule).
// The tolerance of test_gguf_models: a mixture of experts' quantized
// products split the activations into two 8-bit parts (2e-3); a dense
// model's are float32's, wider where they run on AMX-BF16 tiles.
TEST(CliArchitectures, EveryGgufArchitectureGivesTheReferencesMapsAndTopFive) {
    TempDir dir;
    const std::string text = "The cat sat on it.";
    for (const GgufCase& c : gguf_architecture_cases()) {
        const Family family = c.family;
        SCOPED_TRACE(c.file_name());
        const std::filesystem::path file = dir.path / c.file_name();
        const FamilySpec spec = c.spec();
        const MatrixTypes matrices = c.matrices();
        const FamilyCheckpoint checkpoint = write_gguf_family(file, spec, matrices);
        if (!c.dtype) {
            EXPECT_EQ(matrices.types().size(), std::size(dtype_names)) << "every type among its matrices";
        }
        const json got = attention({"attention", "--model", file.string(), "--text", text, "--top-k", "5"}, dir.path);
        if (got.is_null()) continue;
        const std::vector<double> logits =
            expect_the_references(got, checkpoint, spec.n_experts ? 2e-3 : 1e-5 * tiles_widen(matrices));
        const auto theirs = llama_cpp_token_ids(file, {text});
        if (!theirs) continue;  // node cannot be run: test_gguf_models says so
        EXPECT_EQ(got["token_ids"][0], json((*theirs)[0]));
        const std::vector<int32_t> ids = got["token_ids"][0];
        const auto next = ask_llama_cpp({{"next_tokens", file.string()}, {"texts", {ids}}});
        ASSERT_TRUE(next);
        const bool gelu = family == Family::gpt2 || family == Family::gpt_neox || gemma(family);
        const AttentionResult ours = cli_predictions(got);
        expect_llama_cpps_top_5(logits.data(), spec.vocab_size,
                                ours.predictions_at(0, static_cast<int>(ids.size()) - 1), (*next)[0],
                                llama_cpp_tolerance(matrices, gelu), "after the text");
    }
}

// The round-two families as Hugging Face saves them (their config.json
// keys, tensor names and fused layouts, a tokenizer cut to its first 8000
// ids, which still spells any text): float32 throughout, 1e-5.
TEST(CliArchitectures, RoundTwoFamilyFoldersGiveTheReferencesMapsAndTopFive) {
    TempDir dir;
    for (const char* name : {"gemma2", "gemma3", "phi3", "phi3_longrope", "olmo2", "mixtral", "olmoe"}) {
        SCOPED_TRACE(name);
        const FamilyCheckpoint checkpoint = make_family_checkpoint(family_variant(name, Vocabulary::test_cut));
        write_family_checkpoint(dir.path / name, checkpoint);
        const json got = attention({"attention", "--model", (dir.path / name).string(), "--text",
                                    "The cat sat on the mat because it was soft.", "--top-k", "5"},
                                   dir.path);
        if (!got.is_null()) expect_the_references(got, checkpoint, 1e-5);
    }
}

}  // namespace cli_architectures

namespace cli_architectures {

// The dance of `spec`'s Hugging Face folder on a short text.
json dance_of(const FamilySpec& spec) {
    TempDir dir;
    write_family_model(dir.path / "model", spec);
    return attention({"dance", "--model", (dir.path / "model").string(), "--text", "It was soft."}, dir.path);
}

// Gemma 3's dance (heads of 16 from C = 32, groups of 2, Q and K normed per
// head): each buffer's shape from the spec, NH * hs = 64 columns, not C; K
// normed and rotated at its NKV heads, expanded to the query heads with
// stride 0 and copied by reshape; the projections' weights named by their
// outputs and inputs; the scores' line at the model's own scale.
TEST(CliArchitectures, Gemma3DanceNamesItsShapes) {
    const FamilySpec spec = family_variant("gemma3_text", Vocabulary::test_cut);
    const json j = dance_of(spec);
    ASSERT_FALSE(j.is_null());
    const int B = 1, T = j["T"], NH = spec.n_head, NKV = spec.n_kv_head, hs = spec.head_dim, g = NH / NKV;
    EXPECT_EQ(j["d_head"], hs);
    EXPECT_EQ(j["rotary_dims"], hs);
    std::map<std::string, json> shapes;
    for (const json& buffer : j["buffers"]) shapes[buffer["name"]] = buffer["shape"];
    EXPECT_EQ(shapes["q"], json({B, T, NH * hs}));
    EXPECT_EQ(shapes["q_normed"], json({B, T, NH, hs}));
    EXPECT_EQ(shapes["k"], json({B, T, NKV * hs}));
    EXPECT_EQ(shapes["k_normed"], json({B, T, NKV, hs}));
    EXPECT_EQ(shapes["k_rotated"], json({B, T, NKV, hs}));
    EXPECT_EQ(shapes["k_repeated"], json({B, NH, T, hs}));
    EXPECT_EQ(shapes["att"], json({B, NH, T, T}));
    const json& steps = j["steps"];
    bool expanded = false;
    for (const json& step : steps)
        if (step["code"].get<std::string>().find("expand") != std::string::npos) {
            expanded = true;
            EXPECT_EQ(step["shape"], json({B, NKV, g, T, hs}));
            EXPECT_EQ(step["strides"], json({T * NKV * hs, hs, 0, NKV * hs, 1}));
        }
    EXPECT_TRUE(expanded);
    const std::string q = steps.front()["weights"][0], o = steps.back()["weights"][0];
    EXPECT_EQ(q.rfind("q_proj's weight, 64 outputs by 32 inputs, stored as F32", 0), 0u) << q;
    EXPECT_EQ(o.rfind("o_proj's weight, 32 outputs by 64 inputs, stored as F32", 0), 0u) << o;
    // The scores at Gemma's own scale, query_pre_attn_scalar^-1/2 (6: 0.408248), not 1/sqrt(hs).
    char scores[96];
    std::snprintf(scores, sizeof scores, "att = softmax(q @ k.transpose(-2, -1) * %.6g)",
                  1 / std::sqrt(float(spec.query_pre_attn_scalar)));
    int scored = 0;
    for (const json& step : steps) scored += step["buffer"] == "att" && step["code"] == scores;
    EXPECT_EQ(scored, 1) << "no step computes " << scores;
}

// Gemma 2's dance: its scores at query_pre_attn_scalar 12's scale, soft-capped at 1.5.
TEST(CliArchitectures, Gemma2DanceCapsItsScores) {
    const FamilySpec spec = family_variant("gemma2", Vocabulary::test_cut);
    const json j = dance_of(spec);
    ASSERT_FALSE(j.is_null());
    char scores[128];
    std::snprintf(scores, sizeof scores, "att = softmax(%g * tanh(q @ k.transpose(-2, -1) * %.6g / %g))",
                  spec.attn_softcap, 1 / std::sqrt(float(spec.query_pre_attn_scalar)), spec.attn_softcap);
    int scored = 0;
    for (const json& step : j["steps"]) scored += step["buffer"] == "att" && step["code"] == scores;
    EXPECT_EQ(scored, 1) << "no step computes " << scores;
}

}  // namespace cli_architectures

namespace cli_architectures {

// The step of `j`'s dance writing buffer `buffer` in `shape` (the first if several); null if none.
json step_of(const json& j, const std::string& buffer, const json& shape) {
    for (const json& step : j["steps"])
        if (step["buffer"] == buffer && step["shape"] == shape) return step;
    ADD_FAILURE() << "no step of " << buffer << " in " << shape;
    return json();
}

// Phi-3's dance, half of each head rotating (partial_rotary_factor 0.5):
// the fused qkv_proj's rows (NH + 2 NKV) * hs wide, Q its first NH*hs
// columns and K a view of the same buffer from column NH*hs, each split into
// heads by strides alone; RoPE turning the first hs/2 dims and passing the
// rest through.
TEST(CliArchitectures, Phi3DanceSplitsTheFusedProjectionAndTurnsPartOfEachHead) {
    FamilySpec spec = family_variant("phi3", Vocabulary::test_cut);
    spec.rotary_pct = 0.5;
    const json j = dance_of(spec);
    ASSERT_FALSE(j.is_null());
    const int B = 1, T = j["T"], NH = spec.n_head, NKV = spec.n_kv_head, hs = spec.head_dim, W = (NH + 2 * NKV) * hs;
    EXPECT_EQ(W, 64);  // 4 query heads and 2 key/value heads of 8
    EXPECT_EQ(j["n_kv_head"], NKV);
    EXPECT_EQ(j["rotary_dims"], hs / 2);
    std::map<std::string, json> shapes;
    for (const json& buffer : j["buffers"]) shapes[buffer["name"]] = buffer["shape"];
    EXPECT_EQ(shapes["qkv"], json({B, T, W}));
    EXPECT_EQ(shapes.count("q") + shapes.count("k"), 0u);  // no projection of their own
    const json q = step_of(j, "qkv", {B, T, NH * hs}), k = step_of(j, "qkv", {B, T, NKV * hs});
    EXPECT_EQ(q["strides"], json({T * W, W, 1}));
    EXPECT_EQ(q["offset"], 0);
    EXPECT_EQ(q["code"], "q, k, v = qkv_proj(x).split([NH*hs, NKV*hs, NKV*hs], dim=2)");
    EXPECT_EQ(q["weights"][0].get<std::string>().rfind("qkv_proj's weight, 64 outputs by 32 inputs", 0), 0u)
        << q["weights"][0];
    EXPECT_EQ(k["strides"], json({T * W, W, 1}));
    EXPECT_EQ(k["offset"], NH * hs);
    EXPECT_EQ(k["code"], "k  # the split's second piece; v, its third, alike");
    // Into heads, still views of the fused buffer: a head hs columns on, a token a whole row.
    EXPECT_EQ(step_of(j, "qkv", {B, NH, T, hs})["strides"], json({T * W, hs, W, 1}));
    const json k_heads = step_of(j, "qkv", {B, NKV, T, hs});
    EXPECT_EQ(k_heads["strides"], json({T * W, hs, W, 1}));
    EXPECT_EQ(k_heads["offset"], NH * hs);
    // RoPE on the first 4 of 8 dims, in rotate-half pairs (d, d + 2); dims 4-7 joined back unturned.
    const json rotated = step_of(j, "q_rotated", {B, NH, T, hs});
    EXPECT_NE(rotated["title"].get<std::string>().find("turns the first 4 of each head's 8 dims"), std::string::npos)
        << rotated["title"];
    EXPECT_EQ(rotated["code"],
              "q = cat(q[..., :4] * cos + rotate_half(q[..., :4]) * sin, q[..., 4:])  # rotate_half(r) = cat(-r[..., "
              "2:], r[..., :2])");
}

// OLMo 2's dance: Q and K each RMS-normed over the whole projection, a
// (B, T, NH*hs) or (B, T, NKV*hs) buffer of its own, before the split into
// heads and before RoPE (Gemma 3 and Qwen 3 norm each head's hs values).
TEST(CliArchitectures, Olmo2DanceNormsTheWholeProjectionBeforeTheHeads) {
    const FamilySpec spec = family_variant("olmo2", Vocabulary::test_cut);
    const json j = dance_of(spec);
    ASSERT_FALSE(j.is_null());
    const int B = 1, T = j["T"], NH = spec.n_head, NKV = spec.n_kv_head, hs = spec.head_dim;
    std::map<std::string, json> shapes;
    for (const json& buffer : j["buffers"]) shapes[buffer["name"]] = buffer["shape"];
    for (const auto& [x, H, heads] : {std::tuple{"q", "NH", NH}, {"k", "NKV", NKV}}) {
        SCOPED_TRACE(x);
        const std::string normed = std::string(x) + "_normed";
        EXPECT_EQ(shapes[normed], json({B, T, heads * hs}));
        const json norm = step_of(j, normed, {B, T, heads * hs});
        EXPECT_EQ(norm["title"], "RMSNorm over each token's " + std::string(H) + "*hs values at once (OLMo 2's " + x +
                                     "_norm), before the heads: a new buffer, the same layout");
        EXPECT_EQ(norm["strides"], json({T * heads * hs, heads * hs, 1}));
        // The first steps in order: projected, normed, viewed as heads, transposed, rotated.
        std::vector<std::string> walk;
        for (const json& step : j["steps"])
            if (step["code"].get<std::string>().rfind(std::string(x) + " = ", 0) == 0 && walk.size() < 5)
                walk.push_back(step["buffer"]);
        EXPECT_EQ(walk, (std::vector<std::string>{x, normed, normed, normed, std::string(x) + "_rotated"}));
    }
}

// Mixtral's dance (4 experts, 2 a token, in the MLP, which the dance does
// not walk): its attention's key/value heads as the config groups them, K
// expanded to NH/NKV = 2 query heads each with stride 0 and copied by
// reshape; no step names an expert.
TEST(CliArchitectures, MixtralDanceGroupsItsHeads) {
    const FamilySpec spec = family_variant("mixtral", Vocabulary::test_cut);
    const json j = dance_of(spec);
    ASSERT_FALSE(j.is_null());
    const int B = 1, T = j["T"], NH = spec.n_head, NKV = spec.n_kv_head, hs = spec.head_dim, g = NH / NKV;
    EXPECT_EQ(g, 2);
    EXPECT_EQ(j["n_kv_head"], NKV);
    EXPECT_EQ(step_of(j, "k", {B, T, NKV * hs})["code"], "k = k_proj(x)  # NKV * hs = 16 columns; v = v_proj(x) alike");
    // K rotated in its split's memory order (B, T, NKV, hs), then a stride-0 axis of g copies.
    EXPECT_EQ(step_of(j, "k_rotated", {B, NKV, g, T, hs})["strides"], json({T * NKV * hs, hs, 0, NKV * hs, 1}));
    EXPECT_EQ(step_of(j, "k_repeated", {B, NH, T, hs})["strides"], json({NH * T * hs, T * hs, hs, 1}));
    EXPECT_EQ(step_of(j, "att", {B, NH, T, T})["code"], "att = softmax(q @ k.transpose(-2, -1) / sqrt(hs))");
    for (const json& step : j["steps"]) {
        const std::string text = step["title"].get<std::string>() + step["code"].get<std::string>();
        EXPECT_EQ(text.find("expert"), std::string::npos) << text;
    }
}

// gpt-oss's dance: each head's learned sink logit joins its softmax as a
// column of its own, dropped after it (modeling_gpt_oss.py's cat, softmax,
// [..., :-1]), and the title says the rows sum to 1 less the sink's weight;
// Mixtral's line, without a sink, is the plain softmax above.
TEST(CliArchitectures, GptOssDanceJoinsEachHeadsSinkToItsSoftmax) {
    const FamilySpec spec = family_variant("gpt_oss", Vocabulary::test_cut);
    const json j = dance_of(spec);
    ASSERT_FALSE(j.is_null());
    const json att = step_of(j, "att", {1, spec.n_head, j["T"], j["T"]});
    EXPECT_EQ(att["code"],
              "att = softmax(cat([q @ k.transpose(-2, -1) / sqrt(hs), sinks], dim=-1))[..., :-1]  # "
              "sinks: the head's logit, NH");
    const std::string title = att["title"];
    EXPECT_NE(title.find("softmax(q k^T / sqrt(hs)) with the head's learned sink logit in each row's denominator"),
              std::string::npos)
        << title;
    EXPECT_NE(title.find("sum to 1 less their sink weight"), std::string::npos) << title;
}

}  // namespace cli_architectures
