// The patching tab driven as a person drives it (driven_window.h): a click
// on a cell of the heads grid computes that cell's patched run, and the
// model tab then shows its maps and the predictions panel its top tokens,
// both core's patched run (backend.h's patched_run) of the same texts, with
// the line that says which patch is shown; the same of an encoder–decoder's
// cell in its encoder's grids (--patch-stack encoder), its encoder's maps
// drawn. --patch-stack is kept in the settings, and refused in one line
// where there is no stack to pick.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "driven_window.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/text_batch.h"
#include "model_writer.h"
#include "process.h"
#include "screenshot.h"
#include "seq2seq_models.h"

using namespace headscope;
using nlohmann::json;

namespace {

// The centre of a layout entry, as xdotool's x and y.
std::vector<std::string> centre_of(const json& entry) {
    return {std::to_string(static_cast<int>(entry["x"].get<double>() + entry["w"].get<double>() / 2)),
            std::to_string(static_cast<int>(entry["y"].get<double>() + entry["h"].get<double>() / 2))};
}

// A driven window of `args`: a click on `cell` (its patched run computed),
// then on the model tab; the settled screen, the layout drawn and the
// window's exit status.
struct Clicked {
    test::Image shot;
    json drawn;
    int status = -1;
};
Clicked click_then_model_tab(std::vector<std::string> args, const std::filesystem::path& dir,
                             const std::string& layout_name, const json& cell, const json& model_tab) {
    const test::VirtualScreen screen;
    if (screen.name().empty()) return {};  // Xvfb did not start
    const auto layout = dir / layout_name;
    args.insert(args.end(), {"--layout", layout.string()});
    test::DrivenWindow window(screen.name(), args, dir);
    window.settled_screen();  // the grids drawn before the click
    window.click(centre_of(cell));
    window.settled_screen();  // the patched run computed
    window.click(centre_of(model_tab));
    EXPECT_EQ(window.xdotool({"mousemove", "1", "1"}).status, 0);  // no tooltip over a map
    Clicked clicked;
    clicked.shot = window.settled_screen();
    clicked.status = window.quit();
    clicked.drawn = test::read_layout(layout);
    return clicked;
}

// The predictions panel's 5 patched tokens: `patched`'s top 5 at its last position.
void expect_patched_predictions(const json& drawn, const AttentionResult& patched) {
    const json predictions = test::entries(drawn, "patched-prediction");
    ASSERT_EQ(predictions.size(), 5u);
    for (const json& p : predictions) {
        const Prediction& want = patched.predictions_at(0, patched.T - 1)[p["rank"].get<int>() - 1];
        EXPECT_EQ(p["id"], want.id) << p;
        EXPECT_NEAR(p["p"].get<double>(), want.p, 1e-5) << p;
    }
}

// Every map of `run` (an encoder–decoder's: its encoder's) as headscope-cli attention's JSON holds them:
// [layer][text][head][query][key].
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

// An encoder–decoder of BART's layout written in `dir`, and the window's
// arguments that patch two of its sources and targets.
struct Bart {
    std::filesystem::path path;
    std::vector<std::string> sources = {"The cat sat on the mat.", "The dog sat on the mat."},
                             targets = {"Die Katze", "Der Hund"};
    explicit Bart(const std::filesystem::path& dir) : path(dir / "bart") {
        test::write_seq2seq_checkpoint(path, test::make_seq2seq_checkpoint(test::seq2seq_variant("bart")));
    }
    std::vector<std::string> args() const {
        return {"--model",  path.string(),      "--text",   sources[0], "--target", targets[0],          "--compare",
                sources[1], "--compare-target", targets[1], "--view",   "patching", "--compute-patching"};
    }
};

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

    const Clicked clicked = click_then_model_tab(args, dir.path, "layout.json", cell, model_tab);
    ASSERT_EQ(clicked.status, 0) << "the window's exit status (-1: Xvfb did not start)";
    const test::Image& shot = clicked.shot;
    const json& drawn = clicked.drawn;

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
    expect_patched_predictions(drawn, patched);
}

// An encoder–decoder (BART's layout) with --patch-stack encoder: the
// encoder's grids are drawn, a click on its heads grid's L0 H1 computes that
// cell's patched run, and the model tab (--attention encoder) then draws the
// patched run's encoder maps and the predictions panel its top tokens, core's
// patched run of the same sources and targets.
TEST(WindowEndToEnd, ClickingAnEncoderDecodersEncoderCellShowsItsPatchedRun) {
    test::TempDir dir;
    const Bart bart(dir.path);
    const Model model = load_model(bart.path.string());
    std::vector<std::string> args = bart.args();
    args.insert(args.end(), {"--patch-stack", "encoder", "--attention", "encoder"});
    const test::WindowShot first = test::shoot_window(args, dir.path, "seq2seq-patching");
    ASSERT_EQ(first.run.status, 0) << first.run.err;
    EXPECT_TRUE(test::entries(first.layout, "patching-heads").empty()) << "a decoder's grid of the own stack";
    EXPECT_TRUE(test::entries(first.layout, "patching-decoder_heads").empty()) << "the decoder's grids: not shown";
    json cell, model_tab;
    for (const json& c : test::entries(first.layout, "patching-encoder_heads"))
        if (c["layer"] == 0 && c["column"] == 1) cell = c;
    for (const json& tab : test::entries(first.layout, "tab"))
        if (tab["name"] == "model") model_tab = tab;
    ASSERT_FALSE(cell.is_null()) << "the encoder's heads grid is drawn";
    ASSERT_FALSE(model_tab.is_null());

    // Core's run: B's source and target with the encoder's L0 H1 output from A's, and B's own.
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    AttentionOptions options;
    options.top_k = 10;
    const Batch both = text_batch(model, {bart.sources, {}, bart.targets}).batch;
    std::vector<Batch> each;
    for (int b = 0; b < 2; ++b) each.push_back(Batch{{both.token_ids[b]}, both.pad_id, {}, {both.source_ids[b]}});
    AttentionResult patched, own;
    backend->patched_run(each[0], each[1], options, PatchDirection::denoise,
                         {PatchKind::heads, 0, 1, PatchStack::encoder}, patched);
    backend->forward(each[1], options, own);
    ASSERT_TRUE(patched.encoder && own.encoder);
    float moved = 0;  // the encoder's layer 1 maps move: the patch is not B's own run
    const auto &mine = patched.encoder->weights, &theirs = own.encoder->weights;
    for (size_t i = mine.size() / 2; i < mine.size(); ++i) moved = std::max(moved, std::abs(mine[i] - theirs[i]));
    ASSERT_GT(moved, 1e-3);

    const Clicked clicked = click_then_model_tab(args, dir.path, "seq2seq-layout.json", cell, model_tab);
    ASSERT_EQ(clicked.status, 0) << "the window's exit status (-1: Xvfb did not start)";
    const test::Image& shot = clicked.shot;
    const json& drawn = clicked.drawn;

    const json line = test::entries(drawn, "patched-run");
    ASSERT_EQ(line.size(), 1u);
    EXPECT_EQ(line[0]["component"], "encoder_heads");
    EXPECT_EQ(line[0]["text"],
              "Showing the patched run: the corrupted text (B) with the encoder's L0 H1's output from the clean text "
              "(A)");
    const json maps = test::entries(drawn, "model");
    const AttentionResult& encoder = *patched.encoder;
    ASSERT_EQ(maps.size(), static_cast<size_t>(encoder.layers.size() * encoder.NH * encoder.T * encoder.T));
    test::check_heatmap_cells(shot, maps, maps_json(encoder), false);
    expect_patched_predictions(drawn, patched);
}

// --patch-stack picks the grids drawn and is saved: a run given cross draws
// the cross-attention's grids alone, and the next run, given none, draws
// them again. A model of one stack, or a word that is not a stack, is one
// line and exit 2.
TEST(WindowEndToEnd, TheStackShownIsAFlagKeptInTheSettings) {
    test::TempDir dir, config;
    test::ScopedEnv xdg("XDG_CONFIG_HOME", config.path.string());
    const Bart bart(dir.path);
    const auto grids_drawn = [&](const std::vector<std::string>& extra, const std::string& name) {
        std::vector<std::string> args = bart.args();
        args.insert(args.end(), extra.begin(), extra.end());
        const test::WindowShot shot = test::shoot_window(args, dir.path, name);
        EXPECT_EQ(shot.run.status, 0) << shot.run.err;
        std::vector<std::string> stacks;
        for (const char* stack : {"encoder", "decoder", "cross"})
            if (!test::entries(shot.layout, std::string("patching-") + stack + "_heads").empty())
                stacks.push_back(stack);
        return stacks;
    };
    EXPECT_EQ(grids_drawn({"--settings", "on", "--patch-stack", "cross"}, "stack-given"),
              std::vector<std::string>{"cross"});
    const json saved = json::parse(test::read_file(config.path / "headscope" / "settings.json"));
    EXPECT_EQ(saved["patch_stack"], "cross");
    EXPECT_EQ(grids_drawn({"--settings", "on"}, "stack-saved"), std::vector<std::string>{"cross"});
    EXPECT_EQ(grids_drawn({}, "stack-default"), std::vector<std::string>{"decoder"}) << "a test's run reads none";

    const std::string shot = (dir.path / "refused.png").string();
    test::expect_one_line_error(test::run_window({"--patch-stack", "encoder", "--screenshot", shot}, dir.path),
                                "headscope", "--patch-stack: the model is not an encoder-decoder");
    test::expect_one_line_error(
        test::run_window({"--model", bart.path.string(), "--patch-stack", "own", "--screenshot", shot}, dir.path),
        "headscope", "stack shown 'own' is not one of encoder, decoder, cross");
}

}  // namespace
