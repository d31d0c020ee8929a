// The encoder–decoder families (T5, Flan-T5, BART, Marian) against their
// double-precision reference (seq2seq_reference.h) on random-weight
// checkpoints in Hugging Face's names: of a padded batch, each text's
// encoder self-attention, decoder self-attention, cross-attention and next
// token equal the reference's of the text alone (with another scale and the
// decoder's causal mask off too); the per-head loop agrees with the batched
// heads; a cached target grown by a token equals its whole forward; the
// encoder runs once per source; BART's vocab.json and merges.txt alone
// tokenize as BartTokenizer; and what they cannot do is refused in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/cpu_forward.h"
#include "headscope/inspect/dance.h"
#include "headscope/model/model.h"
#include "sentencepiece_models.h"
#include "seq2seq_models.h"
#include "seq2seq_reference.h"
#include "tokenizer_tests.h"

using namespace headscope;
using namespace headscope::test;

namespace {

// Two sources (9 and 5 tokens) and two targets (6 and 4), the second of each padded.
struct Texts {
    std::vector<std::vector<int32_t>> sources, targets;
};
Texts texts(const Seq2SeqSpec& s) {
    const int V = s.vocab_size;
    return {{{7, 100, V - 1, 2000, 45, 9, V / 2, 300, s.eos_id}, {V - 3, 5, 77, 1234, s.eos_id}},
            {{s.start_id, 12, V - 7, 400, 31, 8}, {s.start_id, 900, 3, V / 3}}};
}

double softmax_p(const std::vector<double>& logits, size_t row, int V, int id) {
    const double* l = logits.data() + row * V;
    const double max = *std::max_element(l, l + V);
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(l[v] - max);
    return std::exp(l[id] - max) / sum;
}

class EachEncoderDecoder : public ::testing::TestWithParam<Seq2SeqVariant> {
protected:
    void SetUp() override {
        checkpoint_ = make_seq2seq_checkpoint(GetParam().spec);
        write_seq2seq_checkpoint(dir_.path, checkpoint_);
        model_ = load_model(dir_.path.string());
        backend_->load_weights(model_);
    }

    Batch batch() const {
        const Texts t = texts(GetParam().spec);
        Batch b{t.targets, model_.config.pad_id()};
        b.source_ids = t.sources;
        return b;
    }

    // Every map and the top tokens of the padded batch against each text's reference alone.
    void expect_match(const AttentionOptions& options, const AttentionResult& got) {
        const Batch in = batch();
        ASSERT_TRUE(got.encoder);
        const AttentionResult& enc = *got.encoder;
        for (int b = 0; b < in.B(); ++b) {
            const Seq2SeqReference want = seq2seq_reference(checkpoint_, in.source_ids[b], in.token_ids[b], options);
            const int S = want.S, T = want.T, NH = want.NH;
            ASSERT_EQ(got.NH, NH);
            double worst_encoder = 0, worst_decoder = 0, worst_cross = 0, worst_p = 0;
            for (int l = 0; l < model_.encoder->config.n_layer; ++l)
                for (int h = 0; h < NH; ++h)
                    for (int i = 0; i < S; ++i)
                        for (int j = 0; j < enc.T; ++j) {
                            const double expected = j < S ? want.encoder[((size_t(l) * NH + h) * S + i) * S + j] : 0;
                            worst_encoder = std::max(worst_encoder, std::abs(enc.row(l, b, h, i)[j] - expected));
                        }
            for (int l = 0; l < model_.config.n_layer; ++l)
                for (int h = 0; h < NH; ++h)
                    for (int i = 0; i < T; ++i) {
                        for (int j = 0; j < got.T; ++j) {
                            const double expected = j < T ? want.decoder[((size_t(l) * NH + h) * T + i) * T + j] : 0;
                            worst_decoder = std::max(worst_decoder, std::abs(got.row(l, b, h, i)[j] - expected));
                        }
                        for (int j = 0; j < got.S; ++j) {
                            const double expected = j < S ? want.cross[((size_t(l) * NH + h) * T + i) * S + j] : 0;
                            worst_cross = std::max(worst_cross, std::abs(got.cross_row(l, b, h, i)[j] - expected));
                        }
                    }
            for (int t = 0; t < T && got.top_k; ++t) {
                const Prediction* top = got.predictions_at(b, t);
                const double* logits = want.logits.data() + size_t(t) * want.V;
                EXPECT_NEAR(logits[top[0].id], *std::max_element(logits, logits + want.V), 1e-6)
                    << "text " << b << " position " << t << ": the top token is not the reference's argmax";
                for (int k = 0; k < got.top_k; ++k)
                    worst_p = std::max(worst_p, std::abs(top[k].p - softmax_p(want.logits, t, want.V, top[k].id)));
            }
            EXPECT_LT(worst_encoder, 2e-5) << "text " << b;
            EXPECT_LT(worst_decoder, 2e-5) << "text " << b;
            EXPECT_LT(worst_cross, 2e-5) << "text " << b;
            EXPECT_LT(worst_p, 1e-4) << "text " << b;
        }
    }

    AttentionOptions own_options() const {
        AttentionOptions options;
        options.scale = own_scale(model_.config.scaled_scores);
        options.top_k = 5;
        return options;
    }

    TempDir dir_;
    Seq2SeqCheckpoint checkpoint_;
    Model model_;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
};

TEST_P(EachEncoderDecoder, LoadsBothStacks) {
    const Seq2SeqSpec& s = GetParam().spec;
    EXPECT_STREQ(model_kind(model_.config), "encoder-decoder");
    ASSERT_TRUE(model_.encoder);
    EXPECT_EQ(model_.encoder->config.n_layer, s.encoder_layers);
    EXPECT_EQ(model_.config.n_layer, s.decoder_layers);
    EXPECT_FALSE(model_.encoder->config.causal);
    EXPECT_TRUE(model_.config.causal);
    EXPECT_EQ(model_.config.decoder_start_token_id, s.start_id);
    EXPECT_EQ(model_.config.scaled_scores, s.family != Seq2Seq::t5);
}

TEST_P(EachEncoderDecoder, EveryAttentionAndPredictionEqualsTheReference) {
    const AttentionOptions options = own_options();
    AttentionResult got;
    backend_->forward(batch(), options, got);
    expect_match(options, got);
}

// Maps only: the forward stops at the last returned layer, after its cross-attention.
TEST_P(EachEncoderDecoder, TheMapsOfOneLayerWithoutPredictionsEqualTheReference) {
    AttentionOptions options = own_options();
    options.top_k = 0;
    options.layers = {model_.config.n_layer - 1};
    AttentionResult got;
    backend_->forward(batch(), options, got);
    const Batch in = batch();
    const int slot = 0, l = model_.config.n_layer - 1;
    for (int b = 0; b < in.B(); ++b) {
        const Seq2SeqReference want = seq2seq_reference(checkpoint_, in.source_ids[b], in.token_ids[b], options);
        double worst = 0;
        for (int h = 0; h < want.NH; ++h)
            for (int i = 0; i < want.T; ++i)
                for (int j = 0; j < want.S; ++j)
                    worst =
                        std::max(worst, std::abs(got.cross_row(slot, b, h, i)[j] -
                                                 want.cross[((size_t(l) * want.NH + h) * want.T + i) * want.S + j]));
        EXPECT_LT(worst, 2e-5) << "text " << b;
    }
}

TEST_P(EachEncoderDecoder, AnotherScaleAndTheCausalMaskOffEqualTheReference) {
    AttentionOptions options = own_options();
    options.scale = Scale::model;
    options.causal = false;
    AttentionResult got;
    backend_->forward(batch(), options, got);
    expect_match(options, got);
}

TEST_P(EachEncoderDecoder, ThePerHeadLoopAgreesWithTheBatchedHeads) {
    const AttentionOptions options = own_options();
    AttentionResult batched, looped;
    CpuForward forward;
    forward.run(model_, batch(), options, batched, CpuForward::Heads::batched);
    forward.run(model_, batch(), options, looped, CpuForward::Heads::loop);
    ASSERT_NE(batched.encoder, looped.encoder) << "the loop's encoder must run by the loop too";
    ASSERT_EQ(batched.encoder->weights.size(), looped.encoder->weights.size());
    for (size_t i = 0; i < batched.encoder->weights.size(); ++i)
        ASSERT_NEAR(batched.encoder->weights[i], looped.encoder->weights[i], 1e-5);
    ASSERT_EQ(batched.cross_weights.size(), looped.cross_weights.size());
    for (size_t i = 0; i < batched.cross_weights.size(); ++i)
        ASSERT_NEAR(batched.cross_weights[i], looped.cross_weights[i], 1e-5);
    for (size_t i = 0; i < batched.weights.size(); ++i) ASSERT_NEAR(batched.weights[i], looped.weights[i], 1e-5);
}

// Typing or generating a target token: the cache supplies the earlier rows, the
// encoder is not run again, and every map and prediction equals the whole forward's.
TEST_P(EachEncoderDecoder, ACachedTargetGrownByATokenEqualsItsWholeForward) {
    const AttentionOptions options = own_options();
    Batch short_batch = batch(), long_batch = batch();
    short_batch.token_ids = {long_batch.token_ids[0]}, short_batch.source_ids = {long_batch.source_ids[0]};
    long_batch.token_ids = {short_batch.token_ids[0]}, long_batch.source_ids = short_batch.source_ids;
    long_batch.token_ids[0].push_back(42);
    PrefixCache cache;
    AttentionResult first, grown, whole;
    backend_->forward(short_batch, options, first, &cache);
    const AttentionResult* encoded = first.encoder.get();
    backend_->forward(long_batch, options, grown, &cache);
    EXPECT_EQ(grown.reused[0], static_cast<int>(short_batch.token_ids[0].size()));
    EXPECT_EQ(grown.encoder.get(), encoded) << "the same source was encoded again";
    const std::unique_ptr<Backend> fresh = make_cpu_backend();  // nothing cached
    fresh->load_weights(model_);
    fresh->forward(long_batch, options, whole);
    for (size_t i = 0; i < whole.weights.size(); ++i) ASSERT_NEAR(grown.weights[i], whole.weights[i], 1e-6);
    for (size_t i = 0; i < whole.cross_weights.size(); ++i)
        ASSERT_NEAR(grown.cross_weights[i], whole.cross_weights[i], 1e-6);
    for (size_t i = 0; i < whole.predictions.size(); ++i) {
        EXPECT_EQ(grown.predictions[i].id, whole.predictions[i].id);
        EXPECT_NEAR(grown.predictions[i].p, whole.predictions[i].p, 1e-6);
    }
    Batch other_source = long_batch;
    other_source.source_ids[0].back() = 5;
    AttentionResult changed;
    backend_->forward(other_source, options, changed, &cache);
    EXPECT_NE(changed.encoder.get(), encoded);
    EXPECT_EQ(changed.reused[0], 0) << "a new source reuses no target rows";
}

TEST_P(EachEncoderDecoder, WhatItCannotDoIsRefusedInOneLine) {
    const auto expect_refused = [&](const Batch& in, const AttentionOptions& options, const std::string& words) {
        AttentionResult result;
        try {
            backend_->forward(in, options, result);
            ADD_FAILURE() << "not refused: " << words;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
            EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
        }
    };
    Batch no_sources = batch();
    no_sources.source_ids.clear();
    expect_refused(no_sources, own_options(), "one source per target");
    Batch empty_source = batch();
    empty_source.source_ids[1].clear();
    expect_refused(empty_source, own_options(), "source 2 is empty");
    AttentionOptions contributions = own_options();
    contributions.contributions = true;
    expect_refused(batch(), contributions, "encoder–decoder");
    if (GetParam().spec.family == Seq2Seq::t5) {
        AttentionOptions resplit = own_options();
        resplit.n_head = 2;
        expect_refused(batch(), resplit, "position bias");
    }
}

// Q from the decoder's T tokens, K (and V) from the encoder's S, each split
// by view then transpose; the weights (B, NH, T, T_src); every float owned by
// the token and head it belongs to.
TEST_P(EachEncoderDecoder, TheCrossAttentionDanceWalksTheTargetsQueriesOverTheSourcesKeys) {
    using Dims = std::vector<int64_t>;
    const int64_t B = 2, T = 4, S = 9, NH = model_.config.n_head, hs = model_.config.head_size(), W = NH * hs;
    const Dance d = cross_attention_dance(B, T, S, model_.config, 0);
    ASSERT_EQ(d.steps.size(), 11u);
    const std::vector<Dims> shapes = {{B, T, W},      {B, T, NH, hs}, {B, NH, T, hs}, {B, S, W},
                                      {B, S, NH, hs}, {B, NH, S, hs}, {B, NH, T, S},  {B, NH, T, hs},
                                      {B, T, NH, hs}, {B, T, NH, hs}, {B, T, W}};
    for (size_t i = 0; i < shapes.size(); ++i) EXPECT_EQ(d.steps[i].layout.shape, shapes[i]) << "step " << i + 1;
    EXPECT_EQ(d.steps[5].layout.strides, (Dims{S * W, hs, W, 1})) << "K's transpose only swaps strides";
    EXPECT_EQ(d.steps[3].buffer, d.steps[5].buffer);
    EXPECT_TRUE(d.buffers[d.steps[3].buffer].kv);
    const DanceStep& weights = d.steps[6];  // (B, NH, T, T_src): each float is its target query's
    for (int64_t i = 0; i < T; ++i)
        for (int64_t j = 0; j < S; ++j) {
            const ElementOwner o = d.owner(weights.buffer, weights.layout.storage_index(Dims{1, NH - 1, i, j}));
            EXPECT_EQ(o.t, i) << "the query, not source key " << j;
            EXPECT_EQ(o.head, NH - 1);
        }
    const DanceStep& keys = d.steps[5];
    for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < NH; ++h)
            for (int64_t t = 0; t < S; ++t) {
                const ElementOwner o = d.owner(keys.buffer, keys.layout.storage_index(Dims{b, h, t, hs - 1}));
                EXPECT_EQ(o.b, b);
                EXPECT_EQ(o.t, t) << "a source token";
                EXPECT_EQ(o.head, h);
            }
    // With the layer's weights: Q's step names the cross-attention's query
    // weight, K's its key and value weights, the last its output's, each
    // (out, in) as the family's modules have them.
    const Dance weighed = cross_attention_dance(B, T, S, model_.config, 0, &model_.layers.at(0));
    const std::vector<std::vector<Weight>> named = {
        {Weight::cross_q_w},   {}, {}, {Weight::cross_k_w, Weight::cross_v_w}, {}, {}, {}, {}, {}, {},
        {Weight::cross_proj_w}};
    for (size_t i = 0; i < named.size(); ++i) {
        ASSERT_EQ(weighed.steps[i].weights.size(), named[i].size()) << "step " << i + 1;
        for (size_t w = 0; w < named[i].size(); ++w) {
            const bool output = named[i][w] == Weight::cross_proj_w;
            const std::string shape = std::to_string(output ? model_.config.n_embd : W) + " outputs by " +
                                      std::to_string(output ? W : model_.config.n_embd) + " inputs, stored as ";
            EXPECT_EQ(
                weighed.steps[i].weights[w].rfind(module_name(model_.config, named[i][w]) + "'s weight, " + shape, 0),
                0u)
                << weighed.steps[i].weights[w];
        }
    }
    EXPECT_THROW(cross_attention_dance(B, T, S, encoder_config(model_.config), 0), Error);
}

// Each family's config.json with one key broken: one line naming it.
TEST(EncoderDecoderConfigs, BadKeysAreOneLineNamingThem) {
    const auto refusal = [](const Seq2SeqSpec& spec, const nlohmann::json& changes) {
        nlohmann::json config = make_seq2seq_checkpoint(spec).config;
        config.update(changes);
        try {
            config_from_json(config, "config.json");
        } catch (const Error& e) {
            EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos);
            return std::string(e.what());
        }
        return std::string("accepted");
    };
    const Seq2SeqSpec t5 = seq2seq_variant("t5"), bart = seq2seq_variant("bart"), marian = seq2seq_variant("marian");
    EXPECT_NE(refusal(t5, {{"feed_forward_proj", "gated-silu"}}).find("feed_forward_proj 'gated-silu'"),
              std::string::npos);
    EXPECT_NE(refusal(t5, {{"relative_attention_num_buckets", 2}}).find("at least 4"), std::string::npos);
    EXPECT_NE(refusal(t5, {{"d_kv", 0}}).find("d_kv"), std::string::npos);
    // A maximum distance at or below the exact buckets' (half the count) would divide by log(1) or go negative.
    for (int max_distance : {1, 8, 16})
        EXPECT_NE(
            refusal(t5, {{"relative_attention_num_buckets", 32}, {"relative_attention_max_distance", max_distance}})
                .find("relative_attention_max_distance " + std::to_string(max_distance) +
                      " must be more than half of relative_attention_num_buckets 32"),
            std::string::npos);
    EXPECT_EQ(refusal(t5, {{"relative_attention_num_buckets", 32}, {"relative_attention_max_distance", 17}}),
              "accepted");
    EXPECT_NE(refusal(bart, {{"encoder_attention_heads", 2}}).find("differ from the decoder's"), std::string::npos);
    EXPECT_NE(refusal(bart, {{"decoder_layers", nullptr}}).find("decoder_layers"), std::string::npos);
    EXPECT_NE(refusal(bart, {{"activation_function", "tanh"}}).find("activation_function 'tanh'"), std::string::npos);
    EXPECT_NE(
        refusal(marian, {{"d_model", 33}, {"encoder_attention_heads", 1}, {"decoder_attention_heads", 1}}).find("odd"),
        std::string::npos);
    EXPECT_NE(refusal(marian, {{"share_encoder_decoder_embeddings", false}}).find("separate decoder embeddings"),
              std::string::npos);
}

// A cross-attention weight missing is named; a bare BartModel (no
// final_logits_bias) loads with a zero logits bias.
TEST(EncoderDecoderFiles, AMissingCrossWeightIsNamedAndAMissingLogitsBiasIsZero) {
    TempDir dir;
    Seq2SeqCheckpoint bart = make_seq2seq_checkpoint(seq2seq_variant("bart"));
    const auto without = [&](const std::string& name) {
        Seq2SeqCheckpoint less = bart;
        std::erase_if(less.tensors, [&](const NamedTensor& t) { return t.name == name; });
        return less;
    };
    write_seq2seq_checkpoint(dir.path / "no-cross", without("model.decoder.layers.1.encoder_attn.k_proj.weight"));
    try {
        load_model((dir.path / "no-cross").string());
        ADD_FAILURE() << "loaded without a cross-attention weight";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("decoder.layers.1.encoder_attn.k_proj.weight' missing"), std::string::npos)
            << e.what();
    }
    write_seq2seq_checkpoint(dir.path / "bare", without("final_logits_bias"));
    const Model bare = load_model((dir.path / "bare").string());
    EXPECT_FALSE(bare.config.logits_bias);
    EXPECT_EQ(bare.lm_bias, nullptr);
}

// A Marian folder's tokenizer is its source.spm, target.spm and vocab.json:
// the source through one model, the decoder's input through the other, as
// MarianTokenizer's text_target does.
TEST(EncoderDecoderFiles, MarianTokenizesEachSideWithItsOwnModel) {
    TempDir dir;
    write_seq2seq_checkpoint(dir.path, make_seq2seq_checkpoint(seq2seq_variant("marian")));
    ASSERT_FALSE(std::filesystem::exists(dir.path / "tokenizer.json"));
    const Model model = load_model(dir.path.string());
    const std::string text = "The attention heads of the encoder, and the decoder's cross-attention.";
    EXPECT_EQ(model.tokenizer.encode(text), marian_reference_ids(Side::source, text));
    std::vector<int32_t> target = marian_reference_ids(Side::target, text);
    ASSERT_NE(target, marian_reference_ids(Side::source, text));
    target.pop_back();  // </s>: the labels shifted right start with <pad>
    target.insert(target.begin(), marian_pad_id);
    EXPECT_EQ(decoder_input_ids(model, text), target);
}

// A BART checkpoint with vocab.json and merges.txt alone (as many
// fine-tunes ship it) reads them as transformers' BartTokenizer does: <s> A
// </s> around a text and <s> A </s></s> B </s> around a pair
// (build_inputs_with_special_tokens), its special tokens found in the text,
// <mask> taking the space before it; the reference is transformers'
// tokenizer on the same vocabulary's tokenizer.json. The decoder reads the
// target after its start token, <s> first; no target, the start token alone.
// GPT2Tokenizer's reading of the same files adds nothing.
TEST(EncoderDecoderFiles, BartsVocabFilesAloneTokenizeAsBartTokenizer) {
    TempDir dir;
    write_seq2seq_checkpoint(dir.path, make_seq2seq_checkpoint(seq2seq_variant("bart")));
    const std::vector<std::string> texts = {"A cat", "The cat sat on the <mask>."};
    const nlohmann::json single =
        reference_encoding(dir.path, dir.path / "tokenizer.json", "BartTokenizer", {{"texts", texts}});
    const nlohmann::json pair = reference_encoding(dir.path, dir.path / "tokenizer.json", "BartTokenizer",
                                                   {{"pairs", nlohmann::json::array({texts})}});
    if (single.is_null() || pair.is_null()) GTEST_SKIP() << "node cannot be run: run tools/setup";
    write_bart_vocab_files(dir.path);
    const Model model = load_model(dir.path.string());
    const Tokenizer& bart = model.tokenizer;
    for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(nlohmann::json(bart.encode(texts[i])), single[i]) << texts[i];
    const Tokenizer::Pair got = bart.encode_pair(texts[0], texts[1]);
    EXPECT_EQ(nlohmann::json(got.ids), pair[0]["ids"]);
    // BART has no token types: transformers' create_token_type_ids_from_sequences gives zeros (the port gives 1s to B).
    EXPECT_EQ(got.types, std::vector<int32_t>(got.ids.size(), 0));

    const std::vector<int32_t> words =
        Tokenizer::load(dir.path / "vocab.json", dir.path / "merges.txt").encode("A cat");
    EXPECT_EQ(nlohmann::json(words), nlohmann::json(std::vector<int32_t>(single[0].begin() + 1, single[0].end() - 1)));
    std::vector<int32_t> decoder = {model.config.decoder_start_token_id, single[0][0]};
    decoder.insert(decoder.end(), words.begin(), words.end());
    EXPECT_EQ(decoder_input_ids(model, "A cat"), decoder);
    EXPECT_EQ(decoder_input_ids(model, ""), std::vector<int32_t>{model.config.decoder_start_token_id});
}

INSTANTIATE_TEST_SUITE_P(Families, EachEncoderDecoder, ::testing::ValuesIn(seq2seq_variants()),
                         [](const auto& info) { return info.param.name; });

}  // namespace
