// The encoder families (BERT, RoBERTa, DistilBERT, ModernBERT) against their
// double-precision reference (encoder_reference.h) on random-weight
// checkpoints in Hugging Face's names: every layer's maps of a padded batch
// equal each text's alone (with token types, the causal mask forced on, a
// re-split and another scale), the masked-LM head's top tokens equal the
// reference's, and what an encoder cannot do is refused in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>
#include <vector>

#include "encoder_models.h"
#include "encoder_reference.h"
#include "headscope/base/error.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/prefix_cache.h"
#include "headscope/compute/text_batch.h"
#include "headscope/model/model.h"

using namespace headscope;
using namespace headscope::test;

namespace {

// A text of 11 tokens and one of 7 (padded), [CLS] ... [SEP] in the BERT vocabulary.
std::vector<std::vector<int32_t>> encoder_texts(const EncoderSpec& spec) {
    const int V = spec.vocab_size;
    return {{2, 9, 1000, 2024, V / 2, 4, 300, 3, V - 1, 42, 3}, {2, 64, V - 2, 12, 4, 33, 3}};
}

class EachEncoder : public ::testing::TestWithParam<EncoderVariant> {
protected:
    void SetUp() override {
        checkpoint_ = make_encoder_checkpoint(GetParam().spec);
        write_encoder_checkpoint(dir_.path, checkpoint_);
        model_ = load_model(dir_.path.string());
        backend_->load_weights(model_);
    }

    // The engine's maps of the padded batch against each text's reference alone.
    void expect_maps_match(AttentionOptions options, const std::vector<std::vector<int32_t>>& types) {
        options.sliding_window = model_.config.sliding_window;  // ModernBERT's local layers' window
        const std::vector<std::vector<int32_t>> texts = encoder_texts(GetParam().spec);
        AttentionResult got;
        backend_->forward(Batch{texts, model_.config.pad_id(), types}, options, got);
        for (int b = 0; b < got.B; ++b) {
            const EncoderReference want =
                encoder_reference(checkpoint_, texts[b], types.empty() ? std::vector<int32_t>{} : types[b], options);
            ASSERT_EQ(got.NH, want.NH);
            const int T = want.T, NH = want.NH;
            double worst = 0;
            for (int l = 0; l < model_.config.n_layer; ++l)
                for (int h = 0; h < NH; ++h)
                    for (int i = 0; i < got.T; ++i)
                        for (int j = 0; j < got.T; ++j) {
                            const double expected =
                                i < T && j < T ? want.weights[((static_cast<size_t>(l) * NH + h) * T + i) * T + j] : 0;
                            worst = std::max(worst, std::abs(got.row(l, b, h, i)[j] - expected));
                        }
            EXPECT_LT(worst, 2e-5) << "text " << b;
        }
    }

    TempDir dir_;
    EncoderCheckpoint checkpoint_;
    Model model_;
    std::unique_ptr<Backend> backend_ = make_cpu_backend();
};

TEST_P(EachEncoder, LoadsAsAnEncoder) {
    EXPECT_STREQ(model_kind(model_.config), "encoder");
    EXPECT_FALSE(model_.config.causal);
    EXPECT_EQ(model_.config.post_norm, GetParam().name != "modernbert");
    EXPECT_TRUE(model_.config.predicts());
    EXPECT_EQ(model_.config.n_positions, GetParam().spec.max_positions - (GetParam().name == "roberta" ? 2 : 0));
}

TEST_P(EachEncoder, MapsEqualTheReference) {
    AttentionOptions options;
    options.causal = false;
    expect_maps_match(options, {});
}

TEST_P(EachEncoder, OptionsAreHonoured) {
    AttentionOptions causal;  // forced on: not the model's computation, but computed as asked
    expect_maps_match(causal, {});
    AttentionOptions resplit;
    resplit.causal = false, resplit.n_head = 8, resplit.scale = Scale::model;
    expect_maps_match(resplit, {});
}

TEST_P(EachEncoder, TokenTypesOfAPair) {
    if (GetParam().spec.type_vocab_size < 2) GTEST_SKIP() << "the family has no second token type";
    AttentionOptions options;
    options.causal = false;
    expect_maps_match(options, {{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1}, {0, 0, 0, 0, 1, 1, 1}});
}

// A model of one token type (RoBERTa's kind) given a pair its tokenizer
// types 0 and 1 (BERT's): refused in one line, as transformers refuses it
// (the second type has no embedding), not computed with the types dropped.
TEST_P(EachEncoder, APairOfTwoTypesIsRefusedByAModelOfOne) {
    if (GetParam().spec.type_vocab_size != 1) GTEST_SKIP() << "the family has no or two token types";
    const TextBatch texts = text_batch(model_, BatchTexts{{"the cat"}, {"sat"}});
    AttentionResult got;
    try {
        backend_->forward(texts.batch, {}, got);
        ADD_FAILURE() << "a second token type was computed";
    } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()),
                  "token type 1 is not one of the model's (it has one type: it takes no text pairs)");
    }
}

// Fill-mask: the masked-LM head's top tokens at every position, and no next-token log p.
TEST_P(EachEncoder, MaskedLmTopTokensEqualTheReference) {
    const std::vector<std::vector<int32_t>> texts = encoder_texts(GetParam().spec);
    AttentionOptions options;
    options.causal = false, options.top_k = 5, options.sliding_window = model_.config.sliding_window;
    AttentionResult got;
    backend_->forward(Batch{texts, model_.config.pad_id()}, options, got);
    const int V = GetParam().spec.vocab_size;
    for (int b = 0; b < got.B; ++b) {
        const EncoderReference want = encoder_reference(checkpoint_, texts[b], {}, options);
        for (int t = 0; t < want.T; ++t) {
            const double* logits = want.logits.data() + static_cast<size_t>(t) * V;
            std::vector<int> order(V);
            std::iota(order.begin(), order.end(), 0);
            std::partial_sort(order.begin(), order.begin() + 5, order.end(),
                              [&](int x, int y) { return logits[x] > logits[y]; });
            const double max = logits[order[0]];
            double sum = 0;
            for (int id = 0; id < V; ++id) sum += std::exp(logits[id] - max);
            for (int k = 0; k < 5; ++k) {
                EXPECT_EQ(got.predictions_at(b, t)[k].id, order[k]) << "text " << b << " position " << t << " k " << k;
                EXPECT_NEAR(got.predictions_at(b, t)[k].p, std::exp(logits[order[k]] - max) / sum, 1e-5);
            }
            EXPECT_TRUE(std::isnan(got.logprob_next[static_cast<size_t>(b) * got.T + t]));
        }
    }
}

// A causal mask chosen for an encoder lets the window reuse a prefix as the
// text grows; its rows still predict no next token: logprob_next stays NaN
// where the cached text ended, as in a recompute.
TEST_P(EachEncoder, PrefixReuseUnderACausalMaskPredictsNoNextToken) {
    const std::vector<int32_t> text = encoder_texts(GetParam().spec)[0];
    AttentionOptions options;
    options.causal = true, options.top_k = 3, options.sliding_window = model_.config.sliding_window;
    PrefixCache cache;
    AttentionResult shorter, grown;
    backend_->forward(Batch{{{text.begin(), text.end() - 4}}, model_.config.pad_id()}, options, shorter, &cache);
    backend_->forward(Batch{{text}, model_.config.pad_id()}, options, grown, &cache);
    EXPECT_EQ(grown.reused, std::vector<int>{static_cast<int>(text.size()) - 4});
    for (float logprob : grown.logprob_next) EXPECT_TRUE(std::isnan(logprob));
}

TEST_P(EachEncoder, ContributionsAreRefusedInOneLine) {
    AttentionOptions options;
    options.causal = false, options.top_k = 1, options.contributions = true;
    AttentionResult got;
    try {
        backend_->forward(Batch{encoder_texts(GetParam().spec), model_.config.pad_id()}, options, got);
        ADD_FAILURE() << "contributions computed for a post-LN encoder";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("contributions do not add up"), std::string::npos) << e.what();
    }
}

INSTANTIATE_TEST_SUITE_P(Encoders, EachEncoder, ::testing::ValuesIn(encoder_variants()),
                         [](const auto& info) { return info.param.name; });

// Old BERT checkpoints name the norms gamma and beta; a bare BertModel has no
// masked-LM head: both load, and their maps are the reference's; the bare
// one refuses predictions in one line.
TEST(Encoders, LegacyNamesAndABareEncoder) {
    const EncoderCheckpoint full = make_encoder_checkpoint(encoder_spec(Encoder::bert));
    EncoderCheckpoint legacy = full, bare = full;
    int renamed = 0;
    for (NamedTensor& t : legacy.tensors)
        for (const auto& [now, then] :
             {std::pair{"LayerNorm.weight", "LayerNorm.gamma"}, {"LayerNorm.bias", "LayerNorm.beta"}})
            if (t.name.ends_with(now))
                t.name = t.name.substr(0, t.name.size() - std::string(now).size()) + then, ++renamed;
    EXPECT_EQ(renamed, 2 + 4 * full.spec.n_layer + 2);
    std::erase_if(bare.tensors, [](const NamedTensor& t) { return t.name.starts_with("cls."); });
    const std::vector<std::vector<int32_t>> texts = encoder_texts(full.spec);
    AttentionOptions options;
    options.causal = false;
    const EncoderReference want = encoder_reference(full, texts[0], {}, options);
    for (const EncoderCheckpoint* checkpoint : {&legacy, &bare}) {
        TempDir dir;
        write_encoder_checkpoint(dir.path, *checkpoint);
        const Model model = load_model(dir.path.string());
        EXPECT_EQ(model.config.predicts(), checkpoint == &legacy);
        const std::unique_ptr<Backend> backend = make_cpu_backend();
        backend->load_weights(model);
        AttentionResult got;
        backend->forward(Batch{{texts[0]}, model.config.pad_id()}, options, got);
        double worst = 0;
        for (size_t n = 0; n < want.weights.size(); ++n)
            worst = std::max(worst, std::abs(got.weights[n] - want.weights[n]));
        EXPECT_LT(worst, 2e-5);
    }
    TempDir dir;
    write_encoder_checkpoint(dir.path, bare);
    const Model model = load_model(dir.path.string());
    const std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    options.top_k = 3;
    AttentionResult got;
    try {
        backend->forward(Batch{{texts[0]}, model.config.pad_id()}, options, got);
        ADD_FAILURE() << "a bare encoder predicted";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("has no masked-LM head"), std::string::npos) << e.what();
    }
}

// A token type the model lacks, and configs a loader must refuse.
TEST(Encoders, BadInputIsOneLine) {
    const EncoderSpec spec = encoder_spec(Encoder::roberta);
    TempDir dir;
    write_encoder_checkpoint(dir.path, make_encoder_checkpoint(spec));
    const Model model = load_model(dir.path.string());
    const std::unique_ptr<Backend> backend = make_cpu_backend();
    backend->load_weights(model);
    AttentionResult got;
    try {
        backend->forward(Batch{{{2, 9, 3}}, 1, {{0, 1, 1}}}, AttentionOptions{}, got);
        ADD_FAILURE() << "a second token type accepted by RoBERTa";
    } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("it takes no text pairs"), std::string::npos) << e.what();
    }
    const std::vector<std::pair<nlohmann::json, std::string>> configs = {
        {{{"max_position_embeddings", 2}}, "leaves no position after padding_idx 1"},
        {{{"hidden_act", "relu"}}, "hidden_act 'relu' is not supported"},
        {{{"position_embedding_type", "relative_key"}}, "position_embedding_type 'relative_key' is not supported"},
    };
    for (const auto& [change, message] : configs) {
        EncoderCheckpoint bad = make_encoder_checkpoint(spec);
        bad.config.update(change);
        TempDir bad_dir;
        write_encoder_checkpoint(bad_dir.path, bad);
        try {
            load_model(bad_dir.path.string());
            ADD_FAILURE() << "accepted: " << message;
        } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
        }
    }
}

}  // namespace
