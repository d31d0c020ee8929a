// headscope-train: trains the built-in model. Tokenizes the corpus with a
// trained BPE, trains a small GPT-2 with AdamW (half the sequences are
// synthetic repeats, which only an induction head predicts), and writes a
// Hugging Face GPT-2 directory with the training record in config.json.
#include <CLI/CLI.hpp>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>

#include "bpe_trainer.h"
#include "gpt2_trainer.h"
#include "headscope/base/clock.h"
#include "headscope/base/error.h"
#include "headscope/inspect/probes.h"
#include "headscope/io/files.h"
#include "headscope/tokenize/tokenizer.h"

using namespace headscope;
using namespace headscope::train;
namespace fs = std::filesystem;

namespace {

struct Settings {
    fs::path corpus_dir = "build/corpus", tokenizer_dir = "build/tokenizer", out = "assets/builtin";
    Config config = {.n_layer = 2, .n_head = 4, .n_embd = 128, .n_positions = 256};  // V is the tokenizer's
    int batch = 8, steps = 30000, warmup = 200, eval_every = 2500;
    // The first steps train on short windows: with fewer positions to attend
    // to, the induction head forms in far fewer tokens.
    int short_context = 64, short_context_steps = 18000;
    double learning_rate = 2e-3;
    double repeat_fraction = 0.5;  // share of synthetic repeats in a batch; the rest is corpus
    uint64_t seed = 1234;
};

// The corpus as one token stream with the end-of-text id after each document.
std::vector<int32_t> tokenize_corpus(const Tokenizer& tokenizer, const fs::path& path, int32_t eot) {
    const std::string text = read_file(path);
    std::vector<int32_t> stream;
    for (std::string_view document : split_documents(text)) {
        const std::vector<int32_t> ids = tokenizer.encode(document);
        stream.insert(stream.end(), ids.begin(), ids.end());
        stream.push_back(eot);
    }
    return stream;
}

// Cross-entropy in nats of a unigram model fitted on train (add-one smoothed) on val.
double unigram_loss(const std::vector<int32_t>& train, const std::vector<int32_t>& val, int V) {
    std::vector<double> counts(V, 1.0);
    for (int32_t t : train) counts[t] += 1;
    const double total = train.size() + static_cast<double>(V);
    double loss = 0;
    for (int32_t t : val) loss -= std::log(counts[t] / total);
    return loss / val.size();
}

class Batches {
public:
    Batches(const std::vector<int32_t>& stream, int B, int max_T, double repeat_fraction, int V, uint64_t seed)
        : stream_(stream),
          B_(B),
          repeat_fraction_(repeat_fraction),
          V_(V),
          rng_(seed),
          seq_(max_T + 1),
          inputs_(B * max_T),
          targets_(B * max_T) {}

    // Fills B sequences of T inputs and targets, each of one of two kinds:
    // - a repeat: a segment of 2..16 random tokens repeated to the end of the
    //   window, each copy after a gap of 0..8 random tokens. The gaps vary,
    //   so a head that looks a fixed distance back predicts little; a head
    //   that finds the current token's earlier occurrences and copies the
    //   token after them (an induction head) predicts every copy but the first.
    // - a window of the corpus.
    void next(int T) {
        std::uniform_real_distribution<double> coin(0, 1);
        auto random_token = [&] { return static_cast<int32_t>(rng_() % (V_ - 1)); };  // never end-of-text
        auto below = [&](int n) { return static_cast<int>(rng_() % static_cast<uint64_t>(n)); };
        for (int b = 0; b < B_; ++b) {
            if (coin(rng_) < repeat_fraction_) {
                std::array<int32_t, 16> segment;
                const int length = 2 + below(15);
                for (int k = 0; k < length; ++k) segment[k] = random_token();
                for (int t = 0; t <= T;) {
                    for (int gap = below(9); gap > 0 && t <= T; --gap) seq_[t++] = random_token();
                    for (int k = 0; k < length && t <= T; ++k) seq_[t++] = segment[k];
                }
            } else {
                const size_t start = rng_() % (stream_.size() - T - 1);
                std::copy(stream_.begin() + start, stream_.begin() + start + T + 1, seq_.begin());
            }
            std::copy(seq_.begin(), seq_.begin() + T, inputs_.begin() + b * T);
            std::copy(seq_.begin() + 1, seq_.begin() + T + 1, targets_.begin() + b * T);
        }
    }
    const int32_t* inputs() const { return inputs_.data(); }
    const int32_t* targets() const { return targets_.data(); }

private:
    const std::vector<int32_t>& stream_;
    int B_;
    double repeat_fraction_;
    int V_;
    std::mt19937_64 rng_;
    std::vector<int32_t> seq_, inputs_, targets_;
};

// Mean loss over the validation stream cut into consecutive windows (at most 64).
float validation_loss(Gpt2Trainer<float>& model, const std::vector<int32_t>& val, int T) {
    const int windows = std::min<int>(64, static_cast<int>((val.size() - 1) / T));
    double sum = 0;
    for (int w = 0; w < windows; ++w)
        sum +=
            model.forward(val.data() + static_cast<size_t>(w) * T, val.data() + static_cast<size_t>(w) * T + 1, 1, T);
    return static_cast<float>(sum / windows);
}

// The first held-out documents (about 32 KB, blank-line separated): the text
// `headscope-cli heads` scores the shipped model's heads on.
void write_validation_sample(const fs::path& val_path, const fs::path& out_path) {
    const std::string text = read_file(val_path);
    std::string sample;
    for (std::string_view document : split_documents(text)) {
        if (sample.size() >= 32 * 1024) break;
        sample.append(document).append("\n\n");
    }
    write_file_atomically(out_path, "the validation sample", [&](std::ostream& out) { out << sample; });
}

void write_model(const Settings& s, const fs::path& out, const Gpt2Trainer<float>& model,
                 const nlohmann::ordered_json& record) {
    save_gpt2(model, out, record);
    for (const char* f : {"vocab.json", "merges.txt"}) {
        const std::string bytes = read_file(s.tokenizer_dir / f);
        write_file_atomically(out / f, "the tokenizer", [&](std::ostream& file) { file << bytes; });
    }
    write_validation_sample(s.corpus_dir / "val.txt", out / "validation.txt");
}

struct BestHeads {
    double previous_token = 0, induction = 0;
};

// The best previous-token and induction scores of the model as it is now,
// by core's probes (docs/cli.md's definitions) on a saved copy of it.
BestHeads best_heads(const Settings& s, const Gpt2Trainer<float>& model) {
    const fs::path dir = s.out / "probe-checkpoint";
    write_model(s, dir, model, {});
    const ProbeReport report = probe_validation(load_model(dir.string()), 8);
    BestHeads best;
    for (const HeadScores& h : report.heads) {
        best.previous_token = std::max(best.previous_token, h.previous_token);
        best.induction = std::max(best.induction, h.induction);
    }
    fs::remove_all(dir);
    return best;
}

void run_training(const Settings& s) {
    const Tokenizer tokenizer = Tokenizer::load(s.tokenizer_dir / "vocab.json", s.tokenizer_dir / "merges.txt");
    Config config = s.config;
    config.vocab_size = tokenizer.vocab_size();
    const int32_t eot = config.vocab_size - 1;
    if (tokenizer.token_bytes(eot) != end_of_text) throw Error("the tokenizer's last id is not <|endoftext|>");
    const std::vector<int32_t> train_tokens = tokenize_corpus(tokenizer, s.corpus_dir / "train.txt", eot);
    const std::vector<int32_t> val_tokens = tokenize_corpus(tokenizer, s.corpus_dir / "val.txt", eot);
    const double unigram = unigram_loss(train_tokens, val_tokens, config.vocab_size);
    std::printf("train %zu tokens, val %zu tokens, unigram val loss %.3f nats\n", train_tokens.size(),
                val_tokens.size(), unigram);

    Gpt2Trainer<float> model(config, s.seed);
    size_t params = 0;
    for (const ParameterTensor& t : model.layout()) params += t.size;
    std::printf("model: %d layers, %d heads, C=%d, T=%d, V=%d, %zu parameters\n", config.n_layer, config.n_head,
                config.n_embd, config.n_positions, config.vocab_size, params);

    const int T = config.n_positions;
    Batches batches(train_tokens, s.batch, T, s.repeat_fraction, config.vocab_size, s.seed + 1);
    fs::create_directories(s.out);
    // The loss log, rewritten whole after each evaluation; first with only its
    // header, so that an output directory that cannot be written fails now.
    std::ostringstream log;
    log << "step,train_loss,val_loss,best_previous_token,best_induction,learning_rate,tokens_per_s\n";
    auto write_log = [&] {
        write_file_atomically(s.out / "loss_log.csv", "the loss log", [&](std::ostream& out) { out << log.str(); });
    };
    write_log();
    AdamW adamw;
    const auto start = Clock::now();
    float train_loss = 0, val_loss = 0;
    BestHeads heads;
    double smoothed = 0;
    auto context_at = [&](int step) { return step <= s.short_context_steps ? s.short_context : T; };
    size_t total_tokens = 0, tokens = 0;
    for (int step = 1; step <= s.steps; ++step) total_tokens += static_cast<size_t>(s.batch) * context_at(step);
    for (int step = 1; step <= s.steps; ++step) {
        // Linear warm-up, then cosine decay to a tenth.
        const double progress = static_cast<double>(step - s.warmup) / std::max(1, s.steps - s.warmup);
        adamw.learning_rate =
            static_cast<float>(step <= s.warmup ? s.learning_rate * step / s.warmup
                                                : s.learning_rate * (0.1 + 0.45 * (1 + std::cos(M_PI * progress))));
        const int context = context_at(step);
        batches.next(context);
        train_loss = model.forward(batches.inputs(), batches.targets(), s.batch, context);
        tokens += static_cast<size_t>(s.batch) * context;
        model.backward();
        model.step(adamw, step);
        smoothed = step == 1 ? train_loss : 0.95 * smoothed + 0.05 * train_loss;

        if (step % s.eval_every == 0 || step == s.steps) {
            val_loss = validation_loss(model, val_tokens, T);
            heads = best_heads(s, model);
            const double seconds = ms_since(start) / 1000;
            const double tokens_per_s = double(tokens) / seconds;
            std::printf(
                "step %5d/%d  context %d  train %.3f  val %.3f  best heads: previous %.2f induction %.2f  "
                "lr %.2e  %.0f tok/s  ETA %.0f s\n",
                step, s.steps, context, smoothed, val_loss, heads.previous_token, heads.induction, adamw.learning_rate,
                tokens_per_s, double(total_tokens - tokens) / tokens_per_s);
            std::fflush(stdout);
            log << step << ',' << smoothed << ',' << val_loss << ',' << heads.previous_token << ',' << heads.induction
                << ',' << adamw.learning_rate << ',' << tokens_per_s << '\n';
            write_log();
        }
    }
    const double seconds = ms_since(start) / 1000;
    const nlohmann::ordered_json record = {
        {"corpus",
         "fortunes, fortunes-min, WordNet glosses, King James Bible (Debian packages); see docs/builtin-model.md"},
        {"train_tokens", train_tokens.size()},
        {"val_tokens", val_tokens.size()},
        {"steps", s.steps},
        {"batch", s.batch},
        {"short_context", s.short_context},
        {"short_context_steps", s.short_context_steps},
        {"repeat_fraction", s.repeat_fraction},
        {"learning_rate", s.learning_rate},
        {"seed", s.seed},
        {"final_train_loss", smoothed},
        {"final_val_loss", val_loss},
        {"unigram_val_loss", unigram},
        {"best_previous_token", heads.previous_token},
        {"best_induction", heads.induction},
        {"training_seconds", seconds}};
    write_model(s, s.out, model, record);
    std::printf("wrote %s (val loss %.3f vs unigram %.3f, %.0f s)\n", s.out.c_str(), val_loss, unigram, seconds);
}

}  // namespace

int main(int argc, char** argv) {
    CLI::App app{"Train Headscope's built-in GPT-2 model on the CPU", "headscope-train"};
    Settings s;
    app.add_option("--corpus", s.corpus_dir, "directory with train.txt and val.txt");
    app.add_option("--tokenizer", s.tokenizer_dir, "directory with vocab.json and merges.txt");
    app.add_option("--out", s.out, "output model directory");
    app.add_option("--layers", s.config.n_layer);
    app.add_option("--heads", s.config.n_head);
    app.add_option("--embd", s.config.n_embd);
    app.add_option("--context", s.config.n_positions);
    app.add_option("--batch", s.batch);
    app.add_option("--steps", s.steps);
    app.add_option("--warmup", s.warmup);
    app.add_option("--eval-every", s.eval_every);
    app.add_option("--lr", s.learning_rate);
    app.add_option("--short-context", s.short_context, "context of the first steps' windows");
    app.add_option("--short-context-steps", s.short_context_steps, "steps trained at the short context")
        ->check(CLI::NonNegativeNumber);
    app.add_option("--repeat-fraction", s.repeat_fraction, "share of sequences that are a random segment repeated")
        ->check(CLI::Range(0.0, 1.0));
    app.add_option("--seed", s.seed);
    try {
        app.parse(argc, argv);
        if (s.short_context < 2 || s.short_context > s.config.n_positions)
            throw Error("--short-context " + std::to_string(s.short_context) + " is not in 2.." +
                        std::to_string(s.config.n_positions) + " (the context)");
        run_training(s);
    } catch (const CLI::ParseError& e) {
        if (e.get_exit_code() == 0) return app.exit(e);  // --help
        std::fprintf(stderr, "headscope-train: error: %s\n", e.what());
        return 2;
    } catch (const Error& e) {
        std::fprintf(stderr, "headscope-train: error: %s\n", e.what());
        return 2;
    } catch (const fs::filesystem_error& e) {  // an output directory that cannot be made
        std::fprintf(stderr, "headscope-train: error: %s\n", e.what());
        return 2;
    }
    return 0;
}
