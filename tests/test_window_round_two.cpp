// The window on the round-two families and on a GGUF file of llama.cpp's
// Q4_K_M mix, as a user sees it under Xvfb: the mask tab draws Gemma 3's
// local layer's window and no window on its global layer
// (test_window_round_two_tabs checks every tab of every round-two family
// against the reference); the model bar says
// "Q4_K_M, N bits per weight" from the file's own tensors, and its effects
// grid is the reference's loss change of each head knocked out.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "family_models.h"
#include "family_reference.h"
#include "gguf_models.h"
#include "headscope/io/files.h"
#include "prediction_checks.h"
#include "screenshot.h"
#include "window_reference_cells.h"

using namespace headscope;
using namespace headscope::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace round_two {

class WindowRoundTwo : public RoundTwoWindows {};

// Gemma 3's mask tab draws the window as the third mask on a local layer
// (4: key j > i - 4) and none on the global one (5): each window and
// combined cell in the mask view's colours (mask_view.h) by those rules.
TEST_F(WindowRoundTwo, Gemma3MaskTabDrawsTheWindowOfLocalLayersOnly) {
    constexpr std::array<double, 3> allowed_rgb = {236, 190, 72}, blocked_rgb = {52, 58, 70};
    for (const int layer : {4, 5}) {
        SCOPED_TRACE("layer " + std::to_string(layer));
        const WindowShot shot = shoot("gemma3-mask-" + std::to_string(layer), "gemma3_text",
                                      {"--text", text_, "--view", "mask", "--layer", std::to_string(layer)});
        const bool local = checkpoints_.at("gemma3_text").spec.windowed(layer);
        EXPECT_EQ(local, layer == 4);
        int window_cells = 0, blocked = 0;
        for (const json& cell : entries(shot.layout, "mask")) {
            const std::string mask = cell["mask"];
            if (mask != "window" && mask != "combined") continue;
            const int i = cell["query"], j = cell["key"];
            const bool in_window = !local || j > i - 4;
            const bool allowed = mask == "window" ? in_window : j <= i && in_window;
            const std::array<int, 3> got = centre(shot.image, cell);
            EXPECT_TRUE(test::near(got, allowed ? allowed_rgb : blocked_rgb, 2))
                << mask << " " << i << "," << j << " is " << got[0] << "," << got[1] << "," << got[2];
            window_cells += mask == "window";
            blocked += mask == "window" && !allowed;
        }
        EXPECT_GT(window_cells, 16);  // the text's tokens are more than the window's 4
        EXPECT_EQ(blocked > 0, local);
    }
}

}  // namespace round_two

namespace round_two {

// A llama GGUF file of llama.cpp's Q4_K_M mix (general.file_type 15), its
// matrices in the types llama.cpp's quantizer gives them (llama_cpp_mix:
// Q4_K, but Q6_K for the output and layer 1's attn_v and ffn_down); the
// checkpoint of the values it holds and its bits per weight from its
// tensors' bytes and shapes.
struct Q4KM {
    FamilyCheckpoint checkpoint;
    double bits_per_weight = 0;
};
Q4KM write_q4_k_m(const fs::path& file) {
    const FamilySpec spec = gguf_family_spec(Family::llama);
    double bits = 0, weights = 0;
    FamilyCheckpoint checkpoint = write_gguf_family(file, spec, llama_cpp_mix(15, spec), [&](GgufSpec& gguf) {
        for (const GgufTensorSpec& t : gguf.tensors) {
            double n = 1;
            for (uint64_t d : t.ne) n *= double(d);
            bits += 8.0 * double(t.data.size()), weights += n;
        }
    });
    return {std::move(checkpoint), bits / weights};
}

// The Q4_K_M file opened in the effects tab with the grid computed: the
// model bar begins with its file type and its bits per weight, and each
// head's cell is the reference's change in the text's loss when that head's
// output is zeroed (every cell exact: the backward does not follow quantized
// weights).
TEST_F(WindowRoundTwo, Q4KMixSaysItsBitsAndItsEffectsGridIsTheReferences) {
    const Q4KM mix = write_q4_k_m(dir_->path / "llama-Q4_K_M.gguf");
    json exported;
    const WindowShot shot = shoot("gguf-q4km-effects", "llama-Q4_K_M.gguf",
                                  {"--text", "It was soft.", "--view", "effects", "--compute-effects"}, &exported);
    char bits[64];
    std::snprintf(bits, sizeof bits, "Q4_K_M, %.1f bits per weight", mix.bits_per_weight);
    EXPECT_GT(mix.bits_per_weight, 4.6);  // more than Q4_K's 4.5: a mix
    std::string sizes;
    for (const json& control : entries(shot.layout, "control"))
        if (control["name"] == "model sizes") sizes = control["text"];
    EXPECT_EQ(sizes.rfind(bits, 0), 0u) << sizes;
    if (exported.is_null()) return;

    const std::vector<int32_t> ids = exported["token_ids"][0];
    const FamilySpec& spec = mix.checkpoint.spec;
    const int T = static_cast<int>(ids.size()), V = spec.vocab_size, L = spec.n_layer, NH = spec.n_head;
    const auto loss = [&](int layer, int head) {
        FamilyHooks hooks;
        hooks.head_output = [&](int l, int, int h, std::vector<std::vector<double>>& y) {
            if (l == layer && h == head)
                for (auto& row : y) std::fill(row.begin(), row.end(), 0.0);
        };
        const FamilyReference r = family_reference(mix.checkpoint, {ids}, AttentionOptions{}, hooks);
        const std::vector<double> logits =
            family_logits(mix.checkpoint, real_rows(r.residual, L - 1, {ids}, T, spec.n_embd));
        return loss_and_p(logits, V, ids, std::vector<Prediction>(size_t(T), Prediction{0, 0})).first;
    };
    const double intact = loss(-1, -1);
    const json grid = entries(shot.layout, "effects-grid");
    ASSERT_EQ(grid.size(), static_cast<size_t>(L * NH));
    for (const json& cell : grid) {
        const int l = cell["layer"], h = cell["column"];
        EXPECT_NEAR(cell["values"][l * NH + h].get<double>(), loss(l, h) - intact, 1e-5) << "head " << l << "." << h;
    }
}

}  // namespace round_two
