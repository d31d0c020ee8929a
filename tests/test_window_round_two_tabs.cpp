// Every tab of the window on each round-two family (Gemma 2 and 3, Phi-3,
// OLMo 2, and the mixtures of experts Mixtral, OLMoE, Qwen 3 MoE and
// gpt-oss), their Hugging Face folders as family_writer.h writes them, as a
// user opens them under Xvfb: one window a family shoots every tab in turn
// (--screenshot-views all), and each tab opens with no message, draws its
// own cells and shows what the double-precision reference computes
// (window_tab_references.h).
#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "family_models.h"
#include "headscope/io/files.h"
#include "screenshot.h"
#include "window_reference_cells.h"
#include "window_tab_references.h"

using namespace headscope;
using namespace headscope::test;
using nlohmann::json;

namespace round_two_tabs {

class WindowRoundTwoTabs : public RoundTwoWindows {
protected:
    // The model bar's message, "" when it has none.
    static std::string message(const WindowShot& shot) {
        for (const json& control : entries(shot.layout, "control"))
            if (control["name"] == "model message") return control["text"];
        return "";
    }
};

// Each family in one window on one text (a second of as many tokens to
// compare, for the patching tab), its effects grid computed, at a layer
// that shows what is its own: Gemma 2's and gpt-oss's windowed layer 0,
// Gemma 3's local layer 4 (its window of 4 keys hatched), Phi-3's window of
// 5, Qwen 3 MoE's dense layer 1, the others' later layers. The tab bar is
// the ten views, less the router's where the spec has no experts, and the
// window shoots exactly those. On each: no message in the model bar or on
// stderr, the tab's own cells drawn; the heads, model, tokens, lens,
// router, effects, patching and mask tabs the reference's numbers, the
// checks tab core's figures of the family's forward, the dance its first
// step at the text's length.
TEST_F(WindowRoundTwoTabs, EveryTabShowsTheReferenceOnEveryFamily) {
    const std::vector<std::pair<std::string, int>> families = {{"gemma2", 0},    {"gemma3_text", 4}, {"phi3", 1},
                                                               {"olmo2", 1},     {"mixtral", 1},     {"olmoe", 2},
                                                               {"qwen3_moe", 1}, {"gpt_oss", 0}};
    // What each tab records of its own drawing, where that is not its name.
    const std::map<std::string, std::string> drawn = {{"effects", "effects-grid"},
                                                      {"tokens", "token"},
                                                      {"patching", "patch-token"},
                                                      {"mask", "mask_attention"},
                                                      {"checks", "checks-config"}};
    const auto check = std::map<std::string, void (*)(const WindowShot&, const TabReference&)>{
        {"heads", expect_heads_tab},       {"tokens", expect_tokens_tab}, {"model", expect_model_tab},
        {"router", expect_router_tab},     {"lens", expect_lens_tab},     {"effects", expect_effects_tab},
        {"patching", expect_patching_tab}, {"mask", expect_mask_tab},     {"dance", expect_dance_tab},
        {"checks", expect_checks_tab}};
    for (const auto& [name, layer] : families) {
        SCOPED_TRACE(name);
        const FamilyCheckpoint& checkpoint = checkpoints_.at(name);
        std::vector<std::string> want = {"heads",    "tokens", "model", "lens",  "effects",
                                         "patching", "mask",   "dance", "checks"};
        if (checkpoint.spec.n_experts > 0) want.insert(want.begin() + 3, "router");
        const std::filesystem::path exported = dir_->path / (name + "-export.json");
        size_t written = 0;
        const std::map<std::string, WindowShot> shots =
            shoot_views({"--model", (dir_->path / name).string(), "--text", text_, "--layer", std::to_string(layer),
                         "--compare", "It was soft!", "--compute-effects", "--export-json", exported.string()},
                        "all", want, dir_->path, name, &written);
        const ProcessRun& run = shots.at("heads").run;
        ASSERT_EQ(run.status, 0) << run.err;
        EXPECT_EQ(run.err, "");  // not a line on stderr
        EXPECT_EQ(written, want.size());
        const TabReference reference =
            tab_reference(checkpoint, json::parse(read_file(exported.string()))["token_ids"][0], layer);
        for (const std::string& view : want) {
            SCOPED_TRACE(view);
            const WindowShot& tab = shots.at(view);
            ASSERT_EQ(tab.image.width, 1280);
            std::vector<std::string> bar;
            for (const json& entry : entries(tab.layout, "tab")) bar.push_back(entry["name"]);
            EXPECT_EQ(bar, want);
            EXPECT_EQ(message(tab), "");
            EXPECT_FALSE(entries(tab.layout, drawn.count(view) ? drawn.at(view) : view).empty());
            check.at(view)(tab, reference);
        }
    }
}

// --screenshot-views refuses in one line, exit 2, before any window opens: a
// tab a dense model (the built-in GPT-2) lacks, a word that names no tab, a
// tab twice, no --screenshot to name the files by, and --view beside it.
TEST_F(WindowRoundTwoTabs, ScreenshotViewsRefusesWhatItCannotShoot) {
    const std::string png = (dir_->path / "refused.png").string();
    const std::vector<std::pair<std::vector<std::string>, std::string>> refusals = {
        {{"--screenshot-views", "heads,router", "--screenshot", png},
         "--screenshot-views router: the model has no experts"},
        {{"--screenshot-views", "heads,bogus", "--screenshot", png}, "--screenshot-views: view 'bogus' is not one of"},
        {{"--screenshot-views", "heads,lens,heads", "--screenshot", png}, "--screenshot-views: heads twice"},
        {{"--screenshot-views", "heads", "--settings", "off"}, "--screenshot-views needs --screenshot"},
        {{"--screenshot-views", "heads", "--view", "lens", "--screenshot", png}, "both give the tab: pass one"}};
    for (const auto& [args, says] : refusals) {
        const ProcessRun refused = run_window(args, dir_->path);
        EXPECT_EQ(refused.status, 2) << says;
        EXPECT_NE(refused.err.find(says), std::string::npos) << refused.err;
        EXPECT_EQ(refused.err.find('\n'), refused.err.size() - 1) << refused.err;
    }
    EXPECT_FALSE(std::filesystem::exists(png));
}

}  // namespace round_two_tabs
