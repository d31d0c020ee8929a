// The heads grid's cells against the reference's maps (window_reference_cells.h).
#include "window_reference_cells.h"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <string>

#include "family_models.h"
#include "family_reference.h"

namespace headscope::test {

using nlohmann::json;

bool hatched(const std::array<int, 3>& got) {
    return got[0] == got[1] && got[1] == got[2] && (std::abs(got[0] - 41) <= 1 || std::abs(got[0] - 77) <= 1);
}

void expect_reference_cells(const WindowShot& shot, const FamilyCheckpoint& checkpoint, const std::vector<int32_t>& ids,
                            int layer) {
    const FamilySpec& spec = checkpoint.spec;
    AttentionOptions options;
    options.sliding_window = spec.sliding_window;
    const FamilyReference want = family_reference(checkpoint, {ids}, options);
    const int T = static_cast<int>(ids.size()), NH = want.NH;
    const json cells = entries(shot.layout, "heads");
    ASSERT_EQ(cells.size(), static_cast<size_t>(NH * T * T));
    int hidden_by_window = 0;
    for (const json& cell : cells) {
        const int h = cell["head"], i = cell["query"], j = cell["key"];
        const bool outside = spec.windowed(layer) && j <= i - spec.sliding_window;
        const std::array<int, 3> got = centre(shot.image, cell);
        const std::string where = "head " + std::to_string(h) + " cell " + std::to_string(i) + "," + std::to_string(j) +
                                  " is " + std::to_string(got[0]) + "," + std::to_string(got[1]) + "," +
                                  std::to_string(got[2]);
        if (j > i || outside) {
            EXPECT_TRUE(hatched(got)) << where;
            hidden_by_window += j <= i;
        } else {
            EXPECT_TRUE(near(got, viridis(want.weights[((size_t(layer) * NH + h) * T + i) * T + j]))) << where;
        }
    }
    if (spec.windowed(layer)) {
        EXPECT_EQ(hidden_by_window, NH * (T - spec.sliding_window) * (T - spec.sliding_window + 1) / 2);
    }
    // Beside the layer slider: the shown layer's kind, where the model's layers differ.
    bool layers_differ = false;
    for (int l = 1; l < spec.n_layer; ++l) layers_differ |= spec.windowed(l) != spec.windowed(0);
    const json kind = entries(shot.layout, "layer-kind");
    EXPECT_EQ(kind.size(), layers_differ ? 1u : 0u);
    if (!kind.empty()) {
        EXPECT_EQ(kind[0]["local"], spec.windowed(layer));
    }
}

TempDir* RoundTwoWindows::dir_ = nullptr;
std::map<std::string, FamilyCheckpoint> RoundTwoWindows::checkpoints_;

void RoundTwoWindows::SetUpTestSuite() {
    dir_ = new TempDir;
    for (const char* name : {"gemma2", "gemma3_text", "phi3", "olmo2", "mixtral", "olmoe", "qwen3_moe", "gpt_oss"}) {
        checkpoints_[name] = make_family_checkpoint(family_variant(name, Vocabulary::test_cut));
        write_family_checkpoint(dir_->path / name, checkpoints_[name]);
    }
}

void RoundTwoWindows::TearDownTestSuite() {
    checkpoints_.clear();
    delete dir_;
}

WindowShot RoundTwoWindows::shoot(const std::string& name, const std::string& model, std::vector<std::string> args,
                                  nlohmann::json* exported) {
    args.insert(args.begin(), {"--model", (dir_->path / model).string()});
    const std::filesystem::path json_file = dir_->path / (name + "-export.json");
    if (exported) args.insert(args.end(), {"--export-json", json_file.string()});
    WindowShot shot = shoot_window(args, dir_->path, name);
    EXPECT_EQ(shot.run.status, 0) << shot.run.err;
    if (exported && shot.run.status == 0) *exported = nlohmann::json::parse(read_file(json_file.string()));
    return shot;
}

}  // namespace headscope::test
