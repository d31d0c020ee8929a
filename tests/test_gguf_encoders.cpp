// GGUF files of the encoder architectures Headscope reads, opened by
// load_model and computed as stored, against the double-precision
// references on the values the file holds (gguf_models.h): BERT's maps
// (encoder_reference.h), T5's and Flan-T5's maps and next tokens
// (seq2seq_reference.h); each in F32 and with every type Headscope reads
// among its matrices, in turn (rotated_types). Part of test_gguf_models.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "encoder_reference.h"
#include "gguf_models.h"
#include "headscope/compute/backend.h"
#include "headscope/model/model.h"
#include "seq2seq_reference.h"

using namespace headscope;
using namespace headscope::test;
namespace fs = std::filesystem;

namespace {

// A row's matrices: all in `dtype`, or every type in turn (rotated_types(0)) where it is none.
struct Types {
    std::optional<DType> dtype;
    MatrixTypes matrices() const { return dtype ? MatrixTypes(*dtype) : rotated_types(0); }
    std::string name() const { return dtype ? to_string(*dtype) : "every_type"; }
};

// The model holds each tensor in the type it was written in; a rotated file every type read.
void expect_types_written(const Model& model, const MatrixTypes& matrices, const Types& types) {
    EXPECT_EQ(tensor_types_unlike(model, matrices), "");
    if (!types.dtype) {
        EXPECT_EQ(matrices.types().size(), std::size(dtype_names)) << "every type among its matrices";
    }
}

// The largest difference between one text's maps in a padded batch, their
// rows of `padded` keys read by `row` (layer, head, query), and the
// reference's `want` (L, NH, n, m) of the text alone: n queries, m keys.
template <typename Row>
double worst_map(const Row& row, int layers, int NH, int padded, const std::vector<double>& want, int n, int m) {
    double worst = 0;
    for (int l = 0; l < layers; ++l)
        for (int h = 0; h < NH; ++h)
            for (int i = 0; i < n; ++i)
                for (int j = 0; j < padded; ++j) {
                    const double expected = j < m ? want[((size_t(l) * NH + h) * n + i) * m + j] : 0;
                    worst = std::max(worst, std::abs(row(l, h, i)[j] - expected));
                }
    return worst;
}

class GgufBert : public ::testing::TestWithParam<Types> {};

// BERT as the converter writes it, without its masked-LM head: a bare
// encoder whose maps of a padded batch of pairs (token types 0 and 1) equal
// the reference's (encoder_reference.h) of each text alone. Every type in
// turn over 3 layers' matrices (19 of them).
TEST_P(GgufBert, MapsMatchTheReference) {
    TempDir dir;
    const fs::path file = dir.path / "bert.gguf";
    const EncoderSpec spec = GetParam().dtype ? gguf_bert_spec() : every_type_spec(gguf_bert_spec());
    const MatrixTypes matrices = GetParam().matrices();
    const EncoderCheckpoint checkpoint = write_gguf_bert(file, spec, matrices);
    const Model model = load_model(file.string());
    EXPECT_EQ(model.config.architecture, "bert");
    EXPECT_STREQ(model_kind(model.config), "encoder");
    EXPECT_FALSE(model.config.mlm_head) << "the converter leaves the masked-LM head out";
    EXPECT_EQ(model.config.type_vocab_size, spec.type_vocab_size);
    EXPECT_EQ(model.tokenizer.vocab_size(), spec.vocab_size) << "the file's own bert tokenizer";
    expect_types_written(model, matrices, GetParam());
    EXPECT_EQ(model.layers.at(0).q.dtype, matrices.written("blk.0.attn_q.weight"));
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    const std::vector<std::vector<int32_t>> types = {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}, {0, 0, 0, 0, 1, 1, 1}};
    AttentionOptions options;
    options.causal = false;
    AttentionResult got;
    backend->forward(Batch{gguf_texts, model.config.pad_id(), types}, options, got);
    for (int b = 0; b < got.B; ++b) {
        const EncoderReference want = encoder_reference(checkpoint, gguf_texts[b], types[b], options);
        const auto row = [&](int l, int h, int i) { return got.row(l, b, h, i); };
        EXPECT_LT(worst_map(row, spec.n_layer, want.NH, got.T, want.weights, want.T, want.T),
                  2e-5 * tiles_widen(matrices))
            << "text " << b;
    }
}

INSTANTIATE_TEST_SUITE_P(Gguf, GgufBert, ::testing::Values(Types{DType::F32}, Types{}),
                         [](const auto& info) { return info.param.name(); });

struct T5Param {
    std::string variant;  // t5 (ReLU, tied) or flan_t5 (gated GELU, untied, 3 decoder layers)
    int head_dim;         // 16: heads of 128 columns, not C
    Types types;
};

class GgufT5 : public ::testing::TestWithParam<T5Param> {};

// T5 and Flan-T5 as the converter writes them: of a padded batch, each
// text's encoder, decoder and cross-attention maps and its top-5 next tokens
// equal the reference's (seq2seq_reference.h) of the text alone. The maps
// within 2e-5, or 5e-5 for quantized matrices: their random blocks have
// heavier tails than the drawn floats, and T5 scales no score, so its maps
// are steeper and float32's rounding of the scores moves them further
// (3.3e-5 for Flan-T5 in Q4_K). Every type in turn over their matrices.
TEST_P(GgufT5, MapsAndPredictionsMatchTheReference) {
    const auto [variant, head_dim, types] = GetParam();
    TempDir dir;
    const fs::path file = dir.path / "t5.gguf";
    const Seq2SeqSpec spec = gguf_t5_spec(variant, head_dim);
    const MatrixTypes matrices = types.matrices();
    const Seq2SeqCheckpoint checkpoint = write_gguf_t5(file, spec, matrices);
    const Model model = load_model(file.string());
    EXPECT_STREQ(model_kind(model.config), "encoder-decoder");
    ASSERT_TRUE(model.encoder);
    EXPECT_EQ(model.encoder->config.n_layer, spec.encoder_layers);
    EXPECT_EQ(model.config.n_layer, spec.decoder_layers);
    EXPECT_EQ(model.config.tied_embeddings, spec.tied);
    EXPECT_EQ(model.config.mlp, spec.activation == "relu" ? Mlp::relu : Mlp::gated_gelu);
    EXPECT_EQ(model.config.decoder_start_token_id, spec.start_id);
    EXPECT_EQ(model.tokenizer.vocab_size(), spec.vocab_size) << "the file's own t5 tokenizer";
    expect_types_written(model, matrices, types);
    EXPECT_EQ(model.layers.at(0).cross_q.dtype, matrices.written("dec.blk.0.cross_attn_q.weight"));
    std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    Batch batch{{{spec.start_id, 12, 250, 40, 31, 8}, {spec.start_id, 90, 3, 86}}, model.config.pad_id()};
    batch.source_ids = {{7, 100, 258, 200, 45, 9, 129, 30, spec.eos_id}, {256, 5, 77, 134, spec.eos_id}};
    AttentionOptions options;
    options.scale = own_scale(model.config.scaled_scores);
    options.top_k = 5;
    AttentionResult got;
    backend->forward(batch, options, got);
    ASSERT_TRUE(got.encoder);
    const double tolerance = types.dtype == DType::F32 ? 2e-5 : 5e-5 * tiles_widen(matrices);
    for (int b = 0; b < got.B; ++b) {
        const Seq2SeqReference want = seq2seq_reference(checkpoint, batch.source_ids[b], batch.token_ids[b], options);
        const int S = want.S, T = want.T, NH = want.NH;
        const auto encoder = [&](int l, int h, int i) { return got.encoder->row(l, b, h, i); };
        const auto decoder = [&](int l, int h, int i) { return got.row(l, b, h, i); };
        const auto cross = [&](int l, int h, int i) { return got.cross_row(l, b, h, i); };
        EXPECT_LT(worst_map(encoder, spec.encoder_layers, NH, got.encoder->T, want.encoder, S, S), tolerance) << b;
        EXPECT_LT(worst_map(decoder, spec.decoder_layers, NH, got.T, want.decoder, T, T), tolerance) << b;
        EXPECT_LT(worst_map(cross, spec.decoder_layers, NH, got.S, want.cross, T, S), tolerance) << b;
        double p = 0;
        for (int t = 0; t < T; ++t) {
            const double* logits = want.logits.data() + size_t(t) * want.V;
            const double top = *std::max_element(logits, logits + want.V);
            double sum = 0;
            for (int v = 0; v < want.V; ++v) sum += std::exp(logits[v] - top);
            const Prediction* ranked = got.predictions_at(b, t);
            EXPECT_NEAR(logits[ranked[0].id], top, 1e-6) << "text " << b << " position " << t;
            for (int k = 0; k < 5; ++k)
                p = std::max(p, std::abs(ranked[k].p - std::exp(logits[ranked[k].id] - top) / sum));
        }
        EXPECT_LT(p, 1e-4) << "text " << b;
    }
}

INSTANTIATE_TEST_SUITE_P(Gguf, GgufT5,
                         ::testing::Values(T5Param{"t5", 16, {DType::F32}}, T5Param{"t5", 16, {}},
                                           T5Param{"flan_t5", 32, {DType::F32}}, T5Param{"flan_t5", 32, {}}),
                         [](const auto& info) { return info.param.variant + "_" + info.param.types.name(); });

}  // namespace
