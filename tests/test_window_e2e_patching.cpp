// The patching tab driven as a person drives it (driven_window.h): a click
// on a cell of the heads grid computes that cell's patched run, and the
// model tab then shows its maps and the predictions panel its top tokens,
// both core's patched run (backend.h's patched_run) of the same texts, with
// the line that says which patch is shown.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "driven_window.h"
#include "headscope/compute/backend.h"
#include "model_writer.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;

namespace {

// The centre of a layout entry, as xdotool's x and y.
std::vector<std::string> centre_of(const json& entry) {
    return {std::to_string(static_cast<int>(entry["x"].get<double>() + entry["w"].get<double>() / 2)),
            std::to_string(static_cast<int>(entry["y"].get<double>() + entry["h"].get<double>() / 2))};
}

// Every map of `run` as headscope-cli attention's JSON holds them: [layer][text][head][query][key].
json maps_json(const AttentionResult& run) {
    json layers = json::array();
    for (int l = 0; l < static_cast<int>(run.layers.size()); ++l) {
        json heads = json::array();
        for (int h = 0; h < run.NH; ++h) {
            json rows = json::array();
            for (int i = 0; i < run.T; ++i)
                rows.push_back(std::vector<float>(run.row(l, 0, h, i), run.row(l, 0, h, i) + run.T));
            heads.push_back(rows);
        }
        layers.push_back(json::array({heads}));
    }
    return {{"attention", layers}};
}

TEST(WindowEndToEnd, ClickingAPatchingCellShowsItsPatchedRun) {
    const Model model = load_model(builtin_model);
    const std::string clean = "When Mary and John went to the store, John gave a drink to";
    const std::string corrupted = "When Mary and John went to the store, Paul gave a drink to";
    test::TempDir dir;
    const std::vector<std::string> args = {"--text", clean,      "--compare",         corrupted,
                                           "--view", "patching", "--compute-patching"};
    // Where the heads grid's L0 H3 and the model tab are, from a screenshot run's layout.
    const test::WindowShot first = test::shoot_window(args, dir.path, "patching");
    ASSERT_EQ(first.run.status, 0) << first.run.err;
    json cell, model_tab;
    for (const json& c : test::entries(first.layout, "patching-heads"))
        if (c["layer"] == 0 && c["column"] == 3) cell = c;
    for (const json& tab : test::entries(first.layout, "tab"))
        if (tab["name"] == "model") model_tab = tab;
    ASSERT_FALSE(cell.is_null());
    ASSERT_FALSE(model_tab.is_null());

    // Core's run: the corrupted text with L0 H3's output from the clean one, and the corrupted text's own.
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    AttentionOptions options;
    options.top_k = 10;
    const int32_t pad = model.config.pad_id();
    const Batch a{model.tokenizer.encode_texts({clean}), pad}, b{model.tokenizer.encode_texts({corrupted}), pad};
    AttentionResult patched, own;
    backend->patched_run(a, b, options, PatchDirection::denoise, {PatchKind::heads, 0, 3}, patched);
    backend->forward(b, options, own);
    float moved = 0;  // layer 1's maps move: the patch is not the corrupted run's own maps
    for (size_t i = patched.weights.size() / 2; i < patched.weights.size(); ++i)
        moved = std::max(moved, std::abs(patched.weights[i] - own.weights[i]));
    ASSERT_GT(moved, 0.01);

    const test::VirtualScreen screen;
    ASSERT_FALSE(screen.name().empty()) << "Xvfb did not start";
    const auto layout = dir.path / "layout.json";
    std::vector<std::string> driven = args;
    driven.insert(driven.end(), {"--layout", layout.string()});
    test::DrivenWindow window(screen.name(), driven, dir.path);
    window.settled_screen();  // the grids drawn before the click
    window.click(centre_of(cell));
    window.settled_screen();  // the patched run computed
    window.click(centre_of(model_tab));
    EXPECT_EQ(window.xdotool({"mousemove", "1", "1"}).status, 0);  // no tooltip over a map
    const test::Image shot = window.settled_screen();
    ASSERT_EQ(window.quit(), 0);
    const json drawn = test::read_layout(layout);

    const json line = test::entries(drawn, "patched-run");
    ASSERT_EQ(line.size(), 1u);
    EXPECT_EQ(line[0]["kind"], "heads");
    EXPECT_EQ(line[0]["layer"], 0);
    EXPECT_EQ(line[0]["index"], 3);
    EXPECT_EQ(line[0]["text"],
              "Showing the patched run: the corrupted text (B) with L0 H3's output from the clean text (A)");
    EXPECT_EQ(test::control_centres(drawn).count("patched-run-back"), 1u);
    const json maps = test::entries(drawn, "model");
    ASSERT_EQ(maps.size(), static_cast<size_t>(2 * patched.NH * patched.T * patched.T));
    test::check_heatmap_cells(shot, maps, maps_json(patched), true);
    const json predictions = test::entries(drawn, "patched-prediction");
    ASSERT_EQ(predictions.size(), 5u);
    for (const json& p : predictions) {
        const Prediction& want = patched.predictions_at(0, patched.T - 1)[p["rank"].get<int>() - 1];
        EXPECT_EQ(p["id"], want.id) << p;
        EXPECT_NEAR(p["p"].get<double>(), want.p, 1e-5) << p;
    }
}

}  // namespace
