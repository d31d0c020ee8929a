// The window's tabs on each round-two family (Gemma 2 and 3, Phi-3,
// OLMo 2, and the mixtures of experts Mixtral, OLMoE, Qwen 3 MoE and
// gpt-oss), their Hugging Face folders as family_writer.h writes them, as a
// user opens them under Xvfb: the heads grids of OLMo 2 (norms after the
// sublayers, Q and K normed over the whole projection) and Mixtral (4
// experts, 2 a token) are the double-precision reference's maps
// (window_reference_cells.h; test_window_round_two checks Gemma 3's, Phi-3's
// and OLMoE's); the tab bar holds the router's tab exactly where the spec has
// experts; and each tab whose drawing or computation differs by family opens
// with no message.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "family_models.h"
#include "screenshot.h"
#include "window_reference_cells.h"

using namespace headscope;
using namespace headscope::test;
using nlohmann::json;
namespace fs = std::filesystem;

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

TEST_F(WindowRoundTwoTabs, Olmo2AndMixtralHeadsGridsAreTheReferencesMaps) {
    for (const char* name : {"olmo2", "mixtral"}) {
        SCOPED_TRACE(name);
        json exported;
        const WindowShot shot = shoot(std::string(name) + "-heads", name, {"--text", text_, "--layer", "1"}, &exported);
        EXPECT_EQ(message(shot), "");
        if (!exported.is_null()) expect_reference_cells(shot, checkpoints_.at(name), exported["token_ids"][0], 1);
    }
}

// The tabs whose drawing or whose computation differs by family, each
// opened by --view with no message in the model bar or on stderr (every tab of every family, 73 windows,
// would cost some 34 s of CPU): the dance's steps (soft-capped scores, fused
// projections and partial rotary, the whole-projection QK-norm, the sinks),
// the checks' re-split of each layout, the logit lens through each final
// norm and cap, the mask tab's windowed layers, the router and the effects
// grid's experts mode of the mixtures, the model tab's dense layer among
// Qwen 3 MoE's; and on every family the tokens tab and the patching tab
// (given a second text of as many tokens), whose code is the same but whose
// forwards are each family's. Each window's tab bar is the ten views less
// the router's where the spec has no experts, and the tab draws its own cells.
TEST_F(WindowRoundTwoTabs, TheTabsThatDifferByFamilyOpen) {
    const std::map<std::string, std::vector<std::string>> tabs = {
        {"gemma2", {"dance", "lens", "mask"}},      {"gemma3_text", {"dance", "checks"}},
        {"phi3", {"dance", "checks", "mask"}},      {"olmo2", {"dance", "checks", "lens"}},
        {"mixtral", {"router", "effects", "lens"}}, {"olmoe", {"router", "effects"}},
        {"qwen3_moe", {"router", "model"}},         {"gpt_oss", {"router", "dance", "mask", "checks"}}};
    // What each tab records of its own drawing, where that is not its name:
    // the effects tab, not asked to compute its grid, the attribution grid;
    // the patching tab, given a second text of as many tokens, the tokens its
    // metric compares.
    const std::map<std::string, std::string> drawn = {
        {"effects", "attribution-grid"}, {"tokens", "tokens-scrolled"}, {"patching", "patch-token"}};
    for (const auto& [name, views] : tabs) {
        SCOPED_TRACE(name);
        std::vector<std::string> want = {"heads",    "tokens", "model", "lens",  "effects",
                                         "patching", "mask",   "dance", "checks"};
        if (checkpoints_.at(name).spec.n_experts > 0) want.insert(want.begin() + 3, "router");
        std::vector<std::string> opened = views;
        opened.insert(opened.end(), {"tokens", "patching"});  // the same code on every family, but its forwards
        for (const std::string& view : opened) {
            std::vector<std::string> args = {"--text", text_, "--view", view};
            if (view == "patching")
                args.insert(args.end(), {"--compare", "The cat sat on the mat because it was soft!"});
            const WindowShot tab = shoot(name + "-" + view, name, args);
            std::vector<std::string> bar;
            for (const json& entry : entries(tab.layout, "tab")) bar.push_back(entry["name"]);
            EXPECT_EQ(bar, want) << view;
            EXPECT_EQ(message(tab), "") << view;
            EXPECT_EQ(tab.run.err, "") << view;  // not a line on stderr either
            EXPECT_FALSE(entries(tab.layout, drawn.count(view) ? drawn.at(view) : view).empty()) << view;
        }
    }
}

}  // namespace round_two_tabs
