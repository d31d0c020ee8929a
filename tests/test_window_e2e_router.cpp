// The router tab driven as a person drives it (driven_window.h): a
// right-click on a cell of the routes grid knocks that cell's first expert
// out of its layer. The status bar counts it, the expert is listed with a way
// back, and the grid on the screen is then core's routes with that expert
// knocked out, each token that chose it first now coloured as the expert the
// router took next (tests/screenshot.cpp's expert_rgb).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "driven_window.h"
#include "family_models.h"
#include "headscope/compute/backend.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;

namespace {

// Core's routes of `text` on `model` with `knocked_out` taken out of their layers' choices.
AttentionResult routes(const Model& model, const std::string& text, const std::vector<ExpertRef>& knocked_out) {
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    AttentionOptions options;
    options.top_k = 1;  // every layer run, its router included (0 stops after the last layer's attention)
    options.ablate_experts = knocked_out;
    AttentionResult result;
    backend->forward(Batch{model.tokenizer.encode_texts({text}), model.config.pad_id()}, options, result);
    return result;
}

// The colour core's `routes` give the routes cell at (layer l, position t).
std::array<double, 3> route_rgb(const AttentionResult& routes, int l, int t) {
    if (l == 1) return test::dense_layer_rgb;  // the checkpoint's dense layer
    const size_t at = routes.router_at(l, 0, t);
    return test::expert_rgb(routes.router_experts[at], routes.router_weights[at]);
}

TEST(WindowEndToEnd, RightClickingARouteKnocksItsExpertOut) {
    const test::LoadedFamily& moe = test::loaded_family("qwen3_moe", test::family_variant("qwen3_moe"));
    const std::string text = "The cat sat on the mat because it was soft.";
    test::TempDir dir;
    const std::vector<std::string> args = {"--model", moe.dir.path.string(), "--text", text, "--view", "router"};
    // Where layer 2's third token's cell is, from a screenshot run's layout.
    const test::WindowShot first = test::shoot_window(args, dir.path, "router");
    ASSERT_EQ(first.run.status, 0) << first.run.err;
    json clicked;
    for (const json& cell : test::entries(first.layout, "router"))
        if (cell["layer"] == 2 && cell["position"] == 2) clicked = cell;
    ASSERT_FALSE(clicked.is_null());
    const AttentionResult intact = routes(moe.model, text, {});
    const int out = intact.router_experts[intact.router_at(2, 0, 2)];
    const AttentionResult knocked = routes(moe.model, text, {{2, out}});

    const test::VirtualScreen screen;
    ASSERT_FALSE(screen.name().empty()) << "Xvfb did not start";
    const auto layout = dir.path / "layout.json";
    std::vector<std::string> driven = args;
    driven.insert(driven.end(), {"--layout", layout.string()});
    test::DrivenWindow window(screen.name(), driven, dir.path);
    window.settled_screen();  // the routes drawn before the click
    const std::string x = std::to_string(static_cast<int>(clicked["x"].get<double>() + clicked["w"].get<double>() / 2));
    const std::string y = std::to_string(static_cast<int>(clicked["y"].get<double>() + clicked["h"].get<double>() / 2));
    EXPECT_EQ(window.xdotool({"mousemove", x, y, "click", "3"}).status, 0);
    test::pause_ms(300);
    // The pointer off the grids, so that no tooltip covers a cell.
    EXPECT_EQ(window.xdotool({"mousemove", "1270", "400"}).status, 0);
    const test::Image shot = window.settled_screen();
    ASSERT_EQ(window.quit(), 0);

    const json drawn = test::read_layout(layout);
    bool listed = false, counted = false;
    for (const json& control : test::entries(drawn, "control"))
        listed |= control["name"] == "bring back 2." + std::to_string(out);
    for (const json& status : test::entries(drawn, "status"))
        counted |= status["name"] == "experts-knocked-out" && status["text"] == "1 expert knocked out";
    EXPECT_TRUE(listed);
    EXPECT_TRUE(counted);
    const json cells = test::entries(drawn, "router");
    ASSERT_EQ(cells.size(), static_cast<size_t>(knocked.router_layers * knocked.T));
    int changed = 0;
    for (const json& cell : cells) {
        const int l = cell["layer"], t = cell["position"];
        const std::array<int, 3> got = test::centre(shot, cell);
        EXPECT_TRUE(test::near(got, route_rgb(knocked, l, t)))
            << "layer " << l << " position " << t << ": drawn " << got[0] << "," << got[1] << "," << got[2];
        if (l == 2 && intact.router_experts[intact.router_at(2, 0, t)] == out) {
            EXPECT_FALSE(test::near(got, route_rgb(intact, l, t))) << "position " << t << " still shows expert " << out;
            ++changed;
        }
    }
    EXPECT_GE(changed, 1);  // at least the cell clicked
}

}  // namespace
