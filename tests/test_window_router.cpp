// The router tab on a Qwen 3 MoE checkpoint (8 experts, 3 a token, layer 1
// dense) under Xvfb, against core's forward of the same text: each cell of
// the routes grid in the colour of the expert the router chose first at its
// weight's brightness (app/views/router_view.h's formula, written again in
// tests/screenshot.cpp), dense layers grey, the strip in the colormap of
// the expert's weight; then with an expert knocked out, the grid, the strip
// and the predictions panel are the knocked-out model's, the expert is
// listed with a way back and the status bar counts it. A dense model refuses
// the tab and the grid of experts. The effects tab's grid of experts is
// core's, and its switch comes back in the next run. (test_window_e2e
// right-clicks a route to knock its expert out.)
#include <gtest/gtest.h>

#include <array>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "family_models.h"
#include "headscope/compute/backend.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

class WindowRouter : public ::testing::Test {
protected:
    static const test::LoadedFamily& moe() {
        return test::loaded_family("qwen3_moe", test::family_variant("qwen3_moe"));
    }

    static AttentionResult forward(const std::vector<ExpertRef>& knocked_out) {
        const Model& model = moe().model;
        auto backend = make_cpu_backend();
        backend->load_weights(model);
        AttentionOptions options;
        options.top_k = 10;  // every layer run, and the panel's predictions
        options.ablate_experts = knocked_out;
        AttentionResult result;
        backend->forward(Batch{model.tokenizer.encode_texts({text_}), model.config.pad_id()}, options, result);
        return result;
    }

    static test::WindowShot shoot(const std::string& name, std::vector<std::string> args,
                                  const std::string& view = "router") {
        args.insert(args.begin(), {"--model", moe().dir.path.string(), "--text", text_, "--view", view});
        test::WindowShot shot = test::shoot_window(args, dir_.path, name);
        EXPECT_EQ(shot.run.status, 0) << shot.run.err;
        return shot;
    }

    // Every routes cell and strip cell (of expert `strip_expert`) against `routes`; returns the routes cells.
    static json expect_grids(const test::WindowShot& shot, const AttentionResult& routes, int strip_expert) {
        const int length = routes.T, L = routes.router_layers;
        const json cells = test::entries(shot.layout, "router"), strip = test::entries(shot.layout, "expert-strip");
        EXPECT_EQ(cells.size(), static_cast<size_t>(L * length));
        EXPECT_EQ(strip.size(), static_cast<size_t>(L * length));
        for (const json& cell : cells) {
            const int l = cell["layer"], t = cell["position"];
            const size_t at = routes.router_at(l, 0, t);
            const std::array<int, 3> got = test::centre(shot.image, cell);
            if (l == 1)
                EXPECT_TRUE(test::near(got, test::dense_layer_rgb)) << "dense layer at " << t;
            else
                EXPECT_TRUE(test::near(got, test::expert_rgb(routes.router_experts[at], routes.router_weights[at])))
                    << "layer " << l << " position " << t << ": expert " << routes.router_experts[at] << " weight "
                    << routes.router_weights[at] << ", drawn " << got[0] << "," << got[1] << "," << got[2];
        }
        for (const json& cell : strip) {
            EXPECT_EQ(cell["expert"], strip_expert);
            const int l = cell["layer"], t = cell["position"];
            double weight = 0;
            for (int k = 0; k < routes.router_k; ++k)
                if (routes.router_experts[routes.router_at(l, 0, t) + k] == strip_expert)
                    weight = routes.router_weights[routes.router_at(l, 0, t) + k];
            EXPECT_TRUE(
                test::near(test::centre(shot.image, cell), l == 1 ? test::dense_layer_rgb : test::viridis(weight)))
                << "strip at layer " << l << " position " << t;
        }
        return cells;
    }

    static inline test::TempDir dir_;
    static inline const std::string text_ = "The cat sat on the mat because it was soft.";
};

// Expert 0's strip at first; the layouts' tabs name the router tab.
TEST_F(WindowRouter, CellsAreTheRoutersChoicesAndAKnockOutReroutes) {
    const AttentionResult intact = forward({});
    ASSERT_EQ(intact.router_k, 3);
    ASSERT_GE(intact.T, 8);
    const test::WindowShot shot = shoot("router", {});
    expect_grids(shot, intact, 0);
    bool tab = false;
    for (const json& entry : test::entries(shot.layout, "tab")) tab |= entry["name"] == "router";
    EXPECT_TRUE(tab);
    EXPECT_TRUE(test::entries(shot.layout, "status").dump().find("experts-knocked-out") == std::string::npos);

    // The first expert at layer 2's third token, knocked out of layer 2.
    const int out = intact.router_experts[intact.router_at(2, 0, 2)];
    const AttentionResult knocked = forward({{2, out}});
    const test::WindowShot after = shoot("router-knocked-out", {"--ablate-expert", "2." + std::to_string(out)});
    expect_grids(after, knocked, 0);
    int rerouted = 0;
    for (int t = 0; t < knocked.T; ++t) {
        for (int k = 0; k < knocked.router_k; ++k)
            EXPECT_NE(knocked.router_experts[knocked.router_at(2, 0, t) + k], out);
        rerouted +=
            knocked.router_experts[knocked.router_at(2, 0, t)] != intact.router_experts[intact.router_at(2, 0, t)];
    }
    EXPECT_GE(rerouted, 1);  // at least the cell chosen: the grid drew the change
    bool listed = false, counted = false;
    for (const json& control : test::entries(after.layout, "control"))
        listed |= control["name"] == "bring back 2." + std::to_string(out);
    for (const json& status : test::entries(after.layout, "status"))
        counted |= status["name"] == "experts-knocked-out" && status["text"] == "1 expert knocked out";
    EXPECT_TRUE(listed);
    EXPECT_TRUE(counted);
    // The predictions panel (after the last token) is the knocked-out model's, with the intact one's beside.
    const json predictions = test::entries(after.layout, "prediction");
    ASSERT_FALSE(predictions.empty());
    const Prediction* top = knocked.predictions_at(0, knocked.T - 1);
    for (size_t k = 0; k < predictions.size(); ++k) {
        EXPECT_EQ(predictions[k]["id"], top[k].id) << k;
        EXPECT_NEAR(predictions[k]["p"].get<double>(), top[k].p, 1e-5) << k;
    }
    const json intact_rows = test::entries(after.layout, "intact-prediction");
    ASSERT_FALSE(intact_rows.empty());
    EXPECT_EQ(intact_rows[0]["id"], intact.predictions_at(0, intact.T - 1)[0].id);
}

// The effects tab's grid of experts (--effects-of experts, computed at the
// start): a layers x experts grid whose cells are core's grid of experts,
// the dense layer 1's row crossed out (NaN, null in the layout); the switch
// between heads and experts is drawn.
TEST_F(WindowRouter, TheEffectsGridOfExpertsIsCores) {
    const Model& model = moe().model;
    auto backend = make_cpu_backend();
    backend->load_weights(model);
    HeadEffects want;
    backend->head_effects(Batch{model.tokenizer.encode_texts({text_}), model.config.pad_id()}, {}, want,
                          EffectsOf::experts);
    const test::WindowShot shot = shoot("effects-experts", {"--compute-effects", "--effects-of", "experts"}, "effects");
    const json grid = test::entries(shot.layout, "effects-grid");
    ASSERT_EQ(grid.size(), size_t(want.L * want.N));
    ASSERT_EQ(want.N, 8);
    int compared = 0;
    for (const json& cell : grid) {
        const int l = cell["layer"], e = cell["column"];
        const json& v = cell["values"][l * want.N + e];
        if (l == 1) {
            EXPECT_TRUE(v.is_null()) << "dense layer 1, expert " << e;
            continue;
        }
        EXPECT_NEAR(v.get<double>(), want.loss_change_at(l, e), 1e-4) << "L" << l << " E" << e;
        ++compared;
    }
    EXPECT_EQ(compared, (want.L - 1) * want.N);
    bool switch_drawn = false;
    for (const json& control : test::entries(shot.layout, "control")) switch_drawn |= control["name"] == "effects of";
    EXPECT_TRUE(switch_drawn);
}

// The effects grid's switch is saved with the settings: a run that leaves it
// at experts opens the next (given neither) on the grid of experts, its
// dense layer 1's row crossed out, which the grid of heads never has; the
// command line wins.
TEST_F(WindowRouter, TheEffectsSwitchComesBackInTheNextRun) {
    test::TempDir config;
    test::ScopedEnv xdg("XDG_CONFIG_HOME", config.path.string());
    const fs::path saved = config.path / "headscope" / "settings.json";
    shoot("switch-saved", {"--settings", "on", "--effects-of", "experts"}, "effects");
    EXPECT_EQ(json::parse(test::read_file(saved))["effects_of"], "experts");

    const test::WindowShot shot = shoot("switch-restored", {"--settings", "on", "--compute-effects"}, "effects");
    const Config& config_of = moe().model.config;
    const json grid = test::entries(shot.layout, "effects-grid");
    ASSERT_EQ(grid.size(), static_cast<size_t>(config_of.n_layer * config_of.n_experts));
    int crossed = 0;
    for (const json& cell : grid) {
        const int l = cell["layer"], e = cell["column"];
        const json& v = cell["values"][l * config_of.n_experts + e];
        EXPECT_EQ(v.is_null(), l == 1) << "L" << l << " E" << e;
        crossed += v.is_null();
    }
    EXPECT_EQ(crossed, config_of.n_experts);

    shoot("switch-given", {"--settings", "on", "--effects-of", "heads"}, "effects");
    EXPECT_EQ(json::parse(test::read_file(saved))["effects_of"], "heads");
}

// A dense model (the built-in GPT-2): --view router and --effects-of experts
// are refused in one line before a window opens (test_window_families checks
// that the dense families' windows have no router tab).
TEST_F(WindowRouter, ADenseModelRefusesTheRouterViewAndTheGridOfExperts) {
    const test::ProcessRun refused =
        test::run_window({"--view", "router", "--screenshot", (dir_.path / "x.png").string()}, dir_.path);
    EXPECT_EQ(refused.status, 2);
    EXPECT_NE(refused.err.find("--view router: the model has no experts"), std::string::npos) << refused.err;
    const test::ProcessRun no_grid =
        test::run_window({"--effects-of", "experts", "--screenshot", (dir_.path / "x.png").string()}, dir_.path);
    EXPECT_EQ(no_grid.status, 2);
    EXPECT_NE(no_grid.err.find("--effects-of experts: the model has no experts"), std::string::npos) << no_grid.err;
    EXPECT_EQ(no_grid.err.find('\n'), no_grid.err.size() - 1) << no_grid.err;
}

}  // namespace
