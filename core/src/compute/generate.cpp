// Sampling and the generation loop: see generate.h.
#include "headscope/compute/generate.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <numeric>

#include "headscope/base/clock.h"
#include "headscope/base/error.h"
#include "headscope/compute/attention_maps.h"

namespace headscope {

namespace {

// `value` as it reads best: the shortest digits that read back the same.
std::string shortest(float value) {
    char text[32];
    return std::string(text, std::to_chars(text, text + sizeof text, value).ptr);
}

// The softmax probability of `id` under `logits` (V), in double, max subtracted.
float probability(const float* logits, int V, int32_t id) {
    const double max = *std::max_element(logits, logits + V);
    double sum = 0;
    for (int i = 0; i < V; ++i) sum += std::exp(logits[i] - max);
    return static_cast<float>(std::exp(logits[id] - max) / sum);
}

}  // namespace

void validate_generation(const Sampling& sampling, int max_tokens, const AttentionOptions& options) {
    if (max_tokens < 1) throw Error("the tokens to generate must be at least 1, got " + std::to_string(max_tokens));
    if (max_tokens > max_generated_tokens)
        throw Error("at most " + std::to_string(max_generated_tokens) + " tokens are generated in one run, not " +
                    std::to_string(max_tokens));
    if (!(sampling.temperature >= 0))
        throw Error("temperature must be at least 0 (0: greedy), got " + shortest(sampling.temperature));
    if (sampling.top_k < 0) throw Error("top-k must be at least 0 (0: all), got " + std::to_string(sampling.top_k));
    if (!(sampling.top_p > 0 && sampling.top_p <= 1))
        throw Error("top-p must be in (0, 1], got " + shortest(sampling.top_p));
    const std::string refusal = prefix_reuse_refusal(options);
    if (!refusal.empty()) throw Error("generation needs the causal model: " + refusal);
}

double uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

int32_t sample_token(const float* logits, int V, const Sampling& sampling, std::mt19937_64& rng) {
    assert(V > 0);
    const float* max = std::max_element(logits, logits + V);  // the first of equal maxima
    if (sampling.temperature == 0) return static_cast<int32_t>(max - logits);

    std::vector<double> w(V);  // (V) unnormalised probabilities at the temperature
    for (int i = 0; i < V; ++i) w[i] = std::exp((static_cast<double>(logits[i]) - *max) / sampling.temperature);
    std::vector<int32_t> kept(V);  // (V) candidate ids, narrowed below
    std::iota(kept.begin(), kept.end(), 0);
    const auto more_likely = [&](int32_t a, int32_t b) { return w[a] > w[b] || (w[a] == w[b] && a < b); };
    if (sampling.top_k > 0 && sampling.top_k < V) {
        std::partial_sort(kept.begin(), kept.begin() + sampling.top_k, kept.end(), more_likely);
        kept.resize(sampling.top_k);
    }
    if (sampling.top_p < 1) {
        std::sort(kept.begin(), kept.end(), more_likely);
        double total = 0;
        for (int32_t id : kept) total += w[id];
        double sum = 0;
        size_t n = 0;
        while (n < kept.size() && sum < sampling.top_p * total) sum += w[kept[n++]];
        kept.resize(std::max<size_t>(n, 1));
    }
    double total = 0;
    for (int32_t id : kept) total += w[id];
    const double u = uniform01(rng) * total;
    double sum = 0;
    for (int32_t id : kept) {
        sum += w[id];
        if (u < sum) return id;
    }
    return kept.back();  // u within round-off of the total
}

const char* to_string(Stop stop) {
    switch (stop) {
        case Stop::running: return "running";
        case Stop::tokens: return "tokens";
        case Stop::eos: return "eos";
        case Stop::context: return "context";
    }
    return "";
}

int32_t forced_token(const Config& config, size_t input_length) {
    return input_length == 1 ? config.forced_bos_token_id : -1;
}

Generator::Generator(Backend& backend, const Model& model, std::vector<int32_t> prompt, const AttentionOptions& options,
                     const Sampling& sampling, int max_tokens, std::vector<int32_t> source, PrefixCache* cache)
    : backend_(backend),
      model_(model),
      options_(options),
      sampling_(sampling),
      max_tokens_(max_tokens),
      rng_(sampling.seed),
      own_cache_(cache ? nullptr : std::make_unique<PrefixCache>()),
      cache_(cache ? cache : own_cache_.get()) {
    if (model.config.is_encoder())
        throw Error("this model (" + model.config.architecture +
                    ") is an encoder: it fills masked tokens and does not generate; generation needs a decoder");
    validate_generation(sampling, max_tokens, options);
    options_.top_k = std::min(generation_top, model.config.vocab_size);
    options_.lens_k = 0;
    generation_.source_ids = std::move(source);
    generation_.prompt_ids = prompt;
    generation_.token_ids = std::move(prompt);
    const Clock::time_point start = Clock::now();
    forward();
    generation_.prompt_ms = ms_since(start);
    generation_.layers = result_.layers;
    generation_.NH = result_.NH;
    if (static_cast<int>(generation_.token_ids.size()) >= model.config.n_positions) generation_.stop = Stop::context;
}

void Generator::forward() {
    Batch batch{{generation_.token_ids}, model_.config.pad_id()};
    if (!generation_.source_ids.empty()) batch.source_ids = {generation_.source_ids};
    backend_.forward(batch, options_, result_, cache_);
    generation_.computed_on = together(generation_.computed_on, result_.computed_on);
}

const GenerationStep& Generator::step() {
    assert(generation_.stop == Stop::running);
    const Clock::time_point start = Clock::now();
    GenerationStep step;
    const float* logits = result_.last_logits.data();  // (V) text 0's, at its last token
    const int32_t forced = forced_token(model_.config, generation_.token_ids.size());
    step.forced = forced >= 0;
    step.id = step.forced ? forced : sample_token(logits, result_.V, sampling_, rng_);
    step.token = token_text(model_.tokenizer, step.id);
    step.p = probability(logits, result_.V, step.id);
    const Prediction* top = result_.predictions_at(0, result_.T - 1);
    step.top.assign(top, top + result_.top_k);

    generation_.token_ids.push_back(step.id);
    forward();
    const int t = result_.T - 1;  // the new token's row
    step.keys = t + 1;
    step.attention.resize(result_.layers.size() * result_.NH * step.keys);
    float* out = step.attention.data();
    const Batch batch{{generation_.token_ids}, model_.config.pad_id()};
    for (size_t slot = 0; slot < result_.layers.size(); ++slot)
        for (int h = 0; h < result_.NH; ++h, out += step.keys) {
            if (result_.maps != Maps::full) {  // no map kept: the row from the kept queries and keys
                const std::vector<float> row = map_region({model_, batch, options_, result_}, static_cast<int>(slot), 0,
                                                          h, {t, t + 1, 0, step.keys});
                std::copy(row.begin(), row.end(), out);
                continue;
            }
            const float* row = result_.row(static_cast<int>(slot), 0, h, t);
            std::copy(row, row + step.keys, out);
        }
    step.cross_attention.resize(result_.layers.size() * result_.NH * result_.S);
    out = step.cross_attention.data();
    for (size_t slot = 0; slot < result_.layers.size() && result_.S; ++slot)
        for (int h = 0; h < result_.NH; ++h, out += result_.S) {
            const float* row = result_.cross_row(static_cast<int>(slot), 0, h, t);
            std::copy(row, row + result_.S, out);
        }
    step.timing_ms = ms_since(start);
    step.computed_on = result_.computed_on;

    const int made = static_cast<int>(generation_.steps.size()) + 1;
    if (model_.config.is_eos(step.id))
        generation_.stop = Stop::eos;
    else if (made == max_tokens_)
        generation_.stop = Stop::tokens;
    else if (static_cast<int>(generation_.token_ids.size()) >= model_.config.n_positions)
        generation_.stop = Stop::context;
    generation_.steps.push_back(std::move(step));
    return generation_.steps.back();
}

}  // namespace headscope
