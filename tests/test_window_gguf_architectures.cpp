// The window on a GGUF file of each decoder architecture Headscope reads
// (gguf_architecture_cases: the files test_cli_architectures runs the CLI
// on, each in a quantized type of its own), one screenshot a file of a text
// longer than Gemma's window of 4 keys: the shown token ids are llama.cpp's
// own tokenizer's on the file, each cell of the heads grid is the
// double-precision reference's map (family_reference.h, on the values the
// file holds) through viridis, hatched where the mask or the window hides
// the key, and the predictions panel's 5 most likely next tokens after the
// last token are the reference's, with its probabilities, and llama.cpp's
// on the same file and text (expect_llama_cpps_top_5).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "family_reference.h"
#include "gguf_models.h"
#include "gguf_vocabs.h"
#include "headscope/io/files.h"
#include "llama_cpp.h"
#include "prediction_checks.h"
#include "screenshot.h"
#include "window_reference_cells.h"

using namespace headscope;
using namespace headscope::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace gguf_architectures {

// The predictions panel's bars (the window's 10 most likely next tokens
// after the last token, which it shows before a row is hovered or clicked):
// the first 5 against the reference's softmax of that position's logits,
// each probability within `tolerance` and the reference's token wherever
// its probability leads the next rank's by more (expect_top_5); then
// llama.cpp's 5 (`theirs`, when node can run) against the reference's logits
// and the bars, within `llama_cpps` (expect_llama_cpps_top_5).
void expect_reference_top_5(const json& layout, const FamilyCheckpoint& checkpoint, const std::vector<int32_t>& ids,
                            double tolerance, const std::optional<json>& theirs,
                            const ProbabilityTolerance& llama_cpps) {
    const FamilySpec& spec = checkpoint.spec;
    const int T = static_cast<int>(ids.size()), C = spec.n_embd;
    const json query = entries(layout, "prediction-query");
    ASSERT_EQ(query.size(), 1u);
    EXPECT_EQ(query[0]["query"], T - 1);
    const json bars = entries(layout, "prediction");
    ASSERT_GE(bars.size(), 5u);
    AttentionResult shown;  // the bars as one position's predictions
    shown.B = 1, shown.T = 1, shown.top_k = 5;
    for (int k = 0; k < 5; ++k) {
        EXPECT_EQ(bars[k]["rank"], k + 1);
        shown.predictions.push_back({bars[k]["id"].get<int32_t>(), bars[k]["p"].get<float>()});
    }
    AttentionOptions options;
    options.sliding_window = spec.sliding_window;
    const FamilyReference want = family_reference(checkpoint, {ids}, options);
    const std::vector<double> rows = real_rows(want.residual, spec.n_layer - 1, {ids}, T, C);  // (T, C)
    const std::vector<double> logits = family_logits(checkpoint, std::vector<double>(rows.end() - C, rows.end()));
    expect_top_5(shown, {{ids.back()}}, logits, spec.vocab_size, tolerance);
    if (theirs) {
        expect_llama_cpps_top_5(logits.data(), spec.vocab_size, shown.predictions.data(), (*theirs)[0], llama_cpps,
                                "the window's bars");
    }
}

// Each file in the window at its first windowed layer (Gemma's, gpt-oss's,
// Mixtral's: the window's hatch), else its last; the tolerance of
// test_cli_architectures' (a mixture of experts' quantized products 2e-3,
// a dense model's float32's, wider on AMX-BF16 tiles).
TEST(WindowGgufArchitectures, EveryArchitectureShowsLlamaCppsIdsAndTheReferencesMapsAndTopFive) {
    TempDir dir;
    const std::string text = "It was soft.";
    for (const GgufCase& c : gguf_architecture_cases()) {
        SCOPED_TRACE(c.file_name());
        const fs::path file = dir.path / c.file_name(), exported = dir.path / "shown.json";
        const FamilySpec spec = gguf_family_spec(c.family);
        const MatrixTypes matrices(c.dtype);
        const FamilyCheckpoint checkpoint = write_gguf_family(file, spec, matrices);
        const int layer = spec.windowed(0) ? 0 : spec.n_layer - 1;
        const WindowShot shot = shoot_window({"--model", file.string(), "--text", text, "--layer",
                                              std::to_string(layer), "--export-json", exported.string()},
                                             dir.path, model_type(c.family));
        EXPECT_EQ(shot.run.status, 0) << shot.run.err;
        if (shot.run.status != 0) continue;
        const std::vector<int32_t> ids = json::parse(read_file(exported.string()))["token_ids"][0];
        if (const auto theirs = llama_cpp_token_ids(file, {text})) {
            EXPECT_EQ(ids, (*theirs)[0]);
        }
        expect_reference_cells(shot, checkpoint, ids, layer);
        const bool gelu = c.family == Family::gpt2 || c.family == Family::gpt_neox || gemma(c.family);
        expect_reference_top_5(shot.layout, checkpoint, ids, spec.n_experts ? 2e-3 : 1e-5 * tiles_widen(c.dtype),
                               ask_llama_cpp({{"next_tokens", file.string()}, {"texts", {ids}}}),
                               llama_cpp_tolerance(matrices, gelu));
    }
}

}  // namespace gguf_architectures
