// The window on the families' models, as a user sees it under Xvfb: a
// grouped rotary Llama (4 query heads sharing 2 key/value heads), Qwen 3
// (heads of 16 on C = 32) and Mistral (4 heads sharing 1, a sliding window of
// 4 keys, shorter than the text). The heads grid and the model view group the
// query heads of each key/value head; the mask tab draws the sliding window
// and masks what lies behind it, checked pixel by pixel against the rules
// written here; the dance expands the keys with stride 0 and copies them by
// reshape, each float in its owner's colour; the checks tab names the
// configuration and the grouped shapes; a Q4_K GGUF file draws the
// reference's maps and opens every tab. The GPT-2 views are left as they
// were (test_window, test_mask_view, test_dance_view).
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "family_models.h"
#include "family_reference.h"
#include "gguf_models.h"
#include "model_writer.h"
#include "process.h"
#include "screenshot.h"
#include "window_reference_cells.h"

using namespace headscope;
using nlohmann::json;

namespace {

// The colours documented in app/widgets/ui.h (the group frame) and app/views/mask_view.h.
constexpr std::array<int, 3> frame_rgb = {110, 160, 230}, allowed_rgb = {236, 190, 72}, blocked_rgb = {52, 58, 70};

bool near(const std::array<int, 3>& got, const std::array<int, 3>& want, int tolerance = 2) {
    for (int c = 0; c < 3; ++c)
        if (std::abs(got[c] - want[c]) > tolerance) return false;
    return true;
}

using test::hatched;  // window_reference_cells.h
using test::near;     // screenshot.h's, of a colour's doubles

bool inside(const json& cell, const json& rect) {
    const double x = cell["x"], y = cell["y"], w = cell["w"], h = cell["h"];
    const double rx = rect["x"], ry = rect["y"], rw = rect["w"], rh = rect["h"];
    return x >= rx && y >= ry && x + w <= rx + rw && y + h <= ry + rh;
}

using test::entries;

class WindowFamilies : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        for (const char* name : {"llama", "qwen3", "mistral"})
            test::write_family_model(dir_->path / name, test::family_variant(name));
        test::write_test_model(dir_->path / "gpt2", {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_positions = 32});
    }
    static void TearDownTestSuite() { delete dir_; }

    static std::string model(const std::string& name) { return (dir_->path / name).string(); }

    static test::WindowShot shoot(const std::string& name, const std::string& model_name,
                                  std::vector<std::string> args) {
        args.insert(args.begin(), {"--model", model(model_name)});
        test::WindowShot shot = test::shoot_window(args, dir_->path, name);
        EXPECT_EQ(shot.run.status, 0) << shot.run.err;
        EXPECT_EQ(shot.image.width, 1280);
        return shot;
    }

    static json cli(std::vector<std::string> args) {
        args.insert(args.begin(), test::cli_program());
        const test::ProcessRun run = test::run_program(args, dir_->path);
        EXPECT_EQ(run.status, 0) << run.err;
        return run.status == 0 ? json::parse(run.out) : json();
    }

    static test::TempDir* dir_;
    const std::string long_ = "The cat sat on the mat because it was soft.", short_ = "It was soft.";
};
test::TempDir* WindowFamilies::dir_ = nullptr;

// What heads do, on every family: with head 0.1 knocked out, the effects
// tab computes a grid of every (layer, head) of the model's split (the head
// already out left empty, null in the layout) and the attribution grid of
// every head, MLP and bias; the heads tab shaded by value with the first key
// hidden draws every map, the knocked-out one crossed (both tabs in one run).
TEST_F(WindowFamilies, WhatHeadsDoWorksOnEveryFamily) {
    for (const char* name : {"llama", "qwen3", "mistral", "gpt2"}) {
        SCOPED_TRACE(name);
        const std::map<std::string, test::WindowShot> shots =
            test::shoot_views({"--model", model(name), "--text", long_, "--compute-effects", "--ablate", "0.1",
                               "--value-weighted", "--hide-first-key"},
                              "effects,heads", {"effects", "heads"}, dir_->path, name);
        const test::WindowShot &effects = shots.at("effects"), &heads = shots.at("heads");
        ASSERT_EQ(heads.run.status, 0) << heads.run.err;
        const json grid = entries(effects.layout, "effects-grid");
        const json attribution = entries(effects.layout, "attribution-grid");
        const size_t layers = grid.size() / 4;  // 4 heads a layer
        ASSERT_GE(layers, 2u);
        ASSERT_EQ(grid.size(), layers * 4);
        ASSERT_EQ(attribution.size(), layers * 6);  // and an MLP and a bias
        int empty = 0;
        for (const json& cell : grid) {
            const json& value = cell["values"][cell["layer"].get<int>() * 4 + cell["column"].get<int>()];
            empty += value.is_null();
            if (value.is_null()) {
                EXPECT_EQ(cell["layer"], 0);
                EXPECT_EQ(cell["column"], 1);
            }
        }
        EXPECT_EQ(empty, 1);
        EXPECT_EQ(entries(heads.layout, "knocked-out").size(), 1u);
        EXPECT_EQ(entries(heads.layout, "map").size(), 4u);
        // Dense models: every tab but the router's (a mixture of experts' only).
        const json tabs = entries(heads.layout, "tab");
        EXPECT_EQ(tabs.size(), 9u);
        for (const json& tab : tabs) EXPECT_NE(tab["name"], "router");
    }
}

// Llama: heads 0-1 share key/value head 0, heads 2-3 head 1. Each group is
// one framed rectangle holding exactly its heads' maps, and the maps are the
// CLI's weights, through the colormap.
TEST_F(WindowFamilies, HeadsGridFramesTheQueryHeadsOfEachKeyValueHead) {
    const test::WindowShot shot = shoot("llama-heads", "llama", {"--text", long_, "--layer", "1"});
    const json groups = entries(shot.layout, "heads-group"), cells = entries(shot.layout, "heads");
    ASSERT_EQ(groups.size(), 2u);
    for (int kv = 0; kv < 2; ++kv) {
        EXPECT_EQ(groups[kv]["kv_head"], kv);
        EXPECT_EQ(groups[kv]["first_head"], 2 * kv);
        EXPECT_EQ(groups[kv]["heads"], 2);
        // The frame's top edge, in the frame colour.
        const json& g = groups[kv];
        const int x = static_cast<int>(g["x"].get<double>() + g["w"].get<double>() / 2);
        const int y = static_cast<int>(g["y"].get<double>());
        bool framed = false;
        for (int dy = -1; dy <= 1; ++dy) framed |= near(shot.image.at(x, y + dy), frame_rgb, 3);
        EXPECT_TRUE(framed) << "no frame above group " << kv;
    }
    // Side by side or one above the other (as the space beside the predictions panel allows), apart.
    const bool beside = groups[0]["x"].get<double>() + groups[0]["w"].get<double>() < groups[1]["x"].get<double>();
    const bool below = groups[0]["y"].get<double>() + groups[0]["h"].get<double>() < groups[1]["y"].get<double>();
    EXPECT_TRUE(beside || below);

    const json weights = cli({"attention", "--model", model("llama"), "--text", long_, "--layers", "1"})["attention"];
    const int T = 11;
    ASSERT_EQ(cells.size(), size_t(4 * T * T));
    for (const json& cell : cells) {
        const int h = cell["head"], i = cell["query"], j = cell["key"];
        EXPECT_TRUE(inside(cell, groups[h / 2])) << "head " << h << " cell " << i << "," << j;
        EXPECT_FALSE(inside(cell, groups[1 - h / 2])) << "head " << h;
        const std::array<int, 3> got = centre(shot.image, cell);
        if (j > i)
            EXPECT_TRUE(hatched(got)) << "head " << h << " cell " << i << "," << j;
        else
            EXPECT_TRUE(near(got, test::viridis(weights[0][0][h][i][j])))
                << "head " << h << " cell " << i << "," << j << " is " << got[0] << "," << got[1] << "," << got[2];
    }

    // Re-split into 8 heads of 4: still 2 query heads per key/value head, so 4 groups.
    const json resplit =
        entries(shoot("llama-heads-8", "llama", {"--text", long_, "--heads", "8"}).layout, "heads-group");
    ASSERT_EQ(resplit.size(), 4u);
    EXPECT_EQ(resplit[3]["first_head"], 6);
    // A dense model's maps have no learned sink's column.
    EXPECT_TRUE(entries(shot.layout, "sink").empty());
    EXPECT_TRUE(entries(shot.layout, "sink-label").empty());
    // GPT-2 has no groups: no frames.
    EXPECT_TRUE(entries(shoot("gpt2-heads", "gpt2", {"--text", long_}).layout, "heads-group").empty());
}

// A head count the next model's split refuses goes back to its own: one
// query head divides Llama's C, but is not a multiple of its groups of 2.
TEST_F(WindowFamilies, OpenedModelDropsAHeadCountItsSplitRefuses) {
    const test::WindowShot shot =
        shoot("gpt2-to-llama", "gpt2", {"--text", long_, "--heads", "1", "--open-model", model("llama")});
    std::set<int> heads;
    for (const json& cell : entries(shot.layout, "heads")) heads.insert(cell["head"].get<int>());
    EXPECT_EQ(heads, (std::set<int>{0, 1, 2, 3}));
    EXPECT_EQ(entries(shot.layout, "heads-group").size(), 2u);
}

// The model view: a "kv g" label over each group's first column, and a gap
// between the groups wider than the one between a group's maps.
TEST_F(WindowFamilies, ModelViewGapsAndLabelsTheGroups) {
    const test::WindowShot shot = shoot("llama-model", "llama", {"--text", long_, "--view", "model"});
    const json labels = entries(shot.layout, "model-group");
    ASSERT_EQ(labels.size(), 2u);
    std::map<int, double> left;  // head -> the x of layer 0's key-0 column
    for (const json& cell : entries(shot.layout, "model"))
        if (cell["layer"] == 0 && cell["key"] == 0 && cell["query"] == 0) left[cell["head"]] = cell["x"];
    ASSERT_EQ(left.size(), 4u);
    for (int kv = 0; kv < 2; ++kv) EXPECT_NEAR(labels[kv]["x"].get<double>(), left[2 * kv], 1.0) << kv;
    EXPECT_GT(left[2] - left[1], left[1] - left[0] + 4);
    EXPECT_NEAR(left[3] - left[2], left[1] - left[0], 1.0);
}

// Mistral's window of 4 keys on a 12-token text (<s> and 11 tokens): the mask tab draws it as
// its own mask, and the combined mask and the attention hide every key 4 or
// more tokens back; turned off, only the causal and padding masks are left.
TEST_F(WindowFamilies, MaskTabDrawsTheSlidingWindow) {
    const std::vector<int> lengths = cli({"attention", "--model", model("mistral"), "--text", long_, "--text", short_,
                                          "--format", "none"})["lengths"]
                                         .get<std::vector<int>>();
    const int T = lengths[0];
    ASSERT_EQ(T, 12);
    for (bool on : {true, false}) {
        SCOPED_TRACE(on ? "window on" : "window off");
        const test::WindowShot shot =
            shoot(on ? "mistral-mask-on" : "mistral-mask-off", "mistral",
                  {"--text", long_, "--text", short_, "--view", "mask", "--sliding-window", on ? "on" : "off"});
        std::map<std::string, int> cells;
        for (const json& cell : entries(shot.layout, "mask")) {
            const std::string mask = cell["mask"];
            const int b = cell["b"], i = cell["query"], j = cell["key"], length = lengths.at(b);
            const bool in_window = !on || j > i - 4;
            bool allowed = false;
            if (mask == "causal")
                allowed = j <= i;
            else if (mask == "window")
                allowed = in_window;
            else if (mask == "padding")
                allowed = j < length;
            else if (mask == "combined")
                allowed = j <= i && in_window && i < length && j < length;
            const std::array<int, 3> got = centre(shot.image, cell);
            EXPECT_TRUE(near(got, allowed ? allowed_rgb : blocked_rgb))
                << mask << " " << i << "," << j << " is " << got[0] << "," << got[1] << "," << got[2];
            ++cells[mask + (allowed ? " allowed" : " blocked")];
            ++cells[mask];
        }
        EXPECT_EQ(cells["window"], T * T);
        // Below the diagonal band of 4: query i >= 4 loses keys 0..i-4.
        EXPECT_EQ(cells["window blocked"], on ? (T - 4) * (T - 3) / 2 : 0);
        EXPECT_EQ(cells["combined allowed"], on ? 4 * T - 6 : T * (T + 1) / 2);

        // The attention beside the masks: a far-back key is hatched, a near one coloured.
        int far = 0;
        for (const json& cell : entries(shot.layout, "mask_attention")) {
            const int i = cell["query"], j = cell["key"];
            if (j > i) continue;
            const bool hidden = on && j <= i - 4;
            EXPECT_EQ(hatched(centre(shot.image, cell)), hidden) << "attention " << i << "," << j;
            far += hidden;
        }
        EXPECT_EQ(far, on ? (T - 4) * (T - 3) / 2 : 0);
        bool toggle = false;
        for (const json& control : entries(shot.layout, "control")) toggle |= control["name"] == "sliding window";
        EXPECT_TRUE(toggle);
    }
    // GPT-2 has no window: no window mask, no toggle.
    const test::WindowShot gpt2 = shoot("gpt2-mask", "gpt2", {"--text", long_, "--view", "mask"});
    for (const json& cell : entries(gpt2.layout, "mask")) ASSERT_NE(cell["mask"], "window");
    for (const json& control : entries(gpt2.layout, "control")) EXPECT_NE(control["name"], "sliding window");
}

// Llama's dance at the expand step: K's memory (B, T, NKV, hs) drawn once per
// float, and read in the view's order (B, NKV, g, T, hs) g times through the
// stride 0, each copy in the colour of the key/value head that owns it; the
// next step writes the repeat into a new buffer.
TEST_F(WindowFamilies, DanceExpandsTheKeysWithStrideZeroThenCopies) {
    const int B = 2, NH = 4, NKV = 2, g = 2, hs = 8;
    const json walk = cli({"dance", "--model", model("llama"), "--text", long_, "--text", short_});
    const int T = walk["T"];
    size_t expand = 0;
    while (expand < walk["steps"].size() &&
           walk["steps"][expand]["code"].get<std::string>().find("expand") == std::string::npos)
        ++expand;
    ASSERT_LT(expand + 1, walk["steps"].size());
    const json& want = walk["steps"][expand];

    const test::WindowShot shot =
        shoot("llama-dance-expand", "llama",
              {"--text", long_, "--text", short_, "--view", "dance", "--dance-step", std::to_string(expand + 1)});
    const json step = entries(shot.layout, "dance-step").at(0);
    EXPECT_EQ(step["step"], expand + 1);
    EXPECT_EQ(step["buffer"], "k_rotated");
    EXPECT_EQ(step["shape"], json::array({B, NKV, g, T, hs}));
    EXPECT_EQ(step["strides"], json::array({T * NKV * hs, hs, 0, NKV * hs, 1}));
    EXPECT_EQ(step["strides"], want["strides"]);
    EXPECT_EQ(step["contiguous"], false);
    const std::string title = step["title"];
    EXPECT_NE(title.find("stride 0"), std::string::npos) << title;
    EXPECT_NE(title.find("no float moved"), std::string::npos) << title;

    // The rotated keys are written (B, T, NKV, hs): float n is token n / (NKV hs) % T's, key/value head n % (NKV hs) /
    // hs's.
    auto key_colour = [&](int64_t n) {
        const int64_t t = n / (NKV * hs) % T, kv = n % (NKV * hs) / hs;
        return test::hsv_to_rgb(double(kv) / NKV, 0.65, 0.4 + 0.6 * t / (T - 1));
    };
    const json memory = entries(shot.layout, "dance"), read = entries(shot.layout, "dance-read");
    EXPECT_EQ(memory.size(), size_t(B * T * NKV * hs));
    ASSERT_EQ(read.size(), size_t(B * NH * T * hs));
    std::map<int64_t, int> reads;  // storage index -> times the view reads it
    for (const json& cell : memory) EXPECT_TRUE(near(centre(shot.image, cell), key_colour(cell["index"])));
    for (const json& cell : read) {
        // Position p of the view, row-major over (B, NKV, g, T, hs), reads storage b T NKV hs + t NKV hs + kv hs + i.
        const int64_t p = cell["position"];
        const int64_t i = p % hs, t = p / hs % T, kv = p / (hs * T * g) % NKV, b = p / (hs * T * g * NKV);
        const int64_t storage = b * T * NKV * hs + t * NKV * hs + kv * hs + i;
        EXPECT_EQ(cell["index"], storage) << "position " << p;
        EXPECT_TRUE(near(centre(shot.image, cell), key_colour(storage))) << "position " << p;
        ++reads[storage];
    }
    EXPECT_EQ(reads.size(), size_t(B * T * NKV * hs));
    for (const auto& [storage, times] : reads) EXPECT_EQ(times, g) << storage;

    // The reshape: a new buffer (B, NH, T, hs) in which query head h holds its key/value head h / g's floats.
    const test::WindowShot copied =
        shoot("llama-dance-reshape", "llama",
              {"--text", long_, "--text", short_, "--view", "dance", "--dance-step", std::to_string(expand + 2)});
    const json copy_step = entries(copied.layout, "dance-step").at(0);
    EXPECT_EQ(copy_step["buffer"], "k_repeated");
    EXPECT_EQ(copy_step["contiguous"], true);
    EXPECT_NE(copy_step["title"].get<std::string>().find("copies"), std::string::npos);
    const json copy_memory = entries(copied.layout, "dance");
    ASSERT_EQ(copy_memory.size(), size_t(B * NH * T * hs));
    for (const json& cell : copy_memory) {
        const int64_t n = cell["index"], t = n / hs % T, h = n / (hs * T) % NH;
        const std::array<double, 3> want_rgb = test::hsv_to_rgb(double(h / g) / NKV, 0.65, 0.4 + 0.6 * t / (T - 1));
        EXPECT_TRUE(near(centre(copied.image, cell), want_rgb)) << "float " << n;
    }
}

// Qwen 3 in the checks tab: the model table, hs = 16 said to be the model's
// own and not C / NH, the grouped shapes, and the batched heads agreeing with
// the per-head loop; Mistral's window in the table.
TEST_F(WindowFamilies, ChecksTabNamesTheConfigurationAndGroupedShapes) {
    const test::WindowShot shot = shoot("qwen3-checks", "qwen3", {"--text", long_, "--view", "checks"});
    std::map<std::string, std::string> config;
    for (const json& row : entries(shot.layout, "checks-config")) config[row["name"]] = row["text"];
    EXPECT_EQ(config["architecture"], "qwen3");
    EXPECT_EQ(config["query heads NH"], "4");
    EXPECT_EQ(config["key/value heads NKV"], "2 (groups of 2 query heads)");
    EXPECT_EQ(config["head size hs"], "16 (the config's; NH x hs = 64, not C)");
    EXPECT_EQ(config["norm"], "RMSNorm");
    EXPECT_EQ(config["positions"], "rotary (RoPE), theta 1000000");
    EXPECT_EQ(config["MLP"], "SwiGLU, 64 hidden");
    EXPECT_EQ(config["sliding window"], "none");
    EXPECT_EQ(config["weights"], "F32");
    EXPECT_NE(config["sizes"].find("hs = 16 (NH x hs = 64, not C)"), std::string::npos) << config["sizes"];
    EXPECT_NE(config["sizes"].find("NKV = 2"), std::string::npos) << config["sizes"];

    std::map<std::string, json> shapes;
    for (const json& row : entries(shot.layout, "checks-shape")) shapes[row["name"]] = row["shape"];
    EXPECT_EQ(shapes["q"], json::array({1, 4, 11, 16}));
    EXPECT_EQ(shapes["k, v"], json::array({1, 2, 11, 16}));
    EXPECT_EQ(shapes["k, v expanded"], json::array({1, 2, 2, 11, 16}));
    EXPECT_EQ(shapes["k, v repeated"], json::array({1, 4, 11, 16}));
    EXPECT_EQ(shapes["y"], json::array({1, 11, 64}));

    std::map<std::string, double> figures;
    for (const json& cell : entries(shot.layout, "checks"))
        if (cell["figure"] != "tensor") figures[cell["figure"]] = cell["value"];
    ASSERT_EQ(figures.count("weight_diff"), 1u) << "the figures were not shown";
    EXPECT_LT(figures["weight_diff"], 1e-5);
    EXPECT_EQ(figures["earlier_rows_diff"], 0.0);
    EXPECT_EQ(figures["parameters"], cli({"info", "--model", model("qwen3")})["params"].get<double>());

    std::map<std::string, std::string> mistral;
    for (const json& row :
         entries(shoot("mistral-checks", "mistral", {"--text", long_, "--view", "checks"}).layout, "checks-config"))
        mistral[row["name"]] = row["text"];
    EXPECT_EQ(mistral["sliding window"], "4 keys back");
    EXPECT_EQ(mistral["key/value heads NKV"], "1 (groups of 4 query heads)");
}

// A GGUF file of the llama architecture in Q4_K, as llama.cpp's converter
// writes it (Q and K rows reordered for its RoPE), opened as it is: the heads
// grid's cells are the double-precision reference's maps of the values the
// file holds (read by the tests' own block formulas), every tab opens on it
// with no message, and the checks tab names its storage.
TEST_F(WindowFamilies, QuantizedGgufFileShowsTheReferencesMaps) {
    const std::string name = "llama-Q4_K.gguf";
    const test::FamilyCheckpoint checkpoint =
        test::write_gguf_family(dir_->path / name, test::gguf_family_spec(test::Family::llama), DType::Q4_K);
    const std::vector<int32_t> ids = cli({"tokenize", "--model", model(name), "--text", short_})["token_ids"];
    const test::FamilyReference want = test::family_reference(checkpoint, {ids}, AttentionOptions{});
    // Every tab in one run (--screenshot-views), at layer 1.
    const std::vector<std::string> views = {"heads",    "tokens", "model", "lens",  "effects",
                                            "patching", "mask",   "dance", "checks"};
    size_t written = 0;
    const std::map<std::string, test::WindowShot> tabs = test::shoot_views(
        {"--model", model(name), "--text", short_, "--layer", "1"}, "all", views, dir_->path, "gguf", &written);
    ASSERT_EQ(tabs.at("heads").run.status, 0) << tabs.at("heads").run.err;
    EXPECT_EQ(written, views.size());
    const test::WindowShot& shot = tabs.at("heads");
    const json cells = entries(shot.layout, "heads");
    const int T = static_cast<int>(ids.size()), NH = want.NH;
    ASSERT_EQ(cells.size(), static_cast<size_t>(NH * T * T));
    for (const json& cell : cells) {
        const int h = cell["head"], i = cell["query"], j = cell["key"];
        const std::array<int, 3> got = centre(shot.image, cell);
        if (j > i)
            EXPECT_TRUE(hatched(got)) << "head " << h << " cell " << i << "," << j;
        else
            EXPECT_TRUE(near(got, test::viridis(want.weights[((size_t(NH) + h) * T + i) * T + j])))  // layer 1
                << "head " << h << " cell " << i << "," << j << " is " << got[0] << "," << got[1] << "," << got[2];
    }
    for (const auto& [view, tab] : tabs) {
        EXPECT_FALSE(tab.layout.empty()) << view;
        for (const json& control : entries(tab.layout, "control"))
            EXPECT_TRUE(control["name"] != "model message" || control["text"] == "") << view << ": " << control;
        if (view != "checks") continue;
        std::map<std::string, std::string> config;
        for (const json& row : entries(tab.layout, "checks-config")) config[row["name"]] = row["text"];
        // Q4_K: 144 bytes a block of 256 weights (the norms' few floats are lost in the rounding).
        EXPECT_EQ(config["weights"], "Q4_K_S, 4.5 bits per weight");
        EXPECT_EQ(config["tensors"], "5 F32, 16 Q4_K");  // the norms; 7 matrices a layer, the embedding, the output
    }
}

}  // namespace
