// The window as a user sees it: headscope renders under Xvfb in screenshot
// mode, at two window sizes, and every heatmap cell it reports drawing is
// checked pixel by pixel against headscope-cli's weight for that cell
// through a colormap written here, or against the masked hatch; a text past
// the model's positions is cut, and the window says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "model_writer.h"
#include "process.h"
#include "screenshot.h"
#include "virtual_screen.h"

using namespace headscope;
using nlohmann::json;

namespace {

// The window's size, WxH.
class WindowTest : public ::testing::TestWithParam<const char*> {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::write_test_model(dir_->path / "model", {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_positions = 32});
    }
    static void TearDownTestSuite() { delete dir_; }

    struct Shot {
        test::Image image;
        json layout, cli;  // the layout's heatmap cells of the view
    };

    // The window's screenshot and the layout's cells of `view`, and the CLI's
    // attention, for the same settings.
    Shot shoot(const std::string& name, const std::vector<std::string>& settings, const std::string& view = "heads") {
        const std::string model = (dir_->path / "model").string();
        std::vector<std::string> window = {"--model", model, "--text", text_, "--window-size", GetParam()};
        window.insert(window.end(), settings.begin(), settings.end());
        const test::WindowShot shot = test::shoot_window(window, dir_->path, name + "-" + GetParam());
        EXPECT_EQ(shot.run.status, 0);
        EXPECT_EQ(std::to_string(shot.image.width) + "x" + std::to_string(shot.image.height), GetParam());
        std::vector<std::string> cli = {test::cli_program(), "attention", "--model", model, "--text", text_};
        for (size_t i = 0; i < settings.size(); i += 2)
            if (settings[i] != "--layer" && settings[i] != "--view" && settings[i] != "--head")
                cli.insert(cli.end(), {settings[i], settings[i + 1]});
        const test::ProcessRun run = test::run_program(cli, dir_->path);
        EXPECT_EQ(run.status, 0);
        json cells = json::array();
        for (const json& cell : shot.layout)
            if (cell["view"] == view) cells.push_back(cell);
        return {shot.image, cells, json::parse(run.out)};
    }

    static test::TempDir* dir_;
    const std::string text_ = "The cat sat on the mat because it was soft.";
};
test::TempDir* WindowTest::dir_ = nullptr;

TEST_P(WindowTest, HeatmapCellsHaveTheColormapOfTheirWeights) {
    const Shot shot = shoot("causal", {"--layer", "1"});
    const int T = shot.cli["seq_len"];
    EXPECT_EQ(shot.layout.size(), static_cast<size_t>(4 * T * T));
    for (const json& cell : shot.layout) EXPECT_EQ(cell["layer"], 1);
    EXPECT_EQ(test::check_heatmap_cells(shot.image, shot.layout, shot.cli, true), 4 * T * (T - 1) / 2);
}

TEST_P(WindowTest, CausalOffFillsTheUpperTriangle) {
    const Shot shot = shoot("bidirectional", {"--causal", "off"});
    EXPECT_EQ(test::check_heatmap_cells(shot.image, shot.layout, shot.cli, false), 0);
}

TEST_P(WindowTest, TwoHeadsDrawTwoMaps) {
    const Shot shot = shoot("two-heads", {"--heads", "2"});
    std::set<int> heads;
    for (const json& cell : shot.layout) heads.insert(cell["head"].get<int>());
    EXPECT_EQ(heads, (std::set<int>{0, 1}));
    test::check_heatmap_cells(shot.image, shot.layout, shot.cli, true);
}

TEST_P(WindowTest, ModelViewDrawsEveryLayersHeads) {
    const Shot shot = shoot("model-view", {"--view", "model"}, "model");
    const int T = shot.cli["seq_len"];
    std::set<std::pair<int, int>> maps;
    for (const json& cell : shot.layout) maps.insert({cell["layer"].get<int>(), cell["head"].get<int>()});
    EXPECT_EQ(maps.size(), 2u * 4u);
    EXPECT_EQ(shot.layout.size(), static_cast<size_t>(2 * 4 * T * T));
    EXPECT_EQ(test::check_heatmap_cells(shot.image, shot.layout, shot.cli, true), 2 * 4 * T * (T - 1) / 2);
}

TEST_P(WindowTest, LargeViewShowsOneHeadAtFullResolution) {
    const Shot shot = shoot("large", {"--layer", "1", "--head", "2"}, "large");
    const int T = shot.cli["seq_len"];
    ASSERT_EQ(shot.layout.size(), static_cast<size_t>(T * T));
    for (const json& cell : shot.layout) {
        EXPECT_EQ(cell["layer"], 1);
        EXPECT_EQ(cell["head"], 2);
        EXPECT_GT(cell["w"].get<double>(), 30);  // large: most of the window's height for 11 tokens
    }
    test::check_heatmap_cells(shot.image, shot.layout, shot.cli, true);
}

// The text box shows its text wrapped: three lines tall for a short text; a
// long one grows it (to at most six lines), drawn as lines of text (bright glyph
// pixels in bands down the box), none running past the box's right edge.
TEST_P(WindowTest, TheTextBoxWrapsAndGrows) {
    std::string long_text;
    for (int n = 0; n < 22; ++n) long_text += "The cat sat on the mat because it was soft. ";
    const auto box_of = [&](const std::string& name, const std::string& text) {
        const test::WindowShot shot =
            test::shoot_window({"--text", text, "--window-size", GetParam()}, dir_->path, name + "-" + GetParam());
        EXPECT_EQ(shot.run.status, 0) << shot.run.err;
        for (const json& e : shot.layout)
            if (e["view"] == "control" && e["name"] == "text") return std::pair(shot.image, e);
        ADD_FAILURE() << "no text box in the layout";
        return std::pair(shot.image, json());
    };
    const auto [short_image, short_box] = box_of("short-text", "The cat sat.");
    const auto [image, box] = box_of("long-text", long_text);
    ASSERT_TRUE(short_box.is_object() && box.is_object());
    EXPECT_GT(box["h"].get<double>(), 1.3 * short_box["h"].get<double>()) << "the box did not grow";
    const int x0 = box["x"], y0 = box["y"], x1 = x0 + static_cast<int>(box["w"]), y1 = y0 + static_cast<int>(box["h"]);
    int bands = 0, rightmost = 0;
    bool in_band = false;
    for (int y = y0; y < y1; ++y) {
        bool bright = false;
        for (int x = x0; x < x1; ++x) {
            const std::array<int, 3> p = image.at(x, y);
            if (p[0] > 200 && p[1] > 200 && p[2] > 200) bright = true, rightmost = std::max(rightmost, x);
        }
        bands += bright && !in_band;
        in_band = bright;
    }
    EXPECT_GE(bands, 4) << "the long text is not drawn as wrapped lines";
    EXPECT_LT(rightmost, x1 - 3) << "a line runs to the box's edge";
    EXPECT_GT(rightmost, x0 + (x1 - x0) / 2) << "the lines do not fill the box's width";
}

INSTANTIATE_TEST_SUITE_P(Sizes, WindowTest, ::testing::Values("1280x800", "1920x1080"));

}  // namespace

// A text longer than the model's 32 positions: the window shows its first 32
// tokens, each map 32 rows and columns, every cell the weight headscope-cli
// --truncate gives; the status bar says so, the text box says how far the
// model reads, and the token view marks the cut. The text is one line of
// 32,003 characters, 24,003 of them letters: ImGui's own wrapped text drew
// them all, four vertices each, past a window's 65,536 (an assertion ended
// the window); the text box draws only the lines in view.
TEST_F(WindowTest, ALongTextIsCutToTheModelsPositionsAndSaysSo) {
    std::string text = "The";
    for (int n = 0; n < 8000; ++n) text += " cat";  // 8,001 tokens
    const std::string model = (dir_->path / "model").string();
    const test::WindowShot shot =
        test::shoot_window({"--model", model, "--text", text, "--window-size", "1920x1080"}, dir_->path, "cut-text");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    const test::ProcessRun cli = test::run_program(
        {test::cli_program(), "attention", "--model", model, "--text", text, "--truncate"}, dir_->path);
    ASSERT_EQ(cli.status, 0) << cli.err;
    const auto text_of = [&](const std::string& view, const std::string& name) {
        for (const json& e : shot.layout)
            if (e["view"] == view && (name.empty() || e["name"] == name)) return e["text"].get<std::string>();
        return std::string("(none)");
    };
    EXPECT_EQ(text_of("status", "cut"), "text 1 has 8001 tokens; cut to the first 32, the model's limit");
    EXPECT_EQ(text_of("control", "text cut"), "the model reads the first 32 of its 8001 tokens, up to ' cat'");
    EXPECT_EQ(text_of("token-cut", ""), "cut here: 7969 more tokens past the model's limit of 32");
    const json cells = test::entries(shot.layout, "heads");
    int rows = 0, cols = 0;
    for (const json& cell : cells) {
        rows = std::max(rows, cell["query"].get<int>() + 1);
        cols = std::max(cols, cell["key"].get<int>() + 1);
    }
    EXPECT_EQ(rows, 32);
    EXPECT_EQ(cols, 32);
    test::check_heatmap_cells(shot.image, cells, json::parse(cli.out), true);
}

// A word an option does not take, or a layer, head or query the model or
// text lacks: one line naming the flag, and exit 2, before any window opens.
TEST_F(WindowTest, BadOptionsAreOneLineErrorsNamingTheFlag) {
    const std::string model = (dir_->path / "model").string();
    const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
        {{"--causal", "maybe"}, "--causal: causal mask 'maybe' is not one of off, on"},
        {{"--padding-mask", "1"}, "--padding-mask: padding mask '1' is not one of off, on"},
        {{"--view", "tabs"},
         "--view: view 'tabs' is not one of heads, tokens, model, router, lens, effects, patching, mask, dance, "
         "checks"},
        {{"--scale", "sqrt"}, "--scale: scale 'sqrt' is not one of head, model, none"},
        {{"--split", "view"}, "--split: split 'view' is not one of transpose, naive-view"},
        {{"--colormap", "jet"}, "--colormap: colormap 'jet' is not one of viridis, magma, grey"},
        {{"--backend", "gpu"}, "--backend: backend 'gpu' is not one of auto, cpu, cuda"},
        {{"--settings", "yes"}, "--settings: settings 'yes' is not one of off, on"},
        {{"--layer", "2"}, "--layer 2 out of range (the model has layers 0..1)"},
        {{"--head", "4"}, "--head 4 out of range (4 heads, 0 to 3)"},
        {{"--head", "-5"}, "--head -5 out of range (4 heads, 0 to 3)"},
        {{"--text", "a", "--text-pair", "b"},
         "--text-pair: sentence pairs are for encoders; this model (gpt2) is a decoder"},
        {{"--text", "a", "--target", "b"},
         "--target: a target is for encoder-decoders; this model (gpt2) is a decoder"},
        {{"--heads", "5"}, "--heads: head count 5 does not divide C = 32"},
        {{"--text", "The cat", "--query", "2"}, "--query 2 out of range (the text's 2 tokens are at positions 0 to 1)"},
        {{"--query", "-2"}, "--query -2 is not a token's position"},
        {{"--ablate", "1.x"}, "--ablate: '1.x' is not a head (expected LAYER.HEAD,...)"},
        {{"--ablate", "2.0"}, "--ablate: head 2.0 to knock out is not one of the model's (layers 0..1, heads 0..3)"},
        {{"--window-size", "1920x"},
         "--window-size: a window size is WIDTHxHEIGHT, each from 320 to 16384 (like 1920x1080): got '1920x'"},
        {{"--window-size", "100x100"},
         "--window-size: a window size is WIDTHxHEIGHT, each from 320 to 16384 (like 1920x1080): got '100x100'"},
    };
    for (const auto& [options, message] : cases) {
        std::vector<std::string> args = {"--model", model, "--screenshot", (dir_->path / "bad.png").string()};
        args.insert(args.end(), options.begin(), options.end());
        test::expect_one_line_error(test::run_window(args, dir_->path), "headscope", message);
    }
}

// Started from a terminal, the window's first model loads before the window
// opens: its bar is on the terminal (stderr), then cleared; piped, stderr
// has none of it.
TEST_F(WindowTest, TheStartModelsLoadShowsItsBarOnATerminal) {
    const std::vector<std::string> args = {"--model", (dir_->path / "model").string(), "--screenshot",
                                           (dir_->path / "terminal.png").string()};
    std::vector<std::string> command = {HEADSCOPE_WINDOW};
    command.insert(command.end(), args.begin(), args.end());
    const test::ProcessRun shown = [&] {
        const test::VirtualScreen screen("1920x1080");
        const test::ScopedEnv display("DISPLAY", screen.name());
        return test::run_on_terminal(command, dir_->path, test::Stream::err);
    }();
    ASSERT_EQ(shown.status, 0) << shown.err;
    EXPECT_NE(shown.err.find("] reading the weights: 0.0 of "), std::string::npos) << shown.err;
    EXPECT_NE(shown.err.find("\r\033[K"), std::string::npos) << shown.err;
    const test::ProcessRun piped = test::run_window(args, dir_->path);
    ASSERT_EQ(piped.status, 0) << piped.err;
    EXPECT_EQ(piped.err.find("reading the weights"), std::string::npos) << piped.err;
}

// Quiet when idle: once every worker has settled, the window draws only the
// frames ImGui settles in after the last event (2), however long nothing
// happens, and asleep after them takes under 3% of a core (the frames
// themselves, drawn by llvmpipe on the CPU, are not the sleep: counted in,
// three of them came to 3.2% of 3 s with the suite running beside); on the
// heads tab and on the effects tab with its grid computed alike.
TEST_F(WindowTest, AnIdleWindowDrawsNothingAndSleeps) {
    for (const std::vector<std::string>& view : {std::vector<std::string>{"--view", "heads"},
                                                 std::vector<std::string>{"--view", "effects", "--compute-effects"}}) {
        std::vector<std::string> args = {"--model", (dir_->path / "model").string(), "--count-idle-frames", "3"};
        args.insert(args.end(), view.begin(), view.end());
        const test::ProcessRun run = test::run_window(args, dir_->path);
        ASSERT_EQ(run.status, 0) << run.err;
        int frames = -1;
        double seconds = 0, asleep = 0, percent = 100;
        ASSERT_EQ(std::sscanf(run.out.c_str(), "idle: %d frames in %lf s; asleep %lf s at %lf%% of a core", &frames,
                              &seconds, &asleep, &percent),
                  4)
            << run.out;
        EXPECT_GE(seconds, 3.0);
        EXPECT_GE(asleep, 2.5) << run.out;  // the settling frames take milliseconds, not the sleep
        EXPECT_LE(frames, 3) << view[1];
        EXPECT_LT(percent, 3.0) << view[1];
    }
}
