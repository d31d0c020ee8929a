// The window's models, export and settings, as a user meets them: a model
// opened after start-up (as the picker does) replaces the shown one, a bad
// one leaves it and says why in the window; Save JSON/NPY write exactly what
// headscope-cli writes; settings come back in the next run, and a corrupt
// file is only a warning.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "model_writer.h"
#include "process.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;
namespace fs = std::filesystem;

namespace {

class WindowModels : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        test::write_test_model(dir_->path / "four",
                               {.n_layer = 2, .n_head = 4, .n_embd = 32, .n_positions = 32, .seed = 1});
        test::write_test_model(dir_->path / "two",
                               {.n_layer = 3, .n_head = 2, .n_embd = 32, .n_positions = 32, .seed = 2});
        test::write_test_model(dir_->path / "narrow",
                               {.n_layer = 1, .n_head = 2, .n_embd = 20, .n_positions = 32, .seed = 3});
    }
    static void TearDownTestSuite() { delete dir_; }

    static std::string model(const char* name) { return (dir_->path / name).string(); }
    static fs::path file(const std::string& name) { return dir_->path / name; }

    // Runs the window in screenshot mode; returns its layout (every cell and control).
    json shoot(const std::string& name, std::vector<std::string> args) {
        const test::WindowShot shot = test::shoot_window(args, dir_->path, name);
        EXPECT_EQ(shot.run.status, 0) << name;
        return shot.layout;
    }

    static std::set<int> heads_drawn(const json& layout) {
        std::set<int> heads;
        for (const json& cell : layout)
            if (cell["view"] == "heads") heads.insert(cell["head"].get<int>());
        return heads;
    }

    // The text of control `name` in the layout; empty when it was not drawn.
    static std::string control_text(const json& layout, const std::string& name) {
        for (const json& cell : layout)
            if (cell["view"] == "control" && cell["name"] == name) return cell["text"];
        return "";
    }

    // The attention as the window computes it: with its top 10 predictions (Session::predictions_k).
    static test::ProcessRun cli(std::vector<std::string> args) {
        args.insert(args.begin(), {test::cli_program(), "attention", "--top-k", "10"});
        return test::run_program(args, dir_->path);
    }

    // The JSON without its timing_ms object: the only part that differs between runs.
    static std::string without_timing(std::string text) {
        const size_t begin = text.find("\"timing_ms\":{"), end = text.find("},", begin);
        if (end != std::string::npos) text.erase(begin, end + 2 - begin);  // end found implies begin found
        return text;
    }

    static test::TempDir* dir_;
    const std::string text_ = "The cat sat on the mat because it was soft.";
};
test::TempDir* WindowModels::dir_ = nullptr;

TEST_F(WindowModels, OpenedModelReplacesTheShownOneAndExportsAsTheCli) {
    const json layout = shoot("opened", {"--model", model("four"), "--text", text_, "--layer", "1", "--open-model",
                                         model("two"), "--export-json", file("opened-window.json").string(),
                                         "--export-npy", file("opened-window.npy").string()});
    EXPECT_EQ(heads_drawn(layout), (std::set<int>{0, 1}));
    EXPECT_EQ(control_text(layout, "model"), model("two"));
    EXPECT_EQ(control_text(layout, "model message"), "");

    // The cells drawn are the new model's weights (layer 1, kept), through the colormap.
    const test::ProcessRun run =
        cli({"--model", model("two"), "--text", text_, "--out", file("opened-cli.json").string()});
    ASSERT_EQ(run.status, 0) << run.err;
    const json weights = json::parse(test::read_file(file("opened-cli.json")))["attention"][1][0];
    const test::Image image = test::load_png(file("opened.png"));
    int checked = 0;
    for (const json& cell : layout) {
        if (cell["view"] != "heads" || cell["key"] > cell["query"]) continue;
        const int x = static_cast<int>(cell["x"].get<double>() + cell["w"].get<double>() / 2);
        const int y = static_cast<int>(cell["y"].get<double>() + cell["h"].get<double>() / 2);
        EXPECT_EQ(cell["layer"], 1);
        const std::array<double, 3> want =
            test::viridis(weights[cell["head"].get<int>()][cell["query"].get<int>()][cell["key"].get<int>()]);
        const std::array<int, 3> got = image.at(x, y);
        for (int c = 0; c < 3; ++c) EXPECT_NEAR(got[c], want[c], 2.0);
        ++checked;
    }
    EXPECT_EQ(checked, 2 * 11 * 12 / 2);

    // Save JSON and Save NPY write the CLI's bytes (the timings aside).
    EXPECT_EQ(without_timing(test::read_file(file("opened-window.json"))),
              without_timing(test::read_file(file("opened-cli.json"))));
    ASSERT_EQ(
        cli({"--model", model("two"), "--text", text_, "--format", "npy", "--out", file("opened-cli.npy").string()})
            .status,
        0);
    EXPECT_EQ(test::read_file(file("opened-window.npy")), test::read_file(file("opened-cli.npy")));
}

TEST_F(WindowModels, OptionsTheNewModelCannotTakeGoBackToItsOwn) {
    // 8 heads do not divide C = 20, and layer 1 is past the new model's only layer.
    const json reset =
        shoot("reset", {"--model", model("four"), "--heads", "8", "--layer", "1", "--open-model", model("narrow")});
    EXPECT_EQ(control_text(reset, "model"), model("narrow"));
    EXPECT_EQ(heads_drawn(reset), (std::set<int>{0, 1}));
    for (const json& cell : reset) {
        if (cell["view"] == "heads") {
            EXPECT_EQ(cell["layer"], 0);
        }
    }
    // A re-split into 8 heads divides the new C = 32 too: it stays.
    EXPECT_EQ(heads_drawn(shoot("kept", {"--model", model("four"), "--heads", "8", "--open-model", model("two")})),
              (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST_F(WindowModels, ExportOfABatchWithOptionsIsTheClisOutput) {
    // The second text in brackets: taken whole, as written, not read as a list of two.
    const std::vector<std::string> settings = {"--text",   text_, "--text",  "[It,was]", "--heads", "8",
                                               "--causal", "off", "--scale", "model",    "--split", "naive-view"};
    std::vector<std::string> window = {"--model",       model("four"),
                                       "--export-json", file("batch-window.json").string(),
                                       "--export-npy",  file("batch-window.npy").string()};
    window.insert(window.end(), settings.begin(), settings.end());
    shoot("batch", window);
    std::vector<std::string> json_args = {"--model", model("four"), "--out", file("batch-cli.json").string()};
    std::vector<std::string> npy_args = {"--model", model("four"), "--format",
                                         "npy",     "--out",       file("batch-cli.npy").string()};
    json_args.insert(json_args.end(), settings.begin(), settings.end());
    npy_args.insert(npy_args.end(), settings.begin(), settings.end());
    ASSERT_EQ(cli(json_args).status, 0);
    ASSERT_EQ(cli(npy_args).status, 0);

    const std::string exported = test::read_file(file("batch-window.json"));
    EXPECT_EQ(json::parse(exported)["n_head"], 8);
    ASSERT_EQ(json::parse(exported)["lengths"].size(), 2u);
    EXPECT_EQ(json::parse(exported)["lengths"][0], 11);
    EXPECT_EQ(without_timing(exported), without_timing(test::read_file(file("batch-cli.json"))));
    EXPECT_EQ(test::read_file(file("batch-window.npy")), test::read_file(file("batch-cli.npy")));
}

TEST_F(WindowModels, BadModelOpenedKeepsTheShownOneWithAMessage) {
    const json layout = shoot("bad", {"--model", model("four"), "--open-model", model("no-such-model")});
    EXPECT_EQ(heads_drawn(layout), (std::set<int>{0, 1, 2, 3}));
    EXPECT_EQ(control_text(layout, "model"), model("four"));
    const std::string message = control_text(layout, "model message");
    EXPECT_NE(message.find("no-such-model"), std::string::npos) << message;
    EXPECT_NE(message.find("not found"), std::string::npos) << message;
}

TEST_F(WindowModels, BadModelAtStartIsOneLineAndExitTwo) {
    // The model loads before any window opens: no display is needed to refuse it.
    const test::ProcessRun run = test::run_program({HEADSCOPE_WINDOW, "--model", model("no-such-model")}, dir_->path);
    EXPECT_EQ(run.status, 2);
    EXPECT_EQ(run.err,
              "headscope: error: model '" + model("no-such-model") + "' not found: no directory of that name\n");
}

TEST_F(WindowModels, SettingsComeBackInTheNextRun) {
    test::TempDir config;
    test::ScopedEnv xdg("XDG_CONFIG_HOME", config.path.string());
    // Screenshot mode leaves the settings alone unless asked.
    shoot("hermetic", {"--model", model("two")});
    EXPECT_TRUE(fs::is_empty(config.path));

    shoot("first", {"--settings", "on", "--model", model("two"), "--text", "Hello there", "--colormap", "magma",
                    "--heads", "4"});
    const json saved = json::parse(test::read_file(config.path / "headscope" / "settings.json"));
    EXPECT_EQ(saved["model"], model("two"));
    EXPECT_EQ(saved["texts"], json::array({"Hello there"}));
    EXPECT_EQ(saved["colormap"], "magma");
    EXPECT_EQ(saved["heads"], 4);

    // No model, text or heads given: the saved ones. The map's top-left cell
    // (a first token attends only to itself: weight 1) is magma's end, not viridis's.
    const json layout = shoot("second", {"--settings", "on"});
    EXPECT_EQ(control_text(layout, "model"), model("two"));
    EXPECT_EQ(heads_drawn(layout), (std::set<int>{0, 1, 2, 3}));
    for (const json& cell : layout) {
        if (cell["view"] != "heads" || cell["query"] != 0 || cell["key"] != 0) continue;
        const std::array<int, 3> got =
            test::load_png(file("second.png"))
                .at(static_cast<int>(cell["x"].get<double>() + 1), static_cast<int>(cell["y"].get<double>() + 1));
        EXPECT_GT(got[0], 240);  // magma(1) is (252, 253, 191); viridis(1) is (253, 231, 37)
        EXPECT_GT(got[2], 150);
    }
    // The command line wins over the saved settings.
    EXPECT_EQ(heads_drawn(shoot("third", {"--settings", "on", "--heads", "2"})), (std::set<int>{0, 1}));
}

TEST_F(WindowModels, CorruptSettingsAreAWarningAndTheDefaults) {
    test::TempDir config;
    test::ScopedEnv xdg("XDG_CONFIG_HOME", config.path.string());
    fs::create_directories(config.path / "headscope");
    std::ofstream(config.path / "headscope" / "settings.json")
        << "{\"model\": \"" << model("two") << "\", \"texts\": [";
    const test::WindowShot shot = test::shoot_window({"--settings", "on"}, dir_->path, "corrupt");
    const test::ProcessRun& run = shot.run;
    EXPECT_EQ(run.status, 0);
    EXPECT_NE(run.err.find("headscope: warning: ignoring " + (config.path / "headscope" / "settings.json").string()),
              std::string::npos)
        << run.err;
    EXPECT_EQ(std::count(run.err.begin(), run.err.end(), '\n'), 1) << run.err;
    EXPECT_EQ(control_text(shot.layout, "model"), "builtin");
}

}  // namespace
