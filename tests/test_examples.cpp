// The example texts the window offers (assets/examples.json): each must be a
// batch the built-in model can take whole, `--example` must open the window
// on exactly its texts, and a bad title or a broken file must be a one-line
// error, never a crash (the window itself runs on without its examples).
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "model_writer.h"
#include "process.h"
#include "screenshot.h"

using namespace headscope;
using nlohmann::json;

namespace {

const std::filesystem::path examples_path = HEADSCOPE_ASSETS_DIR "/examples.json";

json shipped_examples() { return json::parse(test::read_file(examples_path)); }

TEST(Examples, EachIsABatchTheBuiltinModelTakesWhole) {
    test::TempDir dir;
    const test::ProcessRun info = test::run_program({test::cli_program(), "info"}, dir.path);
    ASSERT_EQ(info.status, 0) << info.err;
    const int context = json::parse(info.out)["n_positions"];

    const json examples = shipped_examples();
    ASSERT_GE(examples.size(), 4u);
    std::set<std::string> titles;
    for (const json& example : examples) {
        const std::string title = example.at("title");
        EXPECT_TRUE(titles.insert(title).second) << "two examples titled " << title;
        EXPECT_FALSE(example.at("look_for").get<std::string>().empty()) << title;
        ASSERT_FALSE(example.at("texts").empty()) << title;
        for (const std::string text : example.at("texts")) {
            const test::ProcessRun tokens =
                test::run_program({test::cli_program(), "tokenize", "--text", text}, dir.path);
            ASSERT_EQ(tokens.status, 0) << title << ": " << tokens.err;
            const size_t count = json::parse(tokens.out)["token_ids"].size();
            EXPECT_GE(count, 1u) << title;
            EXPECT_LE(count, static_cast<size_t>(context)) << title << ": longer than the built-in model's context";
        }
    }
}

TEST(Examples, TheWindowOpensOnEachExamplesTexts) {
    test::TempDir dir;
    for (const json& example : shipped_examples()) {
        const std::string title = example["title"];
        const auto exported = dir.path / "attention.json";
        const test::ProcessRun run = test::run_window(
            {"--example", title, "--screenshot", (dir.path / "shot.png").string(), "--export-json", exported.string()},
            dir.path);
        ASSERT_EQ(run.status, 0) << title << ": " << run.err;
        EXPECT_EQ(json::parse(test::read_file(exported))["texts"], example["texts"]) << title;
    }
}

// No false alarm: on every example the checks tab finds the earlier rows
// exactly unchanged (the forward gives the same bits every time) and the
// batched heads within round-off of the per-head loop.
TEST(Examples, TheChecksTabRaisesNoAlarmOnAnyExample) {
    test::TempDir dir;
    for (const json& example : shipped_examples()) {
        const std::string title = example["title"];
        const test::WindowShot shot = test::shoot_window({"--example", title, "--view", "checks"}, dir.path, "checks");
        ASSERT_EQ(shot.run.status, 0) << title << ": " << shot.run.err;
        std::map<std::string, double> figures;
        for (const json& entry : shot.layout)
            if (entry["view"] == "checks" && entry.contains("figure") && entry["value"].is_number())
                figures[entry["figure"]] = entry["value"];
        ASSERT_TRUE(figures.contains("earlier_rows_diff")) << title;
        EXPECT_EQ(figures["earlier_rows_diff"], 0.0) << title;
        EXPECT_LT(figures["weight_diff"], 1e-4) << title;
    }
}

TEST(Examples, AnUnknownTitleOrTwoSourcesOfTextAreOneLineErrors) {
    test::TempDir dir;
    const std::string first_title = shipped_examples()[0]["title"];
    test::expect_one_line_error(test::run_window({"--example", "no such example", "--screenshot", "x.png"}, dir.path),
                                "headscope", "no example titled 'no such example'; there are '" + first_title + "'");
    test::expect_one_line_error(
        test::run_window({"--example", first_title, "--text", "Hello", "--screenshot", "x.png"}, dir.path), "headscope",
        "--text and --example");
}

TEST(Examples, ABrokenExamplesFileIsNamedAndTheWindowRunsWithoutIt) {
    test::TempDir dir;
    const auto broken = dir.path / "examples.json";
    std::ofstream(broken) << R"([{"title": "no texts"}])";
    const test::ScopedEnv examples("HEADSCOPE_EXAMPLES", broken.string());

    const test::ProcessRun plain = test::run_window({"--screenshot", (dir.path / "shot.png").string()}, dir.path);
    EXPECT_EQ(plain.status, 0) << plain.err;
    EXPECT_NE(plain.err.find("headscope: warning: " + broken.string() + ": not a list of examples"), std::string::npos)
        << plain.err;

    test::expect_one_line_error(test::run_window({"--example", "no texts", "--screenshot", "x.png"}, dir.path),
                                "headscope", broken.string() + ": not a list of examples");
    std::filesystem::remove(broken);
    test::expect_one_line_error(test::run_window({"--example", "no texts", "--screenshot", "x.png"}, dir.path),
                                "headscope", broken.string() + ": cannot open the examples");
}

}  // namespace
