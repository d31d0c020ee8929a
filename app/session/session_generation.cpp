// The session's generation (session.h): a generator on the live worker, a
// step a job, each step's token added to the text as it comes.
#include <algorithm>
#include <utility>

#include "headscope/base/clock.h"
#include "session/session.h"

namespace headscope {

AttentionOptions Session::generation_options() const {
    AttentionOptions o = state_.options;
    o.sliding_window = sliding_window(model().config, state_.sliding_window_on);
    o.top_k = predictions_k;
    o.lens_k = 0;
    o.contributions = o.capture_outputs = false;  // a step's maps, not what heads do: each step reuses the last
    return long_text() ? long_text_options(o) : o;
}

void Session::generate(const Sampling& sampling, int tokens) {
    if (generating() || state_.texts.size() != 1) return;
    const bool same_sampling = generation_run_ && generation_run_->sampling.temperature == sampling.temperature &&
                               generation_run_->sampling.top_k == sampling.top_k &&
                               generation_run_->sampling.top_p == sampling.top_p &&
                               generation_run_->sampling.seed == sampling.seed;
    // The generator goes on where it can; else a new one starts from every token so far (or the text).
    if (!generation || !same_sampling || generation->stop != Stop::running) {
        auto run = std::make_shared<GenerationRun>();
        run->sampling = sampling;
        run->options = generation_options();
        run->cache = live_cache_;
        if (generation)
            run->prompt = shown.token_ids[0];
        else
            run->text = state_.texts[0];
        generation_run_ = std::move(run);
    }
    if (!generation) generation.emplace();
    generation->remaining = tokens;
    submit_step();
}

void Session::submit_step() {
    live_progress_.start();  // a step is one token's work: no bar, and none left from a compute before
    live_.submit([open = open_, run = generation_run_](std::stop_token) {
        const auto start = Clock::now();
        const Model& model = *open->model;
        if (!run->generator)
            run->generator.emplace(
                *open->backend, model, run->prompt.empty() ? model.tokenizer.encode_texts({run->text})[0] : run->prompt,
                run->options, run->sampling, std::min(model.config.n_positions, max_generated_tokens),
                std::vector<int32_t>{}, run->cache.get());
        Generator& generator = *run->generator;
        if (generator.generation().stop == Stop::running) generator.step();
        LiveResult result;
        result.token_ids = {generator.generation().token_ids};
        result.attention = generator.result();
        result.compute_ms = ms_since(start);
        return result;
    });
    step_submitted_ = true;
    submitted_texts_ = state_.texts;
    submitted_options_ = generation_run_->options;
}

void Session::take_step() {
    // The worker is idle: the step's outcome answered the newest job.
    const Generation& made = generation_run_->generator->generation();
    GenerationShown& g = *generation;
    if (g.steps.empty()) g.prompt_tokens = static_cast<int>(made.prompt_ids.size());
    const bool following = g.step == static_cast<int>(g.steps.size());
    // This generator's steps come after those of the runs before it.
    const size_t before = made.prompt_ids.size() - static_cast<size_t>(g.prompt_tokens);
    for (size_t i = g.steps.size() - before; i < made.steps.size(); ++i) {
        state_.texts[0] += made.steps[i].token;
        g.steps.push_back(made.steps[i]);
    }
    if (following) g.step = static_cast<int>(g.steps.size());
    g.stop = made.stop;
    g.remaining = made.stop == Stop::running ? g.remaining - 1 : 0;
    shown_texts = state_.texts;
    if (g.remaining > 0) submit_step();
}

}  // namespace headscope
