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

int expect_map_cells(const Image& image, const json& cells, const FamilySpec& spec, const FamilyReference& want,
                     int T) {
    const int NH = want.NH;
    int hidden_by_window = 0;
    for (const json& cell : cells) {
        const int l = cell["layer"], h = cell["head"], i = cell["query"], j = cell["key"];
        const bool outside = spec.windowed(l) && j <= i - spec.sliding_window;
        const std::array<int, 3> got = centre(image, cell);
        const auto where = [&] {  // written only for a failure: a few thousand cells pass
            return "layer " + std::to_string(l) + " head " + std::to_string(h) + " cell " + std::to_string(i) + "," +
                   std::to_string(j) + " is " + std::to_string(got[0]) + "," + std::to_string(got[1]) + "," +
                   std::to_string(got[2]);
        };
        if (j > i || outside) {
            EXPECT_TRUE(hatched(got)) << where();
            hidden_by_window += j <= i;
        } else {
            EXPECT_TRUE(near(got, viridis(want.weights[((size_t(l) * NH + h) * T + i) * T + j]))) << where();
        }
    }
    return hidden_by_window;
}

void expect_reference_cells(const WindowShot& shot, const FamilyCheckpoint& checkpoint, const std::vector<int32_t>& ids,
                            int layer) {
    AttentionOptions options;
    options.sliding_window = checkpoint.spec.sliding_window;
    expect_reference_cells(shot, checkpoint.spec, family_reference(checkpoint, {ids}, options),
                           static_cast<int>(ids.size()), layer);
}

void expect_reference_cells(const WindowShot& shot, const FamilySpec& spec, const FamilyReference& want, int T,
                            int layer) {
    const int NH = want.NH;
    const json cells = entries(shot.layout, "heads");
    ASSERT_EQ(cells.size(), static_cast<size_t>(NH * T * T));
    for (const json& cell : cells) ASSERT_EQ(cell["layer"], layer);
    const int hidden_by_window = expect_map_cells(shot.image, cells, spec, want, T);
    if (spec.windowed(layer)) {
        EXPECT_EQ(hidden_by_window, NH * (T - spec.sliding_window) * (T - spec.sliding_window + 1) / 2);
    }
    // Beside the layer slider: the shown layer's kind, where the model's layers differ.
    const json kind = entries(shot.layout, "layer-kind");
    EXPECT_EQ(kind.size(), layers_differ(spec) ? 1u : 0u);
    if (!kind.empty()) {
        EXPECT_EQ(kind[0]["local"], spec.windowed(layer));
    }
}

bool layers_differ(const FamilySpec& spec) {
    for (int l = 1; l < spec.n_layer; ++l)
        if (spec.windowed(l) != spec.windowed(0)) return true;
    return false;
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
