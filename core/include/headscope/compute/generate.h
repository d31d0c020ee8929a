// Generation: tokens appended to a prompt one at a time, greedy or sampled
// (temperature, top-k, top-p) from a seeded generator, each step one cached
// forward (prefix_cache.h) that also gives the new token's attention rows.
// headscope-cli generate and the window run the same Generator.
// Legend: V vocabulary, L returned layers, NH heads, keys the tokens so far.
#pragma once
#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "headscope/compute/backend.h"

namespace headscope {

struct Sampling {
    float temperature = 0;  // 0: greedy, the argmax (the lowest id on ties); else logits / temperature
    int top_k = 0;          // > 0: only the top_k most likely tokens; 0: all
    float top_p = 1;        // in (0, 1]: only the smallest set of most likely tokens reaching this probability
    uint64_t seed = 0;      // of the generator the draws come from
};

// The most tokens one generation makes (a model's context may allow more:
// each step's rows are kept for the replay, L x NH x the keys so far).
inline constexpr int max_generated_tokens = 65536;

// Throws Error naming the value unless temperature >= 0, top_k >= 0, top_p in
// (0, 1] and 1 <= max_tokens <= max_generated_tokens, or, when `options` allow no prefix reuse
// (prefix_reuse_refusal), "generation needs the causal model: ...".
void validate_generation(const Sampling& sampling, int max_tokens, const AttentionOptions& options);

// A double in [0, 1) from the generator's top 53 bits: the same on every
// platform, unlike std::uniform_real_distribution.
double uniform01(std::mt19937_64& rng);

// The next token after `logits` (V). Greedy takes the argmax and draws
// nothing. Otherwise, in double: softmax of logits / temperature; keep the
// top_k most likely (ties: the lower id); sort them by probability (ties: the
// lower id) and keep the shortest head whose sum reaches top_p of theirs;
// renormalise; one uniform01 draw walks the kept tokens (most likely first
// when top_k or top_p narrowed them, else by id).
int32_t sample_token(const float* logits, int V, const Sampling& sampling, std::mt19937_64& rng);

// The token generation must make after `input_length` tokens whatever the
// model predicts, as transformers' ForcedBOSTokenLogitsProcessor forces it:
// the config's forced_bos_token_id after a one-token input (an encoder–decoder's
// start token alone); -1: none.
int32_t forced_token(const Config& config, size_t input_length);

enum class Stop { running, tokens, eos, context };  // still going; N tokens made; EOS made; n_positions reached
const char* to_string(Stop stop);                   // "running", "tokens", "eos", "context"

// The most likely tokens each step reports.
inline constexpr int generation_top = 10;

struct GenerationStep {
    int32_t id = -1;
    std::string token;  // token_text
    // The model's probability of the token: the softmax of the logits before
    // temperature, top-k and top-p (what `top` ranks by).
    float p = 0;
    bool forced = false;                 // forced_token's, not chosen from the logits
    std::vector<Prediction> top;         // (min(generation_top, V)) what the model predicted here, by p descending
    int keys = 0;                        // the tokens so far, this one included
    std::vector<float> attention;        // (L, NH, keys): this token's query row in every returned layer and head
    std::vector<float> cross_attention;  // (L, NH, S) an encoder–decoder's: its row of the cross-attention
    double timing_ms = 0;                // choosing the token and its forward
    ComputedOn computed_on;              // the device of its forward
};

struct Generation {
    std::vector<int32_t> source_ids;  // an encoder–decoder's source; empty for a decoder
    std::vector<int32_t> prompt_ids;
    std::vector<int32_t> token_ids;  // the prompt's, then the generated ones
    std::vector<GenerationStep> steps;
    Stop stop = Stop::running;
    double prompt_ms = 0;     // the prompt's forward
    std::vector<int> layers;  // the returned layers (the steps' L)
    int NH = 0;               // the split's heads
    ComputedOn computed_on;   // the device of its forwards: the first that fell back, else the last
};

// Runs the prompt on construction, then one token per step(): the token is
// chosen from the last forward's logits, appended, and run through a forward
// that reuses every earlier token from the one PrefixCache, giving its
// attention rows and the predictions for the next. A window's worker can run
// one step() per job and stop between them.
class Generator {
public:
    // `backend` has `model`'s weights loaded; both outlive the generator.
    // An encoder–decoder's decoder continues `prompt` (its start token first)
    // reading `source`, which the encoder runs once. Throws Error where
    // validate_generation does, or for a prompt the forward refuses. With
    // `cache` (outliving the generator) its forwards go through that one, the
    // prompt's reusing what an earlier forward of it left there (the window's
    // live cache, which its long text's lens reads); else through its own.
    // With options.maps not full (a long text's), each step's rows are
    // computed from the kept queries and keys (attention_maps.h).
    Generator(Backend& backend, const Model& model, std::vector<int32_t> prompt, const AttentionOptions& options,
              const Sampling& sampling, int max_tokens, std::vector<int32_t> source = {}, PrefixCache* cache = nullptr);

    // Generates one token; generation().stop says whether to go on. Only while it is Stop::running.
    const GenerationStep& step();

    const Generation& generation() const { return generation_; }
    // The latest forward's: its maps cover every token so far.
    const AttentionResult& result() const { return result_; }

private:
    Backend& backend_;
    const Model& model_;
    AttentionOptions options_;
    Sampling sampling_;
    int max_tokens_;
    std::mt19937_64 rng_;
    std::unique_ptr<PrefixCache> own_cache_;  // without a cache given (a pointer: the generator may move)
    PrefixCache* cache_;
    AttentionResult result_;
    Generation generation_;

    void forward();  // of generation_.token_ids, through the cache
};

}  // namespace headscope
