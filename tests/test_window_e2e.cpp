// The real window driven as a person drives it: on its own Xvfb screen,
// xdotool clicks into the empty text box, types a sentence and clicks the
// causal checkbox off, or picks an example from the examples menu; the screen
// is then read back through Xlib and every drawn cell must show the colormap
// of headscope-cli's weight for that sentence with the causal mask off. The
// dance's keys are pressed and the step it lands on checked. Typing at the
// end of a text reuses its prefix, and "next token" pressed three times
// appends the model's three greedy tokens.
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "driven_window.h"
#include "headscope/compute/backend.h"
#include "headscope/model/model.h"
#include "model_writer.h"
#include "process.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;

namespace {

// Every heatmap cell of `layout` on `shot` must show the viridis colour of
// headscope-cli's weight for `text` without the causal mask (so no cell is
// hatched); returns the cells checked.
int expect_cells_show_cli_weights(const test::Image& shot, const std::filesystem::path& layout,
                                  const std::string& model, const std::string& text,
                                  const std::filesystem::path& scratch) {
    const test::ProcessRun cli = test::run_program(
        {test::cli_program(), "attention", "--model", model, "--text", text, "--causal", "off"}, scratch);
    EXPECT_EQ(cli.status, 0) << cli.err;
    const json attention = json::parse(cli.out);
    const int T = attention["seq_len"];
    int cells = 0;
    for (const json& cell : test::read_layout(layout)) {
        if (cell["view"] != "heads") continue;
        const int h = cell["head"], i = cell["query"], j = cell["key"];
        EXPECT_LT(i, T) << "the window shows more tokens than the text has";
        if (i >= T) break;
        const int x = static_cast<int>(cell["x"].get<double>() + cell["w"].get<double>() / 2);
        const int y = static_cast<int>(cell["y"].get<double>() + cell["h"].get<double>() / 2);
        const double weight = attention["attention"][0][0][h][i][j];
        const std::array<double, 3> want = test::viridis(weight);
        const std::array<int, 3> got = shot.at(x, y);
        for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[c], want[c], 2.0) << "head " << h << " cell " << i << "," << j;
        ++cells;
    }
    return cells;
}

int token_count(const std::string& model, const std::string& text, const std::filesystem::path& scratch) {
    const test::ProcessRun cli =
        test::run_program({test::cli_program(), "tokenize", "--model", model, "--text", text}, scratch);
    EXPECT_EQ(cli.status, 0) << cli.err;
    return static_cast<int>(json::parse(cli.out)["token_ids"].size());
}

TEST(WindowEndToEnd, TypingAndTogglingTheCausalMaskRedrawTheMaps) {
    test::TempDir dir;
    const std::string model = (dir.path / "model").string();
    test::write_test_model(model, {.n_layer = 1, .n_head = 2, .n_embd = 16, .n_positions = 32});
    const std::string typed = "Dogs chase the cat";

    // Where the text box and the checkbox are, from a screenshot run's layout.
    const test::WindowShot first = test::shoot_window({"--model", model, "--text", "A"}, dir.path, "first");
    ASSERT_EQ(first.run.status, 0);
    const test::Centres controls = test::control_centres(first.layout);
    ASSERT_TRUE(controls.contains("text") && controls.contains("causal mask"));

    const test::VirtualScreen screen;
    ASSERT_FALSE(screen.name().empty()) << "Xvfb did not start";
    const auto layout = dir.path / "layout.json";
    // A click on the text gives the box the keys with its cursor at the end
    // (no key chords, which ImGui 1.86 can miss when press and release fall
    // in one frame of a busy machine), keys typed at once included.
    test::DrivenWindow window(screen.name(), {"--model", model, "--text", "Dogs", "--layout", layout.string()},
                              dir.path);
    EXPECT_EQ(window
                  .xdotool({"mousemove", controls.at("text")[0], controls.at("text")[1], "click", "1", "type",
                            "--delay", "20", typed.substr(4)})
                  .status,
              0);
    test::pause_ms(300);
    window.click(controls.at("causal mask"));
    const test::Image shot = window.settled_screen();
    ASSERT_EQ(window.quit(), 0);
    ASSERT_EQ(shot.width, 1280);

    const int T = token_count(model, typed, dir.path);
    EXPECT_EQ(expect_cells_show_cli_weights(shot, layout, model, typed, dir.path), 2 * T * T);
}

TEST(WindowEndToEnd, ChoosingAnExampleFromTheMenuShowsItsTexts) {
    test::TempDir dir;
    const std::string model = (dir.path / "model").string();
    test::write_test_model(model, {.n_layer = 1, .n_head = 2, .n_embd = 16, .n_positions = 32});
    const std::string chosen = "Cats purr when they are warm";
    const auto examples = dir.path / "examples.json";
    std::ofstream(examples) << json::array({{{"title", "first"}, {"texts", {"A dog"}}, {"look_for", "a"}},
                                            {{"title", "second"}, {"texts", {chosen}}, {"look_for", "b"}}})
                                   .dump();
    const test::ScopedEnv use_examples("HEADSCOPE_EXAMPLES", examples.string());

    const test::WindowShot first = test::shoot_window({"--model", model, "--text", "A"}, dir.path, "first");
    ASSERT_EQ(first.run.status, 0);
    const std::vector<std::string> menu = test::control_centres(first.layout).at("examples");

    const test::VirtualScreen screen;
    ASSERT_FALSE(screen.name().empty()) << "Xvfb did not start";
    // Where the menu's entries are: a window quit with the menu open lays them out.
    const auto open_layout = dir.path / "open.json";
    {
        test::DrivenWindow window(screen.name(), {"--model", model, "--text", "A", "--layout", open_layout.string()},
                                  dir.path);
        window.click(menu);
        window.settled_screen();
        ASSERT_EQ(window.quit(), 0);
    }
    const test::Centres open_controls = test::control_centres(test::read_layout(open_layout));
    ASSERT_TRUE(open_controls.contains("example:second"));

    const auto layout = dir.path / "layout.json";
    test::DrivenWindow window(
        screen.name(), {"--model", model, "--text", "A", "--causal", "off", "--layout", layout.string()}, dir.path);
    window.click(menu);
    window.settled_screen();  // as a person does: the entry is clicked once the menu is seen
    window.click(open_controls.at("example:second"));
    const test::Image shot = window.settled_screen();
    ASSERT_EQ(window.quit(), 0);

    const int T = token_count(model, chosen, dir.path);
    EXPECT_EQ(expect_cells_show_cli_weights(shot, layout, model, chosen, dir.path), 2 * T * T);
}

TEST(WindowEndToEnd, ArrowAndPunctuationKeysStepTheDance) {
    test::TempDir dir;
    const std::string model = (dir.path / "model").string();
    test::write_test_model(model, {.n_layer = 1, .n_head = 2, .n_embd = 16, .n_positions = 32});
    const test::VirtualScreen screen;
    ASSERT_FALSE(screen.name().empty()) << "Xvfb did not start";
    const auto layout = dir.path / "layout.json";
    test::DrivenWindow window(
        screen.name(),
        {"--model", model, "--text", "Dogs chase the cat", "--view", "dance", "--layout", layout.string()}, dir.path);
    EXPECT_EQ(window.xdotool({"search", "--onlyvisible", "--name", "^Headscope$", "windowfocus", "--sync"}).status, 0);
    // Each key held a moment: ImGui 1.86 misses a press released within one frame.
    // Left at step 1 stays there; then . . right , : step 3.
    for (const char* key : {"Left", "period", "period", "Right", "comma"})
        EXPECT_EQ(window.xdotool({"keydown", key, "sleep", "0.2", "keyup", key, "sleep", "0.2"}).status, 0) << key;
    window.settled_screen();
    ASSERT_EQ(window.quit(), 0);
    int step = 0;
    for (const json& cell : test::read_layout(layout))
        if (cell["view"] == "dance-step") step = cell["step"];
    EXPECT_EQ(step, 3);
}

// On the built-in model: typed one key at a time at the end of the text, each
// compute reuses the prefix the last left (the status bar says so); then
// "next token" three times appends the argmax of a full forward, three times
// over, and the step slider stands at the third step.
TEST(WindowEndToEnd, TypingReusesThePrefixAndNextTokenAppendsGreedyTokens) {
    test::TempDir dir;
    const std::string typed = "The cat sat on the";
    const test::WindowShot first = test::shoot_window({"--text", "A"}, dir.path, "first");
    ASSERT_EQ(first.run.status, 0);
    const test::Centres controls = test::control_centres(first.layout);
    ASSERT_TRUE(controls.contains("text") && controls.contains("next token"));

    const test::VirtualScreen screen;
    ASSERT_FALSE(screen.name().empty()) << "Xvfb did not start";
    const auto typing_layout = dir.path / "typing.json";
    {
        test::DrivenWindow window(screen.name(), {"--text", "", "--layout", typing_layout.string()}, dir.path);
        window.click(controls.at("text"));
        EXPECT_EQ(window.xdotool({"type", "--delay", "60", typed}).status, 0);
        window.settled_screen();
        ASSERT_EQ(window.quit(), 0);
    }
    json status;
    for (const json& entry : test::read_layout(typing_layout))
        if (entry["view"] == "status" && entry["name"] == "tokens") status = entry;
    ASSERT_FALSE(status.is_null());
    EXPECT_EQ(status["text"].get<std::string>().rfind("reused ", 0), 0u) << status["text"];

    const auto layout = dir.path / "layout.json";
    test::DrivenWindow window(screen.name(), {"--text", typed, "--layout", layout.string()}, dir.path);
    // Each step settled before the next press: the button waits while one runs.
    for (int press = 0; press < 3; ++press) {
        window.click(controls.at("next token"));
        window.settled_screen();
    }
    ASSERT_EQ(window.quit(), 0);

    // What greedy generation must give: the argmax of a full forward, three times.
    const Model model = load_model(builtin_model);
    const std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    std::vector<int32_t> ids = model.tokenizer.encode_texts({typed})[0];
    std::vector<int32_t> greedy;
    std::string text = typed;
    AttentionOptions options;
    options.top_k = 1;
    for (int step = 0; step < 3; ++step) {
        AttentionResult result;
        backend->forward(Batch{{ids}, model.config.pad_id()}, options, result);
        const int32_t next = result.predictions_at(0, result.T - 1)[0].id;
        greedy.push_back(next);
        ids.push_back(next);
        text += model.tokenizer.token_bytes(next);
    }

    json generation;
    for (const json& entry : test::read_layout(layout))
        if (entry["view"] == "generation") generation = entry;
    ASSERT_FALSE(generation.is_null()) << "no generation shown";
    EXPECT_EQ(generation["steps"], 3);
    EXPECT_EQ(generation["step"], 3);
    EXPECT_EQ(generation["ids"].get<std::vector<int32_t>>(), greedy);
    EXPECT_EQ(generation["text"], text);
}

// A first start (no settings saved) takes nine tenths of the screen,
// centred; the size and place the window is left at are where the next
// start opens it.
TEST(WindowEndToEnd, TheWindowOpensWhereItWasLeft) {
    test::TempDir dir;
    const std::string model = (dir.path / "model").string();
    test::write_test_model(model, {.n_layer = 1, .n_head = 2, .n_embd = 16, .n_positions = 32});
    const test::ScopedEnv config("XDG_CONFIG_HOME", (dir.path / "config").string());
    const test::VirtualScreen screen;
    ASSERT_FALSE(screen.name().empty()) << "Xvfb did not start";
    const std::vector<std::string> args = {"--model", model, "--text", "A", "--settings", "on"};
    {
        test::DrivenWindow window(screen.name(), args, dir.path, true);
        EXPECT_EQ(window.geometry(), (std::array{64, 40, 1152, 720}));  // the screen is 1280 x 800
        window.xdotool({"search", "--name", "^Headscope$", "windowsize", "900", "600", "windowmove", "30", "50"});
        test::pause_ms(500);
        ASSERT_EQ(window.quit(), 0);
    }
    const json saved = json::parse(test::read_file(dir.path / "config" / "headscope" / "settings.json"));
    EXPECT_EQ(saved["window"], json::array({900, 600}));
    EXPECT_EQ(saved["window_position"], json::array({30, 50}));
    test::DrivenWindow window(screen.name(), args, dir.path, true);
    EXPECT_EQ(window.geometry(), (std::array{30, 50, 900, 600}));
    ASSERT_EQ(window.quit(), 0);
}

}  // namespace

// The lens of a long text: the wheel over it zooms about the mouse (the
// cells widen, the position under the mouse stays under it) and the grid
// scrolls sideways rather than leave the window.
TEST(WindowEndToEnd, TheWheelZoomsTheLensAboutTheMouse) {
    test::TempDir dir;
    std::string text;
    for (int n = 0; n < 12; ++n) text += "The cat sat on the mat because it was soft. ";
    // Where the grid's first row is, from a screenshot run's layout.
    const test::WindowShot first = test::shoot_window({"--text", text, "--view", "lens"}, dir.path, "lens");
    ASSERT_EQ(first.run.status, 0);
    const json row = test::entries(first.layout, "lens").at(0);
    const std::string y = std::to_string(static_cast<int>(row["y"].get<double>() + row["h"].get<double>() / 2));
    // The position under x = 501, the mouse's column, and the cell widths, before and after.
    const auto under_mouse = [](const json& layout) {
        for (const json& cell : test::entries(layout, "lens"))
            if (cell["x"].get<double>() <= 501 && 501 < cell["x"].get<double>() + cell["w"].get<double>())
                return std::pair(cell["position"].get<int>(), cell["w"].get<double>());
        return std::pair(-1, 0.0);
    };
    const auto [position, fit_width] = under_mouse(first.layout);
    ASSERT_GE(position, 0);

    const test::VirtualScreen screen;
    ASSERT_FALSE(screen.name().empty()) << "Xvfb did not start";
    const auto layout = dir.path / "lens.json";
    test::DrivenWindow window(screen.name(), {"--text", text, "--view", "lens", "--layout", layout.string()}, dir.path);
    window.settled_screen();
    EXPECT_EQ(window.xdotool({"mousemove", "500", y}).status, 0);
    for (int n = 0; n < 8; ++n)  // each notch held apart: ImGui 1.86 reads one wheel step a frame
        EXPECT_EQ(window.xdotool({"click", "4", "sleep", "0.15"}).status, 0);
    EXPECT_EQ(window.xdotool({"mousemove", "501", y}).status, 0);
    window.settled_screen();
    ASSERT_EQ(window.quit(), 0);

    const json zoomed = test::read_layout(layout);
    const auto [position_after, width] = under_mouse(zoomed);
    EXPECT_GT(width, 3 * fit_width) << "the wheel did not zoom";
    EXPECT_NEAR(position_after, position, 1) << "the position under the mouse moved away from it";
    const json cells = test::entries(zoomed, "lens");
    EXPECT_GT(cells.back()["x"].get<double>(), 1280) << "zoomed in, the grid runs past the window and scrolls";
}
