// The hovers of the round-two families' features, the mouse moved onto a
// cell as a person moves it: Gemma 2's soft-capped score, before and after
// the cap (the neuron view's line), and gpt-oss's learned sink's share of a
// row, each against the double-precision reference (family_reference.h) of
// the text the window shows.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "driven_window.h"
#include "family_models.h"
#include "family_reference.h"
#include "gguf_models.h"
#include "headscope/compute/forward.h"
#include "headscope/inspect/explanations.h"
#include "headscope/io/files.h"
#include "screenshot.h"

using namespace headscope;
using namespace headscope::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace hover {

const std::string text = "The cat sat on the mat because it was soft.";

struct Hovered {
    std::vector<int32_t> ids;  // the shown text's, from the window's JSON export
    json layout;               // the last frame's, the mouse on the cell
};

// The window on `model` (a folder or a file) at layer 1 with `more` arguments, the mouse on its
// first `view` cell (of the heads grid: "heads" or "sink") that `pick` accepts.
Hovered hover(const fs::path& model, const std::vector<std::string>& more, const std::string& view,
              const std::function<bool(const json&)>& pick) {
    TempDir dir;
    std::vector<std::string> args = {"--model", model.string(), "--text", text, "--layer", "1"};
    args.insert(args.end(), more.begin(), more.end());
    std::vector<std::string> first = args;
    first.insert(first.end(), {"--export-json", (dir.path / "shown.json").string()});
    const WindowShot shot = shoot_window(first, dir.path, "before-hover");
    EXPECT_EQ(shot.run.status, 0) << shot.run.err;
    Hovered hovered;
    json cell;
    for (const json& c : entries(shot.layout, view))
        if (cell.is_null() && pick(c)) cell = c;
    if (shot.run.status != 0 || cell.is_null()) return hovered;
    hovered.ids = json::parse(read_file(dir.path / "shown.json"))["token_ids"][0].get<std::vector<int32_t>>();

    const VirtualScreen screen;
    EXPECT_FALSE(screen.name().empty()) << "Xvfb did not start";
    if (screen.name().empty()) return hovered;
    std::vector<std::string> driven = args;
    driven.insert(driven.end(), {"--layout", (dir.path / "hovered.json").string()});
    DrivenWindow window(screen.name(), driven, dir.path);
    window.settled_screen();
    const auto middle = [&](const char* at, const char* size) {
        return std::to_string(static_cast<int>(cell[at].get<double>() + cell[size].get<double>() / 2));
    };
    EXPECT_EQ(window.xdotool({"mousemove", middle("x", "w"), middle("y", "h")}).status, 0);
    window.settled_screen();
    EXPECT_EQ(window.quit(), 0);
    hovered.layout = read_layout(dir.path / "hovered.json");
    return hovered;
}

// The tooltip's line `name` (view "tooltip"); null when it is not drawn.
json tooltip_line(const json& layout, const std::string& name) {
    for (const json& line : entries(layout, "tooltip"))
        if (line["name"] == name) return line;
    return json();
}

// Gemma 2 (caps of 1.5 on its scores, query_pre_attn_scalar 12: steep
// scores the cap bends), with the contributions computed (weight x |value|),
// which keep the queries and keys that the neuron view reads: the last
// query's cell on key 1 of head 2 says its weight, the reference's, and its
// score before the cap and after it, 1.5 tanh(score / 1.5), which the
// softmax reads.
TEST(WindowEndToEnd, GemmaTwosHoverSaysTheScoreBeforeAndAfterItsCap) {
    const LoadedFamily& gemma2 = loaded_family("gemma2_window", family_variant("gemma2", Vocabulary::test_cut));
    const Hovered h = hover(gemma2.dir.path, {"--value-weighted"}, "heads",
                            [](const json& c) { return c["head"] == 2 && c["key"] == 1 && c["query"] == 10; });
    ASSERT_FALSE(h.layout.is_null());
    const json weight = tooltip_line(h.layout, "weight"), cap = tooltip_line(h.layout, "soft cap");
    ASSERT_FALSE(weight.is_null());
    ASSERT_FALSE(cap.is_null()) << "no soft cap line in the hover";
    EXPECT_EQ(weight["layer"], 1);
    EXPECT_EQ(weight["head"], 2);
    EXPECT_EQ(weight["query"], 10);
    EXPECT_EQ(weight["key"], 1);
    AttentionOptions options;
    options.sliding_window = gemma2.checkpoint.spec.sliding_window;
    const FamilyReference want = family_reference(gemma2.checkpoint, {h.ids}, options);
    const int T = static_cast<int>(h.ids.size());
    ASSERT_GT(T, 10);
    EXPECT_NEAR(weight["weight"].get<double>(), want.weights[((size_t(want.NH) + 2) * T + 10) * T + 1], 1e-5);
    EXPECT_EQ(cap["cap"].get<double>(), gemma2.checkpoint.spec.attn_softcap);
    const double score = cap["score"], capped = cap["capped"];
    EXPECT_NEAR(capped, soft_capped(score, 1.5), 1e-5 * (1 + std::abs(capped)));
    EXPECT_GT(std::abs(score - capped), 0.05) << "the cap bends this score (0.91 to 0.82 in this draw)";
}

// gpt-oss: the sink's cell of the last query of head 1 says the share of its
// row's softmax the learned sink takes: what the reference's keys leave of 1.
TEST(WindowEndToEnd, GptOssSinkHoverSaysTheShareTheSinkTakes) {
    const LoadedFamily& oss = loaded_family("gpt_oss", family_variant("gpt_oss"));
    const Hovered h = hover(oss.dir.path, {}, "sink", [](const json& c) { return c["head"] == 1 && c["query"] == 10; });
    ASSERT_FALSE(h.layout.is_null());
    const json sink = tooltip_line(h.layout, "sink");
    ASSERT_FALSE(sink.is_null()) << "no sink line in the hover";
    EXPECT_EQ(sink["layer"], 1);
    EXPECT_EQ(sink["head"], 1);
    EXPECT_EQ(sink["query"], 10);
    AttentionOptions options;
    options.sliding_window = oss.checkpoint.spec.sliding_window;
    const FamilyReference want = family_reference(oss.checkpoint, {h.ids}, options);
    const int T = static_cast<int>(h.ids.size());
    ASSERT_GT(T, 10);
    double keys = 0;
    for (int j = 0; j < T; ++j) keys += want.weights[((size_t(want.NH) + 1) * T + 10) * T + j];
    EXPECT_NEAR(sink["weight"].get<double>(), 1 - keys, 1e-5);
    EXPECT_GT(1 - keys, 0.01);  // a share the hover can tell from none
}

// A llama GGUF file, whose converter reordered each head's rows of Q and K
// for llama.cpp's RoPE: the neuron view's RoPE line of head 0's cell of
// query 10 and key 1 names the dims the loaded model's config turns and its
// pairs as core says them (adjacent pairs, not Hugging Face's rotate-half).
TEST(WindowEndToEnd, LlamaGgufHoverSaysRopeTurnsAdjacentPairs) {
    TempDir dir;
    const fs::path file = dir.path / "llama.gguf";
    write_gguf_family(file, gguf_family_spec(Family::llama), DType::F32);
    const Config config = load_model(file.string()).config;
    const Hovered h = hover(file, {"--value-weighted"}, "heads",
                            [](const json& c) { return c["head"] == 0 && c["key"] == 1 && c["query"] == 10; });
    ASSERT_FALSE(h.layout.is_null());
    const json rope = tooltip_line(h.layout, "rope");
    ASSERT_FALSE(rope.is_null()) << "no RoPE line in the hover";
    EXPECT_EQ(rope["query"], 10);
    EXPECT_EQ(rope["key"], 1);
    const int dims = rope_dims(config.rope, config.head_size());
    EXPECT_EQ(dims, config.head_size());  // llama turns every dim of its heads of 32
    EXPECT_EQ(rope["dims"], dims);
    EXPECT_EQ(rope["pairs"], rope_pairs_in_words(config, dims));
    EXPECT_EQ(rope["pairs"].get<std::string>().rfind("adjacent pairs", 0), 0u) << rope["pairs"];
}

}  // namespace hover
