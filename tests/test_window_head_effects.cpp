// What a head does, as the window shows it on the built-in model under Xvfb,
// against core's forwards for the same text (which test_head_effects checks
// against the double-precision references): knocked-out heads crossed out,
// the status bar's count and the intact model's predictions beside the
// knocked-out ones; the effects grid's and the attribution grid's values and
// colours, and the hybrid grid's estimated cells marked; the tokens the
// selected head promotes; and the sink option.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "headscope/compute/backend.h"
#include "headscope/inspect/explanations.h"
#include "headscope/io/files.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;

namespace {

// The colours app/widgets/ui.h and app/views/effects_view.h document: the cross over a
// knocked-out map; signed values from blue through grey to red.
constexpr std::array<double, 3> zero_rgb = {0.20 * 255, 0.20 * 255, 0.23 * 255};
constexpr std::array<double, 3> negative_rgb = {0.25 * 255, 0.50 * 255, 0.95 * 255};
constexpr std::array<double, 3> positive_rgb = {0.92 * 255, 0.30 * 255, 0.22 * 255};

std::array<double, 3> diverging(double v) {
    const double t = std::min(1.0, std::abs(v));
    const std::array<double, 3>& end = v < 0 ? negative_rgb : positive_rgb;
    std::array<double, 3> rgb{};
    for (int c = 0; c < 3; ++c) rgb[c] = zero_rgb[c] + (end[c] - zero_rgb[c]) * t;
    return rgb;
}

// Colours read back within 2.5 of the colour written here (the diverging
// colour's rounding in ImGui's float-to-byte conversion, and blending).
bool near(const std::array<int, 3>& got, const std::array<double, 3>& want) { return test::near(got, want, 2.5); }

using test::centre;
using test::entries;

class WindowHeadEffects : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        model_ = new Model(load_model(builtin_model));
        backend_ = make_cpu_backend().release();
        backend_->load_weights(*model_);
        const json examples = json::parse(read_file(std::filesystem::path(HEADSCOPE_ASSETS_DIR) / "examples.json"));
        for (const json& example : examples)
            if (example["title"] == "Random words, twice") text_ = new std::string(example["texts"][0]);
        ids_ = model_->tokenizer.encode_texts({*text_})[0];
    }
    static void TearDownTestSuite() {
        delete backend_;
        delete model_;
        delete text_;
        delete dir_;
    }

    static test::WindowShot shoot(const std::string& name, std::vector<std::string> args) {
        args.insert(args.begin(), {"--text", *text_});
        test::WindowShot shot = test::shoot_window(args, dir_->path, name);
        EXPECT_EQ(shot.run.status, 0) << shot.run.err;
        return shot;
    }
    static AttentionResult forward(AttentionOptions options) {
        AttentionResult result;
        backend_->forward(Batch{{ids_}, model_->config.pad_id()}, options, result);
        return result;
    }

    static Model* model_;
    static Backend* backend_;
    static std::string* text_;
    static std::vector<int32_t> ids_;
    static test::TempDir* dir_;
};
Model* WindowHeadEffects::model_ = nullptr;
Backend* WindowHeadEffects::backend_ = nullptr;
std::string* WindowHeadEffects::text_ = nullptr;
std::vector<int32_t> WindowHeadEffects::ids_;
test::TempDir* WindowHeadEffects::dir_ = nullptr;

// --ablate 1.2,1.3: those two maps of layer 1 are crossed (red along both
// diagonals, the others not), their checkboxes ticked, the status bar counts
// them, and the panel's intact top 5 are the intact forward's.
TEST_F(WindowHeadEffects, KnockedOutHeadsAreCrossedOutAndComparedWithTheIntactModel) {
    const test::WindowShot shot = shoot("knocked", {"--ablate", "1.2,1.3", "--layer", "1"});
    const json crossed = entries(shot.layout, "knocked-out");
    ASSERT_EQ(crossed.size(), 2u);
    for (const json& map : crossed) {
        EXPECT_EQ(map["layer"], 1);
        const double x = map["x"], y = map["y"], w = map["w"], h = map["h"];
        for (double f : {0.2, 0.4, 0.7}) {  // on both diagonals, clear of the middle where they cross
            for (const std::array<int, 3> got :
                 {shot.image.at(int(x + f * w), int(y + f * h)), shot.image.at(int(x + f * w), int(y + (1 - f) * h))}) {
                EXPECT_GT(got[0], 170) << "head " << map["head"] << " at " << f;
                EXPECT_LT(got[1], 120);
            }
        }
    }
    int ticked = 0;
    for (const json& box : entries(shot.layout, "knock-out")) ticked += box["out"].get<bool>();
    EXPECT_EQ(ticked, 2);
    const json status = entries(shot.layout, "status");
    EXPECT_TRUE(std::any_of(status.begin(), status.end(), [](const json& s) {
        return s["name"] == "knocked-out" && s["text"] == "2 heads knocked out (zero)";
    }));
    AttentionOptions intact;
    intact.top_k = 10;
    const AttentionResult want = forward(intact);
    const json rows = entries(shot.layout, "intact-prediction");
    ASSERT_EQ(rows.size(), 5u);
    for (int k = 0; k < 5; ++k) {
        const Prediction& p = want.predictions_at(0, int(ids_.size()) - 1)[k];
        EXPECT_EQ(rows[k]["id"], p.id) << "rank " << k + 1;
        EXPECT_NEAR(rows[k]["p"].get<double>(), p.p, 1e-5);
    }
}

// The effects tab with the grid computed at the start: every cell's value
// is core's head_effects, its colour the diverging colour of value / the
// largest; the attribution grid's cells are the contributions forward's
// shares of the top token's logit; the promoted tokens are head_writes'.
TEST_F(WindowHeadEffects, EffectsAndAttributionGridsFollowCore) {
    const test::WindowShot shot =
        shoot("effects", {"--view", "effects", "--compute-effects", "--layer", "1", "--head", "2"});
    HeadEffects effects;
    backend_->head_effects(Batch{{ids_}, model_->config.pad_id()}, {}, effects);
    const json grid = entries(shot.layout, "effects-grid");
    ASSERT_EQ(grid.size(), size_t(effects.L * effects.N));
    const double scale = grid[0]["scale"];
    for (const json& cell : grid) {
        const int l = cell["layer"], h = cell["column"];
        const double v = cell["values"][l * effects.N + h];
        EXPECT_NEAR(v, effects.loss_change_at(l, h), 1e-4) << "L" << l << " H" << h;
        EXPECT_TRUE(near(centre(shot.image, cell), diverging(v / scale))) << "L" << l << " H" << h;
    }
    for (const json& control : entries(shot.layout, "control"))
        EXPECT_NE(control["name"], "effects of") << "a dense model has no grid of experts to switch to";

    AttentionOptions contributions;
    contributions.top_k = 10, contributions.contributions = true, contributions.capture_outputs = true;
    const AttentionResult want = forward(contributions);
    const int L = want.L, NH = want.NH, T = want.T, t = T - 1;
    const json attribution = entries(shot.layout, "attribution-grid");
    ASSERT_EQ(attribution.size(), size_t(L * (NH + 2)));
    const double attribution_scale = attribution[0]["scale"];
    const float* parts = &want.part_logit_attribution[size_t(t) * want.parts()];
    for (const json& cell : attribution) {
        const int l = cell["layer"], c = cell["column"];
        const double v = cell["values"][l * (NH + 2) + c];
        const double expected = c < NH    ? want.head_logit_attribution[(size_t(l) * NH + c) * T + t]
                                : c == NH ? parts[1 + L + l]
                                          : parts[1 + l];
        EXPECT_NEAR(v, expected, 1e-4) << "L" << l << " column " << c;
        EXPECT_TRUE(near(centre(shot.image, cell), diverging(v / attribution_scale))) << "L" << l << " column " << c;
    }
    // The rollout map: each cell the colormap of core's rollout (the pooling
    // keeps every cell at this size).
    const json rollout = entries(shot.layout, "rollout");
    ASSERT_EQ(rollout.size(), size_t(T) * T);
    int coloured = 0;
    for (const json& cell : rollout) {
        const int q = cell["query"], k = cell["key"];
        if (k > q || cell["w"].get<double>() < 4) continue;
        EXPECT_TRUE(near(centre(shot.image, cell), test::viridis(want.rollout[size_t(q) * T + k])))
            << "query " << q << " key " << k;
        ++coloured;
    }
    EXPECT_GT(coloured, T);
    const HeadWrites writes = head_writes(*model_, want, 1, 0, 2, t);
    const json promoted = entries(shot.layout, "promoted");
    ASSERT_EQ(promoted.size(), writes.promoted.size());
    for (size_t r = 0; r < promoted.size(); ++r) EXPECT_EQ(promoted[r]["id"], writes.promoted[r].id);
}

// The hybrid grid (the default) on a GPT-2-layout model of 32 heads: each
// cell's value and colour are core's hybrid grid's, and the 8 cells it left
// estimated carry a white corner (ImGui's dark style's text colour) where
// the exact ones show their own colour; with --effects-exact, no cell does.
TEST_F(WindowHeadEffects, HybridGridMarksTheEstimatedCells) {
    const auto model_dir = dir_->path / "wide";
    test::write_test_model(model_dir, {.n_layer = 4, .n_head = 8, .n_embd = 32, .n_positions = 64});
    const Model wide = load_model(model_dir.string());
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(wide);
    const Batch batch{{wide.tokenizer.encode_texts({*text_})[0]}, wide.config.pad_id()};
    for (const bool all_exact : {false, true}) {
        std::vector<std::string> args = {"--model", model_dir.string(), "--view", "effects", "--compute-effects"};
        if (all_exact) args.push_back("--effects-exact");
        const test::WindowShot shot = shoot(all_exact ? "effects-exact" : "effects-hybrid", args);
        HeadEffects want;
        backend->head_effects(batch, {}, want, EffectsOf::heads, {},
                              all_exact ? EffectsMethod::exact : EffectsMethod::hybrid);
        const json grid = entries(shot.layout, "effects-grid");
        ASSERT_EQ(grid.size(), 32u);
        const double scale = grid[0]["scale"];
        int estimated = 0;
        for (const json& cell : grid) {
            const int l = cell["layer"], h = cell["column"];
            const std::string at = "L" + std::to_string(l) + " H" + std::to_string(h);
            const double v = cell["values"][l * 8 + h];
            EXPECT_NEAR(v, want.loss_change_at(l, h), 1e-5) << at;
            EXPECT_TRUE(near(centre(shot.image, cell), diverging(v / scale))) << at;
            // Inside the corner's triangle, a side of a third of the cell, clear of its anti-aliased edges.
            const double side = std::floor((cell["w"].get<double>() + 1) / 3);
            ASSERT_GE(side, 8) << at;
            const std::array<int, 3> corner =
                shot.image.at(int(cell["x"].get<double>() + side / 4), int(cell["y"].get<double>() + side / 4));
            if (all_exact) {
                EXPECT_EQ(cell.count("marked"), 0u);
            } else {
                EXPECT_EQ(cell["marked"][l * 8 + h].get<bool>(), !want.exact_at(l, h)) << at;
                estimated += !want.exact_at(l, h);
            }
            if (all_exact || want.exact_at(l, h))
                EXPECT_TRUE(near(corner, diverging(v / scale))) << at << ": an exact cell, unmarked";
            else
                EXPECT_TRUE(near(corner, {255, 255, 255})) << at << ": an estimated cell, marked";
        }
        EXPECT_EQ(estimated, all_exact ? 0 : 32 - hybrid_largest - hybrid_others);
    }
}

// --hide-first-key: key 0's column is hatched and each head's title carries
// its sink mass; the cells of the rest are the rows renormalised without it.
TEST_F(WindowHeadEffects, HidingTheFirstKeyRenormalisesTheRows) {
    const test::WindowShot shot = shoot("sink", {"--hide-first-key", "--layer", "1", "--head", "0"});
    AttentionOptions options;
    const AttentionResult want = forward(options);
    const json cells = entries(shot.layout, "large");
    const int T = want.T;
    ASSERT_EQ(cells.size(), size_t(T) * T);
    int checked = 0;
    for (const json& cell : cells) {
        const int i = cell["query"], j = cell["key"];
        if (j > i || i == 0 || cell["w"].get<double>() < 4) continue;
        const float* row = want.row(1, 0, 0, i);
        const std::array<int, 3> got = centre(shot.image, cell);
        if (j == 0) {  // hatched: grey, not a colour of the map
            EXPECT_LT(std::abs(got[0] - got[2]), 20) << "query " << i;
            continue;
        }
        EXPECT_TRUE(near(got, test::viridis(row[j] / (1 - row[0])))) << "query " << i << " key " << j;
        ++checked;
    }
    EXPECT_GT(checked, T);
    // The title's sink mass: the mean weight of rows 1..T-1 on key 0, written here again.
    double sum = 0;
    for (int i = 1; i < T; ++i) sum += want.row(1, 0, 0, i)[0];
    char sink[32];
    std::snprintf(sink, sizeof sink, "sink %.2f", sum / (T - 1));
    const json titles = entries(shot.layout, "head-title");
    ASSERT_EQ(titles.size(), 1u);
    EXPECT_NE(titles[0]["text"].get<std::string>().find(sink), std::string::npos)
        << titles[0]["text"] << " has no '" << sink << "'";
}

// The tokens tab: every token drawn, wrapped inside the window, its
// background the colormap of the weight L1 H2 gives it from query 40 (core's
// map row), the tokens after the query (which it cannot see) without one.
TEST_F(WindowHeadEffects, TheTokensTabColoursEachTokenByItsWeightFromTheQuery) {
    const int query = 40;
    const test::WindowShot shot =
        shoot("tokens", {"--view", "tokens", "--layer", "1", "--head", "2", "--query", std::to_string(query)});
    const AttentionResult want = forward({});
    const json tokens = entries(shot.layout, "token");
    ASSERT_EQ(tokens.size(), ids_.size());
    double last_y = 0;
    int lines = 1;
    for (const json& token : tokens) {
        const int j = token["token"];
        EXPECT_LE(token["x"].get<double>() + token["w"].get<double>(), 1280) << "token " << j;
        if (token["y"].get<double>() > last_y && j > 0) ++lines;
        last_y = token["y"];
        if (j > query) {
            EXPECT_TRUE(token["weight"].is_null()) << "token " << j;
            continue;
        }
        const float w = want.row(1, 0, 2, query)[j];
        EXPECT_NEAR(token["weight"].get<double>(), w, 1e-5) << "token " << j;
        if (j == query) continue;  // outlined: its corner is the outline's colour
        const std::array<int, 3> got = shot.image.at(static_cast<int>(token["x"].get<double>()) + 1,
                                                     static_cast<int>(token["y"].get<double>()) + 1);
        EXPECT_TRUE(near(got, test::viridis(std::min(1.f, w)))) << "token " << j << " weight " << w;
    }
    EXPECT_GE(lines, 2) << "52 tokens wrap at 1280 px";
}

}  // namespace
