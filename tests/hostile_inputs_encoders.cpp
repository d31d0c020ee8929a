// Hostile input, round three: what was added since round two, handed to the
// CLI: BERT, T5 and Marian configs and tokenizers (WordPiece, Unigram,
// SentencePiece files, Marian's vocab.json) and the text options. Each case
// is answered within 20 s and 1 GB with one line and exit 2, or, for odd
// but valid input, with the right answer: buckets that divide by zero,
// pieces long enough to overflow a stack or make an encode quadratic, scores
// past float32, texts the option parser would read as lists.
// docs/testing.md's bad-input table lists them.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "bert_tokenizer.h"
#include "encoder_models.h"
#include "encoder_reference.h"
#include "hostile_inputs.h"
#include "process.h"
#include "sentencepiece_models.h"
#include "seq2seq_models.h"
#include "seq2seq_reference.h"

using namespace headscope;
using namespace headscope::test;
namespace fs = std::filesystem;
using nlohmann::json;

namespace {

constexpr int32_t cls_id = 2, sep_id = 3, mask_id = 4;  // bert_tokenizer.h's

// The round-two fixture's folder, with a BERT, a BERT of one token type, a
// T5 and a Marian checkpoint beside its GPT-2.
class HostileEncoderInputs : public HostileInputs {
protected:
    static void SetUpTestSuite() {
        HostileInputs::SetUpTestSuite();
        bert_ = new EncoderCheckpoint(make_encoder_checkpoint(encoder_spec(Encoder::bert)));
        write_encoder_checkpoint(dir_->path / "bert", *bert_);
        EncoderSpec one_type = encoder_spec(Encoder::bert);
        one_type.type_vocab_size = 1;
        write_encoder_checkpoint(dir_->path / "bert-one-type", make_encoder_checkpoint(one_type));
        write_seq2seq_checkpoint(dir_->path / "t5", make_seq2seq_checkpoint(seq2seq_variant("t5")));
        write_seq2seq_checkpoint(dir_->path / "marian", make_seq2seq_checkpoint(seq2seq_variant("marian")));
    }
    static void TearDownTestSuite() {
        delete bert_;
        HostileInputs::TearDownTestSuite();
    }

    static std::string model(const std::string& name) { return (dir_->path / name).string(); }
    // Answered in time and memory, exit 0, nothing on stderr: the JSON it wrote.
    static json answered(const ProcessRun& r) {
        EXPECT_FALSE(r.timed_out) << "still running after " << r.seconds << " s";
        EXPECT_EQ(r.status, 0) << r.err;
        EXPECT_EQ(r.err, "");
        EXPECT_LT(r.cpu_seconds, max_seconds);
        EXPECT_LT(r.max_rss_kb, max_rss_kb);
        return r.status == 0 ? json::parse(r.out) : json::object();
    }
    // The copy `name` of the T5 checkpoint with `changes` made to its config.json.
    static std::string t5_with(const std::string& name, const json& changes) {
        const fs::path copy = copy_of("t5", name);
        json config = config_of(copy);
        config.update(changes);
        write(copy / "config.json", config.dump());
        return copy.string();
    }

    // A copy of the BERT checkpoint whose WordPiece has the vocabulary `vocab`
    // and the model fields `changes`.
    static std::string bert_with_wordpiece(const std::string& name, const json& vocab, const json& changes) {
        json tokenizer = bert_tokenizer_json(vocab);
        tokenizer["model"].update(changes);
        const fs::path copy = copy_of("bert", name);
        write(copy / "tokenizer.json", tokenizer.dump());
        return copy.string();
    }

    // A copy of the T5 checkpoint whose tokenizer.json is a bare Unigram of
    // T5's three special pieces and `pieces` (each a piece and its score).
    static std::string t5_with_unigram(const std::string& name, std::vector<std::pair<std::string, double>> pieces) {
        pieces.insert(pieces.begin(), {{"<pad>", 0.0}, {"</s>", 0.0}, {"<unk>", 0.0}});
        const json vocab = pieces;
        const fs::path copy = copy_of("t5", name);
        write(copy / "tokenizer.json", json{{"model", {{"type", "Unigram"}, {"unk_id", 2}, {"vocab", vocab}}}}.dump());
        return copy.string();
    }

    // The Marian checkpoint's copy `name` with `appended` after its source.spm's own fields.
    static fs::path marian_with_source(const std::string& name, const std::string& appended) {
        const fs::path copy = copy_of("marian", name);
        write(copy / "source.spm", read_file(sentencepiece_model(Side::source)) + appended);
        return copy;
    }

    static inline EncoderCheckpoint* bert_ = nullptr;
};

// Kinds 1 and 3: a maximum distance at or below half the buckets divided by
// log(1) = 0 (32 and 8, 32 and 16) or, below, read buckets outside the table (8 and 1).
TEST_F(HostileEncoderInputs, T5BucketsThatDivideByZeroOrLeaveTheTableAreRefused) {
    for (const auto& [buckets, distance] : {std::pair{32, 8}, {32, 16}, {8, 1}}) {
        const std::string copy =
            t5_with("t5-buckets-" + std::to_string(buckets) + "-" + std::to_string(distance),
                    {{"relative_attention_num_buckets", buckets}, {"relative_attention_max_distance", distance}});
        expect_refused(cli({"attention", "--model", copy, "--text", "a b c"}),
                       "relative_attention_max_distance " + std::to_string(distance) +
                           " must be more than half of relative_attention_num_buckets " + std::to_string(buckets));
    }
}

// The smallest distance allowed (half the buckets and one) gives the
// reference's maps on a text longer than it: every kind of bucket in use.
TEST_F(HostileEncoderInputs, T5BucketsJustPastHalfGiveTheReferencesMaps) {
    Seq2SeqSpec spec = seq2seq_variant("t5");
    spec.buckets = 8, spec.max_distance = 5;
    const Seq2SeqCheckpoint checkpoint = make_seq2seq_checkpoint(spec);
    write_seq2seq_checkpoint(dir_->path / "t5-edge", checkpoint);
    const json got = answered(cli({"attention", "--model", model("t5-edge"), "--text",
                                   "the cat sat on the mat and the dog sat on the log", "--target", "a cat"}));
    const std::vector<int32_t> source = got["source_token_ids"][0], target = got["token_ids"][0];
    ASSERT_GT(source.size(), 8u);
    AttentionOptions options;
    options.scale = Scale::none;
    const Seq2SeqReference want = seq2seq_reference(checkpoint, source, target, options);
    double worst = 0;
    for (int l = 0; l < spec.encoder_layers; ++l)
        for (int h = 0; h < want.NH; ++h)
            for (int i = 0; i < want.S; ++i)
                for (int j = 0; j < want.S; ++j)
                    worst = std::max(worst, std::abs(got["encoder_attention"][l][0][h][i][j].get<double>() -
                                                     want.encoder[((l * want.NH + h) * want.S + i) * want.S + j]));
    EXPECT_LT(worst, 2e-5);
}

// Kind 3: BERT of one token type (RoBERTa's kind) given a pair its tokenizer types 0 and 1.
TEST_F(HostileEncoderInputs, APairForAModelOfOneTokenTypeIsRefused) {
    expect_refused(cli({"attention", "--model", model("bert-one-type"), "--text", "the cat", "--text-pair", "sat"}),
                   "token type 1 is not one of the model's (it has one type: it takes no text pairs)");
}

// Kind 5: a text option is taken whole, as written, whatever its brackets
// (the option parser read '[MASK]' and '[1,2]' as lists, unwrapping or
// splitting them, and '[]' as none). [MASK] twice: both are filled.
TEST_F(HostileEncoderInputs, TextsInBracketsAreTakenAsWritten) {
    EXPECT_EQ(answered(cli({"tokenize", "--model", model("bert"), "--text", "[MASK]"}))["token_ids"],
              json({cls_id, mask_id, sep_id}));
    const json filled = answered(cli({"attention", "--model", model("bert"), "--text", "[MASK] sat on the [MASK]",
                                      "--top-k", "3", "--layers", "0"}));
    const std::vector<int32_t> ids = filled["token_ids"][0];
    ASSERT_EQ(ids.size(), 7u) << filled["token_ids"].dump();  // [CLS] [MASK] sat on the [MASK] [SEP]
    AttentionOptions options;
    options.causal = false;
    const EncoderReference want = encoder_reference(*bert_, ids, {}, options);
    for (const size_t at : {size_t{1}, size_t{5}}) {
        ASSERT_EQ(ids[at], mask_id);
        ASSERT_EQ(filled["predictions"][0][at].size(), 3u) << at;
        const int V = bert_->spec.vocab_size;
        const double* logits = want.logits.data() + at * static_cast<size_t>(V);
        EXPECT_EQ(filled["predictions"][0][at][0]["id"], std::max_element(logits, logits + V) - logits) << at;
    }
    // GPT-2's tokens join back to the text, and each text is one: a pair, a target, a prompt.
    const auto joined = [](const json& tokens) {
        std::string text;
        for (const json& token : tokens) text += token.get<std::string>();
        return text;
    };
    for (const char* text : {"[1,2]", "[]", "[MASK]", "[a, b]"}) {
        EXPECT_EQ(joined(answered(cli({"tokenize", "--model", model("good"), "--text", text}))["tokens"]), text);
        const json pair = answered(cli({"tokenize", "--model", model("bert"), "--text", "a", "--text-pair", text}));
        const std::vector<int32_t> types = pair["token_type_ids"];
        EXPECT_GT(std::count(types.begin(), types.end(), 1), 1) << text << ": the pair is its tokens and [SEP]";
    }
    const json prompt = answered(cli({"generate", "--model", model("good"), "--text", "[1,2]", "--tokens", "1"}));
    const json tokenized = answered(cli({"tokenize", "--model", model("good"), "--text", "[1,2]"}));
    const std::vector<int32_t> prompt_ids = prompt["token_ids"];
    ASSERT_GT(prompt_ids.size(), tokenized["token_ids"].size());
    EXPECT_EQ(json(std::vector<int32_t>(prompt_ids.begin(), prompt_ids.end() - 1)), tokenized["token_ids"]);
    const json target =
        answered(cli({"attention", "--model", model("t5"), "--text", "a", "--target", "[1,2]", "--format", "none"}));
    const json empty_target =
        answered(cli({"attention", "--model", model("t5"), "--text", "a", "--target", "[]", "--format", "none"}));
    EXPECT_GT(target["lengths"][0].get<int>(), empty_target["lengths"][0].get<int>());
    EXPECT_GT(empty_target["lengths"][0].get<int>(), 1) << "'[]' is a target, not none";
}

// Kind 6: the start checks the window shares with the CLI.
TEST_F(HostileEncoderInputs, TextOptionsTheModelCannotTakeAreRefused) {
    expect_refused(cli({"attention", "--model", model("good"), "--text", "a", "--text-pair", "b"}),
                   "--text-pair: sentence pairs are for encoders; this model (gpt2) is a decoder");
    expect_refused(cli({"attention", "--model", model("good"), "--text", "a", "--target", "b"}),
                   "--target: a target is for encoder-decoders; this model (gpt2) is a decoder");
    expect_refused(cli({"attention", "--model", model("bert"), "--text", "a", "--text-pair", "b", "--text-pair", "c"}),
                   "--text-pair: 2 given for 1 texts (one for each --text)");
    expect_refused(cli({"attention", "--model", model("t5"), "--text", "a", "--target", "b", "--target", "c"}),
                   "--target: 2 given for 1 texts (one for each --text, or none)");
    expect_refused(cli({"attention", "--model", model("good"), "--text", "a", "--ablate", "0.-5"}),
                   "--ablate: head 0.-5 to knock out is not one of the model's (layers 0..0, heads 0..1)");
}

// Kind 2: WordPiece's longest match on a word of 130,000 letters (an
// argument may not pass 128 KiB) with max_input_chars_per_word 10^9 and
// tokens of 1,024 bytes that share all but their last letter with it: each
// of its places is walked 1,021 letters deep, then matched by one letter
// (it was cubic: every candidate substring hashed). A token of 1,025 bytes
// and a 1 MB continuing prefix are refused.
TEST_F(HostileEncoderInputs, WordPieceOnALongWordAgainstLongTokensIsAnsweredInTime) {
    const std::string letters(130'000, 'a');
    const json vocab = {{"[PAD]", 0},
                        {"[UNK]", 1},
                        {"[CLS]", cls_id},
                        {"[SEP]", sep_id},
                        {"[MASK]", mask_id},
                        {"a", 5},
                        {"##a", 6},
                        {std::string(1023, 'a') + "b", 7},
                        {"##" + std::string(1021, 'a') + "b", 8}};
    const std::string copy =
        bert_with_wordpiece("bert-long-tokens", vocab, {{"max_input_chars_per_word", 1'000'000'000}});
    std::vector<int32_t> expected(letters.size() + 2, 6);
    expected.front() = cls_id, expected[1] = 5, expected.back() = sep_id;
    EXPECT_EQ(answered(cli({"tokenize", "--model", copy, "--text", letters}))["token_ids"], json(expected));

    json longer = vocab;
    longer["##" + std::string(1022, 'a') + "b"] = 9;
    expect_refused(cli({"tokenize", "--model", bert_with_wordpiece("bert-1025-byte-token", longer, json::object()),
                        "--text", "a"}),
                   "a token of 1025 bytes, over the 1024 Headscope reads");
    expect_refused(
        cli({"tokenize", "--model",
             bert_with_wordpiece("bert-long-prefix", vocab, {{"continuing_subword_prefix", std::string(1 << 20, '#')}}),
             "--text", "a"}),
        "a continuing_subword_prefix of 1048576 bytes, over the 1024 Headscope reads");
}

// Kind 2: the Unigram's best split of 100,000 letters with pieces of every
// length from 2 to 1,024 of them: each place walked 1,024 deep, 1,024 splits
// weighed (it was text x (longest piece)^2). The piece of 1,000 scores 0 and
// every other below, so the one split of score 0, a hundred of it, is the
// best. A piece of 1,025 bytes is refused.
TEST_F(HostileEncoderInputs, UnigramAgainstLongPiecesIsAnsweredInTime) {
    std::vector<std::pair<std::string, double>> pieces = {{std::string(1000, 'a'), 0.0}};  // id 3
    for (size_t n = 1; n <= 1024; ++n)
        if (n != 1000) pieces.emplace_back(std::string(n, 'a'), -1.0);
    const std::string copy = t5_with_unigram("t5-long-pieces", pieces);
    EXPECT_EQ(answered(cli({"tokenize", "--model", copy, "--text", std::string(100'000, 'a')}))["token_ids"],
              json(std::vector<int32_t>(100, 3)));
    pieces.emplace_back(std::string(1025, 'a'), -1.0);
    expect_refused(cli({"tokenize", "--model", t5_with_unigram("t5-1025-byte-piece", pieces), "--text", "a"}),
                   "a token of 1025 bytes, over the 1024 Headscope reads");
}

// Kind 3: scores past float32's range (-1e39 was -inf there, and no split
// was left: "token id -1 outside the vocabulary"). Kept in double, two
// pieces of -1e39 beat four.
TEST_F(HostileEncoderInputs, UnigramScoresPastFloat32StillSplit) {
    const std::string copy = t5_with_unigram("t5-scores-past-float", {{"b", -1e39}, {"bb", -1e39}, {"c", -3e300}});
    EXPECT_EQ(answered(cli({"tokenize", "--model", copy, "--text", "bbbb"}))["token_ids"], json({4, 4}));
    EXPECT_EQ(answered(cli({"tokenize", "--model", copy, "--text", "cbc"}))["token_ids"], json({5, 3, 5}));
}

// Kind 1: a piece of 130,000 bytes overflowed libsentencepiece's trie
// builder's stack. Pieces are refused past 1,024 bytes, and taken up to it.
TEST_F(HostileEncoderInputs, SentencePiecePiecesPast1024BytesAreRefused) {
    for (const size_t bytes : {size_t{130'000}, size_t{1025}}) {
        const fs::path copy = marian_with_source("marian-piece-" + std::to_string(bytes),
                                                 sentencepiece_piece(std::string(bytes, 'a'), -1));
        expect_refused(cli({"tokenize", "--model", copy.string(), "--text", "a"}),
                       (copy / "source.spm").string() + ": not a SentencePiece model (a piece of " +
                           std::to_string(bytes) + " bytes, over the 1024 Headscope reads)");
    }
    const fs::path copy = marian_with_source("marian-piece-1024", sentencepiece_piece(std::string(1024, 'a'), -1));
    EXPECT_EQ(answered(cli({"tokenize", "--model", copy.string(), "--text", "a cat"}))["token_ids"],
              json(marian_reference_ids(Side::source, "a cat")));
}

// Kind 2: libsentencepiece's encode walks the pieces that start at each
// place of the text: 100,000 letters against pieces of every length from 2
// to 1,024 of them (it took 15 s with longer ones). The piece of 1,000
// scores 0 and is in vocab.json: spm_encode's pieces, numbered by it.
TEST_F(HostileEncoderInputs, SentencePieceAgainstLongPiecesIsAnsweredInTime) {
    std::string pieces;
    for (size_t n = 2; n <= 1024; ++n) pieces += sentencepiece_piece(std::string(n, 'a'), n == 1000 ? 0 : -1);
    const fs::path copy = marian_with_source("marian-long-pieces", pieces);
    json vocab = marian_vocab();
    const int32_t long_id = static_cast<int32_t>(vocab.size());
    vocab[std::string(1000, 'a')] = long_id;
    write(copy / "vocab.json", vocab.dump());
    const std::string text(100'000, 'a');
    const std::vector<int32_t> ids = answered(cli({"tokenize", "--model", copy.string(), "--text", text}))["token_ids"];
    std::vector<int32_t> expected;
    const std::vector<std::vector<std::string>> pieces_of_text = reference_pieces(copy / "source.spm", {text});
    for (const std::string& piece : pieces_of_text.front())
        expected.push_back(vocab.contains(piece) ? vocab[piece].get<int32_t>() : marian_unk_id);
    expected.push_back(marian_eos_id);
    EXPECT_EQ(ids, expected);
    EXPECT_EQ(std::count(ids.begin(), ids.end(), long_id), 100);
}

// Kinds 2 and 4: a model's self-test samples, which libsentencepiece runs
// while loading (a million characters hung it; one that fails made it print
// its own lines), are dropped: the model loads as it is, silently.
TEST_F(HostileEncoderInputs, SentencePieceSelfTestSamplesAreNotRun) {
    const std::string failing =
        protobuf_bytes_field(1, protobuf_bytes_field(1, "a cat") + protobuf_bytes_field(2, "not its pieces"));
    const std::string long_sample =
        protobuf_bytes_field(1, protobuf_bytes_field(1, std::string(1'000'000, 'a')) + protobuf_bytes_field(2, "x"));
    const fs::path copy = marian_with_source("marian-self-test", protobuf_bytes_field(4, failing + long_sample));
    EXPECT_EQ(answered(cli({"tokenize", "--model", copy.string(), "--text", "a cat"}))["token_ids"],
              json(marian_reference_ids(Side::source, "a cat")));
}

// `vocab` (JSON) with the id of `token` written as `id`, as is.
std::string with_id(json vocab, const std::string& token, const std::string& id) {
    vocab[token] = "@id@";
    std::string text = vocab.dump();
    return text.replace(text.find("\"@id@\""), 6, id);
}

// Kind 7, and Marian's vocab.json given values that are no ids: each named
// as the file writes it (2^63 was printed negative), with its token.
TEST_F(HostileEncoderInputs, VocabularyIdsThatAreNoIdsAreNamedAsWritten) {
    const fs::path copy = copy_of("marian", "marian-vocab");
    const std::string vocab_file = (copy / "vocab.json").string();
    const std::string dense =
        vocab_file + ": token ids must be 0.." + std::to_string(marian_vocab().size() - 1) + ", each once; found ";
    const std::string not_integer = vocab_file + ": the id of \"<unk>\" is not an integer: ";
    for (const auto& [id, names] : std::vector<std::pair<std::string, std::string>>{
             {"9223372036854775808", dense + "9223372036854775808 for \"<unk>\""},
             {"18446744073709551615", dense + "18446744073709551615 for \"<unk>\""},
             {"-9223372036854775808", dense + "-9223372036854775808 for \"<unk>\""},
             {"-1", dense + "-1 for \"<unk>\""},
             {"0", dense + "0 for \"<unk>\""},  // </s>'s
             {"1.5", not_integer + "1.5"},
             {"2e0", not_integer + "2.0"},
             {"18446744073709551616", not_integer + "1.8446744073709552e+19"},  // past 2^64 - 1: a double
             {"\"7\"", not_integer + "\"7\""},
             {"null", not_integer + "null"}}) {
        write(copy / "vocab.json", with_id(marian_vocab(), "<unk>", id));
        expect_refused(cli({"tokenize", "--model", copy.string(), "--text", "a"}), names);
    }
    write(copy / "vocab.json", R"(["</s>", "<unk>"])");
    expect_refused(cli({"tokenize", "--model", copy.string(), "--text", "a"}),
                   vocab_file + ": expected a JSON object of token -> id");
    // GPT-2's vocab.json, read by the same code.
    const fs::path gpt2 = copy_of_good("gpt2-vocab");
    write(gpt2 / "vocab.json", with_id(json::parse(read_file(gpt2 / "vocab.json")), "!", "9223372036854775808"));
    expect_refused(cli({"info", "--model", gpt2.string()}), "found 9223372036854775808 for \"!\"");
}

}  // namespace
