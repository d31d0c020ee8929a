// The window on a GGUF file of each architecture Headscope reads: each
// decoder's (gguf_architecture_cases: the files test_cli_architectures runs
// the CLI on, every type Headscope reads among their matrices, and three of
// F32, F16 and BF16 alone), one screenshot a file of a text longer than
// Gemma's window of 4 keys: the shown token ids are llama.cpp's own
// tokenizer's on the file, each cell of the heads grid is the
// double-precision reference's map (family_reference.h, on the values the
// file holds) through viridis, hatched where the mask or the window hides
// the key, and the predictions panel's 5 most likely next tokens after the
// last token are the reference's, with its probabilities, and llama.cpp's
// on the same file and text (expect_llama_cpps_top_5). BERT's and T5's
// files of every type too: their ids llama.cpp's, each cell of BERT's
// bidirectional maps the reference's (encoder_reference.h); T5's three
// attentions (its last decoder layer's cross-attention, its first encoder
// and decoder layers' self-attention, one window each) and its predictions
// panel's top 5 the reference's (seq2seq_reference.h).
#include <gtest/gtest.h>

#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "encoder_reference.h"
#include "family_reference.h"
#include "gguf_models.h"
#include "gguf_vocabs.h"
#include "headscope/compute/text_batch.h"
#include "headscope/io/files.h"
#include "llama_cpp.h"
#include "prediction_checks.h"
#include "screenshot.h"
#include "seq2seq_reference.h"
#include "window_reference_cells.h"

using namespace headscope;
using namespace headscope::test;
using nlohmann::json;
namespace fs = std::filesystem;

namespace gguf_architectures {

// The predictions panel's first 5 bars (of the window's 10 most likely next
// tokens after the last of T tokens, which it shows before a row is hovered
// or clicked) as one position's predictions.
AttentionResult shown_top_5(const json& layout, int T) {
    AttentionResult shown;
    shown.B = 1, shown.T = 1, shown.top_k = 5;
    const json query = entries(layout, "prediction-query");
    EXPECT_EQ(query.size(), 1u);
    if (query.size() == 1) {
        EXPECT_EQ(query[0]["query"], T - 1);
    }
    const json bars = entries(layout, "prediction");
    EXPECT_GE(bars.size(), 5u);
    for (int k = 0; k < 5 && k < static_cast<int>(bars.size()); ++k) {
        EXPECT_EQ(bars[k]["rank"], k + 1);
        shown.predictions.push_back({bars[k]["id"].get<int32_t>(), bars[k]["p"].get<float>()});
    }
    return shown;
}

// The bars against the reference's softmax of the last position's logits,
// each probability within `tolerance` and the reference's token wherever its
// probability leads the next rank's by more (expect_top_5); then llama.cpp's
// 5 (`theirs`, when node can run) against the reference's logits and the
// bars, within `llama_cpps` (expect_llama_cpps_top_5).
void expect_reference_top_5(const json& layout, const FamilyCheckpoint& checkpoint, const std::vector<int32_t>& ids,
                            double tolerance, const std::optional<json>& theirs,
                            const ProbabilityTolerance& llama_cpps) {
    const FamilySpec& spec = checkpoint.spec;
    const int T = static_cast<int>(ids.size()), C = spec.n_embd;
    const AttentionResult shown = shown_top_5(layout, T);
    if (shown.predictions.size() != 5) return;
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

// The window on `file` with `args`; its JSON export's token ids.
std::vector<int32_t> shown_ids(const fs::path& file, std::vector<std::string> args, const fs::path& dir,
                               const std::string& name, WindowShot& shot) {
    const fs::path exported = dir / (name + "-export.json");
    args.insert(args.begin(), {"--model", file.string()});
    args.insert(args.end(), {"--export-json", exported.string()});
    shot = shoot_window(args, dir, name);
    EXPECT_EQ(shot.run.status, 0) << shot.run.err;
    if (shot.run.status != 0) return {};
    return json::parse(read_file(exported.string()))["token_ids"][0];
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
        const fs::path file = dir.path / c.file_name();
        const FamilySpec spec = c.spec();
        const MatrixTypes matrices = c.matrices();
        const FamilyCheckpoint checkpoint = write_gguf_family(file, spec, matrices);
        if (!c.dtype) {
            EXPECT_EQ(matrices.types().size(), std::size(dtype_names)) << "every type among its matrices";
        }
        const int layer = spec.windowed(0) ? 0 : spec.n_layer - 1;
        WindowShot shot;
        const std::vector<int32_t> ids =
            shown_ids(file, {"--text", text, "--layer", std::to_string(layer)}, dir.path, file.stem().string(), shot);
        if (ids.empty()) continue;
        if (const auto theirs = llama_cpp_token_ids(file, {text})) {
            EXPECT_EQ(ids, (*theirs)[0]);
        }
        expect_reference_cells(shot, checkpoint, ids, layer);
        const bool gelu = c.family == Family::gpt2 || c.family == Family::gpt_neox || gemma(c.family);
        expect_reference_top_5(shot.layout, checkpoint, ids, spec.n_experts ? 2e-3 : 1e-5 * tiles_widen(matrices),
                               ask_llama_cpp({{"next_tokens", file.string()}, {"texts", {ids}}}),
                               llama_cpp_tolerance(matrices, gelu));
    }
}

// Every cell of the heads grid in `shot` the reference's weight through
// viridis: `maps` (layers, NH, n, m) at layer `layer`; hatched where the key
// follows the query when `causal`, else none.
void expect_every_cell(const WindowShot& shot, const std::vector<double>& maps, int layer, int NH, int n, int m,
                       bool causal = false) {
    const json cells = entries(shot.layout, "heads");
    ASSERT_EQ(cells.size(), static_cast<size_t>(NH * n * m));
    for (const json& cell : cells) {
        const int h = cell["head"], i = cell["query"], j = cell["key"];
        const std::array<int, 3> got = centre(shot.image, cell);
        const bool hidden = causal && j > i;
        EXPECT_TRUE(hidden ? hatched(got) : near(got, viridis(maps[((size_t(layer) * NH + h) * n + i) * m + j])))
            << "head " << h << " cell " << i << "," << j << " is " << got[0] << "," << got[1] << "," << got[2];
    }
}

// BERT as the converter writes it (no masked-LM head), every type among its
// matrices: [CLS] and [SEP] around the text as llama.cpp puts them, and its
// last layer's bidirectional maps the reference's (within the pixels' 2 of
// 255: the maps' own 2e-5 is far below a colour step).
TEST(WindowGgufArchitectures, BertShowsLlamaCppsIdsAndTheReferencesMaps) {
    TempDir dir;
    const std::string text = "The cat sat on the mat.";
    const fs::path file = dir.path / "bert-every_type.gguf";
    const EncoderSpec spec = every_type_spec(gguf_bert_spec());
    const MatrixTypes matrices = rotated_types(0);
    const EncoderCheckpoint checkpoint = write_gguf_bert(file, spec, matrices);
    EXPECT_EQ(matrices.types().size(), std::size(dtype_names)) << "every type among its matrices";
    const int layer = spec.n_layer - 1;
    WindowShot shot;
    const std::vector<int32_t> ids =
        shown_ids(file, {"--text", text, "--layer", std::to_string(layer)}, dir.path, "bert", shot);
    if (ids.empty()) return;
    if (const auto theirs = llama_cpp_token_ids(file, {text})) {
        EXPECT_EQ(ids, (*theirs)[0]);
    }
    AttentionOptions options;
    options.causal = false;
    const EncoderReference want = encoder_reference(checkpoint, ids, {}, options);
    expect_every_cell(shot, want.weights, layer, want.NH, want.T, want.T);
}

// T5 as the converter writes it, every type among its matrices: the source
// with </s> after it as llama.cpp tokenizes it, the target after the start
// token without its </s>, the window's ids those of text_batch (the one path
// from texts to a forward, the CLI's too); its last decoder layer's
// cross-attention (the target's tokens down, the source's across), its
// predictions panel's top 5 after the last target token (within the CLI
// test's 5e-5), and in one more window each its first encoder layer's
// self-attention and its first decoder layer's, hatched above the diagonal,
// the reference's. llama.cpp's next tokens are not compared: node-llama-cpp
// 3.21.1 never runs T5's encoder (llama_encode), so it has none.
TEST(WindowGgufArchitectures, T5ShowsLlamaCppsIdsAndTheReferencesAttentionsAndTopFive) {
    TempDir dir;
    const std::string source = "The cat sat on the mat.", target = "Die Katze";
    const fs::path file = dir.path / "t5-every_type.gguf";
    const Seq2SeqSpec spec = gguf_t5_spec("t5", 16);
    const MatrixTypes matrices = rotated_types(0);
    const Seq2SeqCheckpoint checkpoint = write_gguf_t5(file, spec, matrices);
    EXPECT_EQ(matrices.types().size(), std::size(dtype_names)) << "every type among its matrices";
    const int layer = spec.decoder_layers - 1;
    const std::vector<std::string> texts = {"--text", source, "--target", target};
    auto args = [&](const std::string& kind, int at) {
        std::vector<std::string> all = texts;
        all.insert(all.end(), {"--attention", kind, "--layer", std::to_string(at)});
        return all;
    };
    WindowShot shot;
    const std::vector<int32_t> ids = shown_ids(file, args("cross", layer), dir.path, "t5", shot);
    if (ids.empty()) return;
    const Batch batch = text_batch(load_model(file.string()), {{source}, {}, {target}}).batch;
    EXPECT_EQ(ids, batch.token_ids.at(0));
    const std::vector<int32_t>& src = batch.source_ids.at(0);
    if (const auto theirs = llama_cpp_token_ids(file, {source, target})) {
        EXPECT_EQ(src, (*theirs)[0]);
        std::vector<int32_t> decoder = {spec.start_id};
        decoder.insert(decoder.end(), (*theirs)[1].begin(), (*theirs)[1].end() - 1);
        EXPECT_EQ(ids, decoder);
    }
    AttentionOptions options;
    options.scale = Scale::none;
    const Seq2SeqReference want = seq2seq_reference(checkpoint, src, ids, options);
    expect_every_cell(shot, want.cross, layer, want.NH, want.T, want.S);
    const std::vector<double> last(want.logits.end() - want.V, want.logits.end());  // (V): after the last token
    expect_top_5(shown_top_5(shot.layout, want.T), {{ids.back()}}, last, want.V, 5e-5 * tiles_widen(matrices));
    for (const auto& [kind, maps, n, causal] :
         {std::tuple{"encoder", &want.encoder, want.S, false}, std::tuple{"decoder", &want.decoder, want.T, true}}) {
        SCOPED_TRACE(kind);
        const std::vector<int32_t> again = shown_ids(file, args(kind, 0), dir.path, std::string("t5-") + kind, shot);
        EXPECT_EQ(again, ids);
        expect_every_cell(shot, *maps, 0, want.NH, n, n, causal);
    }
}

}  // namespace gguf_architectures
