// The window on encoder–decoders (T5, Flan-T5, BART and Marian test
// checkpoints, seq2seq_models.h; Marian's with its SentencePiece files) as a user sees it under Xvfb: the target box
// and its "next token" stand where a decoder's generation controls are; the attention selector draws the
// cross-attention (the target's tokens down, the source's across), the encoder's self-attention and the decoder's, each
// the CLI's pixel for pixel, the decoder's upper triangle hatched; the tokens tab colours the source by the
// cross-attention; the mask tab draws the cross mask; the dance walks the cross-attention; T5 opens with its own
// scale (none), without the orange note; and "next token" after BART's start token takes the forced one.
#include <gtest/gtest.h>

#include <array>
#include <chrono>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "headscope/compute/backend.h"
#include "model_writer.h"
#include "process.h"
#include "screenshot.h"
#include "seq2seq_models.h"
#include "session/session.h"

using namespace headscope;
using nlohmann::json;

namespace {

class WindowEncoderDecoders : public ::testing::TestWithParam<std::string> {
protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir;
        for (const char* name : {"t5", "bart", "flan_t5", "marian"})
            test::write_seq2seq_checkpoint(dir_->path / name,
                                           test::make_seq2seq_checkpoint(test::seq2seq_variant(name)));
    }
    static void TearDownTestSuite() { delete dir_; }

    std::string model() const { return (dir_->path / GetParam()).string(); }

    json cli() const {
        const test::ProcessRun run = test::run_program(
            {test::cli_program(), "attention", "--model", model(), "--text", source_, "--target", target_}, dir_->path);
        EXPECT_EQ(run.status, 0) << run.err;
        return run.status == 0 ? json::parse(run.out) : json();
    }

    test::WindowShot shoot(const std::string& kind) const {
        test::WindowShot shot = test::shoot_window(
            {"--model", model(), "--text", source_, "--target", target_, "--attention", kind, "--layer", "1"},
            dir_->path, GetParam() + "-" + kind);
        EXPECT_EQ(shot.run.status, 0) << shot.run.err;
        return shot;
    }

    static test::TempDir* dir_;
    static constexpr const char* source_ = "The cat sat on the mat.";
    static constexpr const char* target_ = "Die Katze";
};
test::TempDir* WindowEncoderDecoders::dir_ = nullptr;

// Waits (a minute at most) until the session's live forward has shown its result.
void settle_session(Session& session) {
    for (int wait = 0; wait < 6000 && (session.busy() || session.shown.attention.B == 0); ++wait) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        session.collect();
    }
    session.collect();
}

// The start options are checked as the CLI checks them, before a window
// opens: one target for each text, each taken as written ('[a,b]' is one
// target, not a list of two).
TEST_P(WindowEncoderDecoders, TwoTargetsForOneTextAreOneLine) {
    test::expect_one_line_error(
        test::run_window({"--model", model(), "--text", source_, "--target", "[a,b]", "--target", "c", "--screenshot",
                          (dir_->path / (GetParam() + "-bad.png")).string()},
                         dir_->path),
        "headscope", "--target: 2 given for 1 texts (one for each --text, or none)");
}

TEST_P(WindowEncoderDecoders, EachAttentionKindIsTheClisPixelForPixel) {
    const json expected = cli();
    const int T = expected["seq_len"], S = expected["source_lengths"][0];
    for (const auto& [kind, key, rows, cols, causal] :
         {std::tuple{"cross", "cross_attention", T, S, false}, std::tuple{"encoder", "encoder_attention", S, S, false},
          std::tuple{"decoder", "decoder_attention", T, T, true}}) {
        SCOPED_TRACE(kind);
        const test::WindowShot shot = shoot(kind);
        const json cells = test::entries(shot.layout, "heads");
        ASSERT_EQ(cells.size(), static_cast<size_t>(4 * rows * cols)) << kind << ": every head's every cell";
        const int masked = test::check_heatmap_cells(shot.image, cells, expected, causal, key);
        EXPECT_EQ(masked, causal ? 4 * T * (T - 1) / 2 : 0) << kind;
    }
}

TEST_P(WindowEncoderDecoders, TheTargetBoxStandsWhereGenerationIsAndTheScaleIsTheModelsOwn) {
    const test::WindowShot shot = shoot("cross");
    bool target = false, next_token = false, kind = false, pair = false, generate = false;
    for (const json& control : test::entries(shot.layout, "control")) {
        target |= control["name"] == "target";
        next_token |= control["name"] == "next token";
        kind |= control["name"] == "attention kind";
        pair |= control["name"] == "text pair";
        generate |= control["name"] == "generate";
    }
    EXPECT_TRUE(target && next_token && kind);
    EXPECT_FALSE(pair || generate);
    EXPECT_TRUE(test::entries(shot.layout, "differences-note").empty())
        << "the model's own scale and masks are not a difference";
}

// The tokens tab on the cross-attention: the target's tokens are the queries,
// the source's tokens are coloured by the weight the last target token gives
// each (the CLI's), the source's own end included.
TEST_P(WindowEncoderDecoders, TheTokensTabColoursTheSourceByTheCrossAttention) {
    const json expected = cli();
    const int T = expected["seq_len"], S = expected["source_lengths"][0];
    const test::WindowShot shot = test::shoot_window(
        {"--model", model(), "--text", source_, "--target", target_, "--attention", "cross", "--view", "tokens"},
        dir_->path, GetParam() + "-tokens");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    const json queries = test::entries(shot.layout, "query-token"), keys = test::entries(shot.layout, "token");
    ASSERT_EQ(queries.size(), static_cast<size_t>(T));
    ASSERT_EQ(keys.size(), static_cast<size_t>(S));
    for (int j = 0; j < S; ++j) {
        EXPECT_EQ(keys[j]["text"], expected["source_tokens"][0][j]);
        EXPECT_NEAR(keys[j]["weight"].get<double>(), expected["cross_attention"][0][0][0][T - 1][j].get<double>(), 1e-6)
            << "source token " << j;
    }
}

// The mask tab's cross mask of a padded text: only the source's padding (and
// the target's pad queries) masked, in the mask colours, cell by cell.
TEST_P(WindowEncoderDecoders, TheMaskTabDrawsTheCrossMask) {
    const test::ProcessRun run =
        test::run_program({test::cli_program(), "attention", "--model", model(), "--text", "Hi", "--text", source_,
                           "--target", "Die", "--target", target_, "--format", "none"},
                          dir_->path);
    ASSERT_EQ(run.status, 0) << run.err;
    const json meta = json::parse(run.out);
    const int target = meta["lengths"][0], source = meta["source_lengths"][0];
    const test::WindowShot shot =
        test::shoot_window({"--model", model(), "--text", "Hi", "--text", source_, "--target", "Die", "--target",
                            target_, "--view", "mask", "--window-size", "1920x1080"},
                           dir_->path, GetParam() + "-mask");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    int allowed = 0, blocked = 0;
    for (const json& cell : test::entries(shot.layout, "mask")) {
        if (cell["mask"] != "cross") continue;
        const int i = cell["query"], j = cell["key"];
        const bool visible = i < target && j < source;
        const std::array<int, 3> got = test::centre(shot.image, cell);
        EXPECT_TRUE(test::near(got, visible ? std::array<double, 3>{236, 190, 72} : std::array<double, 3>{52, 58, 70}))
            << "cell " << i << "," << j;
        ++(visible ? allowed : blocked);
    }
    EXPECT_EQ(allowed, target * source);
    EXPECT_EQ(allowed + blocked, static_cast<int>(meta["seq_len"]) * static_cast<int>(meta["source_lengths"][1]));
}

// The dance of the cross-attention: its weights are (B, NH, T, T_src).
TEST_P(WindowEncoderDecoders, TheDanceWalksTheCrossAttention) {
    const json expected = cli();
    const int T = expected["seq_len"], S = expected["source_lengths"][0], NH = expected["n_head"];
    const test::WindowShot shot = test::shoot_window({"--model", model(), "--text", source_, "--target", target_,
                                                      "--attention", "cross", "--view", "dance", "--dance-step", "7"},
                                                     dir_->path, GetParam() + "-dance");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    const json step = test::entries(shot.layout, "dance-step");
    ASSERT_EQ(step.size(), 1u);
    EXPECT_EQ(step[0]["buffer"], "att");
    EXPECT_EQ(step[0]["shape"], json({1, NH, T, S}));
}

// Flan-T5's encoder has fewer layers than its decoder: the encoder's last
// layer is drawn, the CLI's pixel for pixel, and a layer past it is refused
// in one line.
class WindowDeeperDecoder : public WindowEncoderDecoders {};

TEST_P(WindowDeeperDecoder, TheEncodersOwnLayerCountIsKept) {
    const json expected = cli();
    const int layers = expected["encoder_layers"], S = expected["source_lengths"][0];
    const test::WindowShot shot = test::shoot_window({"--model", model(), "--text", source_, "--target", target_,
                                                      "--attention", "encoder", "--layer", std::to_string(layers - 1)},
                                                     dir_->path, GetParam() + "-encoder-layers");
    ASSERT_EQ(shot.run.status, 0) << shot.run.err;
    const json cells = test::entries(shot.layout, "heads");
    ASSERT_EQ(cells.size(), static_cast<size_t>(4 * S * S));
    EXPECT_EQ(test::check_heatmap_cells(shot.image, cells, expected, false, "encoder_attention"), 0);
    const test::ProcessRun too_deep =
        test::run_program({HEADSCOPE_WINDOW, "--model", model(), "--text", source_, "--attention", "encoder", "--layer",
                           std::to_string(layers), "--screenshot", (dir_->path / "never.png").string()},
                          dir_->path);
    test::expect_one_line_error(too_deep, "headscope", "--layer " + std::to_string(layers) + " out of range");
}

// "next token" appends the decoder's top token's text to the target and
// recomputes; or, changing nothing, says why: the top token is </s>, or a
// row of the embedding past the tokenizer's tokens (T5's checkpoints have
// some; the test Marian's tokenizer numbers fewer pieces than its rows).
TEST_P(WindowEncoderDecoders, NextTokenAppendsTheTopTokenOrSaysWhyNot) {
    WindowState state{.texts = {source_}};
    Session session(load_with_backend(model(), BackendChoice::cpu), state, [] {});
    const auto settle = [&] { settle_session(session); };
    settle();
    const Tokenizer& tokenizer = session.model().tokenizer;
    for (int step = 0; step < 4; ++step) {
        const AttentionResult& att = session.shown.attention;
        ASSERT_GT(att.top_k, 0);
        const int32_t top = att.predictions_at(0, session.length(0) - 1)[0].id;
        const std::string before = state.targets.empty() ? "" : state.targets[0];
        const std::string why = session.extend_target();
        if (top == session.model().config.eos_token_id) {
            EXPECT_EQ(why, "the decoder ends the target here (</s>)");
        } else if (top >= tokenizer.vocab_size()) {
            EXPECT_NE(why.find("id " + std::to_string(top) + ", is past the tokenizer's"), std::string::npos) << why;
        } else {
            EXPECT_EQ(why, "");
            EXPECT_EQ(state.targets[0], before + tokenizer.token_bytes(top));
            settle();
            continue;
        }
        EXPECT_EQ(state.targets.empty() ? "" : state.targets[0], before) << "changed without a token to append";
        break;
    }
}

// "next token" after BART's start token alone takes the token the config's
// forced_bos_token_id forces there (transformers' first generated token),
// whatever the model predicts; when that is <s>, which every target's tokens
// begin with (</s> <s> ...), no text appends it alone, and it says so,
// changing nothing.
TEST(WindowBart, NextTokenAfterTheStartTokenAloneIsTheForcedOne) {
    test::TempDir dir;
    test::Seq2SeqCheckpoint bart = test::make_seq2seq_checkpoint(test::seq2seq_variant("bart"));
    const auto next_token_with = [&](int forced, const std::string& why, bool appended) {
        bart.config["forced_bos_token_id"] = forced;
        const std::filesystem::path path = dir.path / std::to_string(forced);
        test::write_seq2seq_checkpoint(path, bart);
        WindowState state{.texts = {"The cat sat."}};
        Session session(load_with_backend(path.string(), BackendChoice::cpu), state, [] {});
        settle_session(session);
        ASSERT_EQ(session.length(0), 1) << "no target: the start token alone";
        ASSERT_NE(session.shown.attention.predictions_at(0, 0)[0].id, forced) << "the model's own choice must differ";
        EXPECT_EQ(session.extend_target(), why);
        const std::string target = state.targets.empty() ? "" : state.targets[0];
        EXPECT_EQ(target, appended ? session.model().tokenizer.token_bytes(forced) : "");
    };
    next_token_with(1000, "", true);
    const int s = bart.spec.vocab_size - 5;  // <s>, first of RoBERTa's special tokens after GPT-2's
    next_token_with(s, "the decoder's next token, <s>, begins every target: type the target's first words after it",
                    false);
}

INSTANTIATE_TEST_SUITE_P(Families, WindowEncoderDecoders, ::testing::Values("t5", "bart", "flan_t5", "marian"),
                         [](const auto& info) { return info.param; });
INSTANTIATE_TEST_SUITE_P(Families, WindowDeeperDecoder, ::testing::Values("flan_t5"),
                         [](const auto& info) { return info.param; });

}  // namespace
