#include "session/session.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <utility>

#include "headscope/base/clock.h"
#include "headscope/base/error.h"
#include "headscope/compute/forward.h"
#include "headscope/io/files.h"

namespace headscope {

Session::Session(LoadedModel loaded, WindowState& state_in, std::function<void()> wake)
    : state_(state_in), wake_(std::move(wake)) {
    if (state_.texts.empty()) state_.texts.push_back(default_text);
    install(std::move(loaded));
}

void Session::install(LoadedModel loaded) {
    // A model of the other kind (an encoder after a decoder, or the reverse)
    // starts with its own mask; the first is taken as following a decoder,
    // whose causal mask the options' defaults and settings assume.
    const bool was_causal = open_ ? open_->model->config.causal : true;
    if (loaded.model->config.causal != was_causal) state_.options.causal = loaded.model->config.causal;
    // Likewise its own scale (T5's none), when the model before had the other.
    const bool was_scaled = open_ ? open_->model->config.scaled_scores : true;
    if (loaded.model->config.scaled_scores != was_scaled)
        state_.options.scale = own_scale(loaded.model->config.scaled_scores);
    open_ = std::make_shared<LoadedModel>(std::move(loaded));
    comparison_.open(open_->model);
    live_cache_ = std::make_shared<PrefixCache>();
    live_cache_->ask_for_rows = [asked = rows_asked_, wake = wake_] {
        asked->store(true);
        if (wake) wake();
    };
    intact_cache_ = std::make_shared<PrefixCache>();
    intact_backend_ = std::shared_ptr<Backend>(make_cpu_backend());
    intact_backend_->load_weights(*open_->model);
    // Called on this thread and the lens's worker, which stops before live_ goes (the members' order).
    long_lens_.open(live_cache_, [this] { return live_.unanswered(); });
    intact = {};
    effects_.reset();
    effects_stage_.reset();
    shown = {};
    ++shown_generation;
    message.clear();
    probes_.reset();
    submit();
    probe_progress_.start();
    probe_worker_.submit([this, model = open_->model](std::stop_token stop) {
        return probe_validation(*model, 8, probe_progress_.reporter(std::move(stop)));
    });
}

void Session::submit() {
    generation.reset();  // typing, or any other change, ends a generation
    generation_run_.reset();
    step_submitted_ = false;
    state_.options.sliding_window = sliding_window(model().config, state_.sliding_window_on);
    const bool predicts = model().config.predicts();
    state_.options.top_k = predicts ? predictions_k : 0;
    state_.options.lens_k = state_.lens_shown && predicts ? lens_k : 0;
    state_.options.contributions =
        (state_.contributions_shown || state_.shading.value_weighted) && contributions_refusal().empty();
    state_.options.capture_outputs = state_.options.contributions;  // what a head writes reads its output
    live_progress_.start();
    const std::vector<std::string> pairs = model().config.is_encoder() ? state_.text_pairs : std::vector<std::string>{};
    const std::vector<std::string> targets_asked =
        model().config.is_encoder_decoder() ? state_.targets : std::vector<std::string>{};
    live_.submit(
        [this, open = open_, cache = live_cache_,
         request = LiveRequest{state_.texts, state_.options, pairs, targets_asked, true}](std::stop_token stop) {
            try {
                return compute_live(*open->backend, *open->model, long_text_request(*open->model, request), cache.get(),
                                    live_progress_.reporter(std::move(stop)));
            } catch (const Cancelled&) {  // the cache keeps the rows the forward reused (prefix_cache.h)
                throw Error("computing cancelled");
            }
        });
    submitted_texts_ = state_.texts;
    submitted_options_ = state_.options;
    submit_compare();
}

void Session::submit_compare() {
    const Config& config = model().config;
    comparison_.submit(state_.compare_text, config.is_encoder() ? state_.compare_pair : "",
                       config.is_encoder_decoder() ? state_.compare_target : "", state_.options);
}

float Session::diff_scale() const {
    const DiffScaleKey key{shown_generation, comparison_.generation(), state_.selected};
    if (key == diff_scale_key_) return diff_scale_;
    diff_scale_ = 0;
    const AttentionResult& a = shown.attention;
    for (int l = 0; same_lengths() && l < static_cast<int>(a.layers.size()); ++l)
        for (int h = 0; h < a.NH; ++h)
            diff_scale_ = std::max(diff_scale_, largest_difference(a, state_.selected, comparison_.attention(), 0,
                                                                   shown_options_at(l), l, h, length(state_.selected)));
    diff_scale_key_ = key;
    return diff_scale_;
}

ShownMaps Session::maps(AttentionKind kind) const {
    // The selected text's run, or the patched run shown in its place (its one text, of its own length).
    const Comparison::PatchedRun* run = patched_run_shown();
    const AttentionResult& att = run ? run->result : shown.attention;
    const int b = run ? 0 : state_.selected, texts = static_cast<int>(shown.token_ids.size());
    static const std::vector<int32_t> none;  // before the first compute, or a refused one
    const std::vector<int32_t>& target = run ? run->own.tokens : state_.selected < texts ? shown.token_ids[b] : none;
    const int T = att.T, length = static_cast<int>(target.size());
    const bool sinks = model().config.attention_sinks, patched = run != nullptr;
    const bool sourced = run ? !run->own.source.empty() : b < static_cast<int>(shown.source_ids.size());
    if (!att.encoder || !sourced || kind == AttentionKind::decoder)
        return {&att, AttentionKind::decoder, T, T, length, length, &target, &target, sinks, b, patched};
    const std::vector<int32_t>& source = run ? run->own.source : shown.source_ids[b];
    const int S = att.S, sources = static_cast<int>(source.size());
    if (kind == AttentionKind::encoder) {
        const AttentionResult* encoder = att.encoder.get();
        return {encoder, AttentionKind::encoder, S, S, sources, sources, &source, &source, false, b, patched};
    }
    return {&att, AttentionKind::cross, T, S, length, sources, &target, &source, false, b, patched};
}

const Comparison::PatchedRun* Session::patched_run_shown() const {
    const int b = state_.selected;
    if (replaying() || b >= static_cast<int>(shown.token_ids.size())) return nullptr;
    return comparison_.patched_run(shown_ids(b), shown_options);
}

AttentionOptions Session::maps_options_at(const ShownMaps& maps, int layer) const {
    return maps.kind == AttentionKind::encoder ? encoder_options(shown_options) : shown_options_at(layer);
}

std::string Session::extend_target() {
    const AttentionResult& att = shown.attention;
    if (!model().config.is_encoder_decoder() || att.top_k == 0 || state_.selected >= att.B)
        return "no prediction to append yet";
    const int32_t forced = forced_token(model().config, length(state_.selected));
    const int32_t next = forced >= 0 ? forced : att.predictions_at(state_.selected, length(state_.selected) - 1)[0].id;
    if (model().config.is_eos(next)) return "the decoder ends the target here (</s>)";
    const Tokenizer& tokenizer = model().tokenizer;
    // BART's <s>: its template puts it first in every target, so no text appends it alone.
    const std::vector<int32_t> template_only = tokenizer.encode_target("");
    if (length(state_.selected) == 1 && template_only.size() > 1 && next == template_only.front())
        return "the decoder's next token, " + tokenizer.token_bytes(next) +
               ", begins every target: type the target's first words after it";
    if (next >= tokenizer.vocab_size())  // T5's embedding has rows past its tokenizer's tokens
        return "the decoder's top token, id " + std::to_string(next) + ", is past the tokenizer's " +
               std::to_string(tokenizer.vocab_size()) + " tokens: it has no text to append";
    state_.targets.resize(state_.texts.size());
    state_.targets[state_.selected] += tokenizer.token_bytes(next);
    submit();
    return "";
}

std::string Session::contributions_refusal() const {
    if (model().config.is_encoder_decoder())
        return "the contributions are computed for decoders only, not yet through an encoder-decoder's cross-attention";
    if (std::string refusal = headscope::contributions_refusal(model().config); !refusal.empty()) return refusal;
    if (state_.options.split != Split::transpose)
        return "the naive view mixes tokens into heads: no head contributes alone";
    return "";
}

void Session::toggle_knock_out(int layer_in, int head_in) {
    const HeadRef head{layer_in, head_in};
    std::vector<HeadRef>& out = state_.options.ablate;
    const auto at = std::lower_bound(out.begin(), out.end(), head);
    if (at != out.end() && *at == head)
        out.erase(at);
    else
        out.insert(at, head);
    submit();
}

bool Session::knocked_out(int layer_in, int head_in) const { return shown_options.knocks_out({layer_in, head_in}); }

std::string Session::toggle_expert_knock_out(int layer_in, int expert_in) {
    const ExpertRef expert{layer_in, expert_in};
    AttentionOptions asked = state_.options;
    std::vector<ExpertRef>& out = asked.ablate_experts;
    const auto at = std::lower_bound(out.begin(), out.end(), expert);
    if (at != out.end() && *at == expert)
        out.erase(at);
    else
        out.insert(at, expert);
    try {
        check_expert_ablation(model().config, asked);
    } catch (const Error& e) {
        return e.what();
    }
    state_.options.ablate_experts = std::move(out);
    submit();
    return "";
}

void Session::bring_experts_back() {
    state_.options.ablate_experts.clear();
    submit();
}

namespace {

// What the effects grid depends on: the forward's options but what the grid sets itself.
AttentionOptions effects_key(AttentionOptions options) {
    options.top_k = options.lens_k = 0, options.contributions = options.capture_outputs = false;
    options.layers.clear();
    return options;
}

}  // namespace

void Session::compute_effects() {
    effects_message.clear();
    effects_progress_.start();
    effects_stage_ = std::make_shared<EffectsStage>();
    effects_worker_.submit([this, model = open_->model, text = state_.texts[state_.selected],
                            options = effects_key(state_.options), of = effects_of(), method = effects_method(),
                            stage = effects_stage_](std::stop_token stop) {
        std::unique_ptr<Backend> cpu = make_cpu_backend();  // the live forward keeps the open backend busy
        cpu->load_weights(*model);
        EffectsShown shown{{}, model, text, options, method};
        const auto hand_over = [&](const HeadEffects& grid) {
            {
                std::lock_guard lock(stage->mutex);
                stage->newest = EffectsShown{grid, model, text, options, method};
            }
            if (wake_) wake_();
        };
        cpu->head_effects(Batch{model->tokenizer.encode_texts({text}), model->config.pad_id()}, options, shown.grid, of,
                          effects_progress_.reporter(std::move(stop)), method, hand_over);
        return shown;
    });
}

bool Session::effects_current() const {
    return effects_ && effects_->model == open_->model && effects_->text == state_.texts[state_.selected] &&
           effects_->grid.of == effects_of() && effects_->options == effects_key(state_.options) &&
           effects_->asked == effects_method();
}

int Session::predicted_query() const {
    const int last = length(state_.selected) - 1;
    if (state_.hovered_query >= 0) return std::min(state_.hovered_query, last);
    if (replaying()) return std::min(generation->replayed_row(), last);
    if (state_.query >= 0) return std::min(state_.query, last);
    const std::vector<int> masks = mask_positions(state_.selected);
    return model().config.is_encoder() && !masks.empty() ? masks.front() : last;
}

std::vector<int> Session::mask_positions(int b) const {
    std::vector<int> masks;
    const Tokenizer& tokenizer = model().tokenizer;
    for (int t = 0; t < length(b); ++t) {
        const std::string token = tokenizer.token_bytes(shown.token_ids[b][t]);
        if (token == "[MASK]" || token == "<mask>") masks.push_back(t);
    }
    return masks;
}

void Session::open_text_file(const std::string& path) {
    try {
        state_.texts.at(state_.selected) = read_file(path, "the text file");
    } catch (const Error& e) {
        message = e.what();
        return;
    }
    submit();
}

void Session::choose_backend(BackendChoice choice) {
    model_message.clear();
    LoadedModel loaded;
    try {
        loaded = with_backend(*open_, choice);
    } catch (const Error& e) {
        model_message = e.what();
        return;
    }
    install(std::move(loaded));
}

void Session::open_model(const std::string& name_or_path) {
    if (!loading_.empty()) {  // one load at a time
        model_message = "still loading " + loading_ + ": open " + name_or_path + " again when it is done";
        return;
    }
    loading_ = name_or_path;
    model_message.clear();
    load_progress_.start();
    load_worker_.submit([this, name_or_path, choice = open_->backend_choice](std::stop_token stop) {
        return load_with_backend(name_or_path, choice, load_progress_.reporter(std::move(stop)));
    });
}

// With heads or experts knocked out, the intact model's predictions of the shown texts,
// on a CPU backend and prefix cache of their own, after the maps (a keystroke
// shows its maps as soon as they are computed).
void Session::submit_intact() {
    intact = {};
    if (!knocks_anything_out(shown_options) || shown_options.top_k == 0 || replaying()) return;
    AttentionOptions options = shown_options;
    options.ablate.clear(), options.ablate_experts.clear(), options.lens_k = 0,
                                                            options.contributions = options.capture_outputs = false;
    options.layers = {model().config.n_layer - 1};
    intact_worker_.submit([backend = intact_backend_, cache = intact_cache_, model = open_->model,
                           ids = shown.token_ids, sources = shown.source_ids, options](std::stop_token) {
        IntactShown out{{}, model, ids, options};
        Batch batch{ids, model->config.pad_id()};
        batch.source_ids = sources;
        backend->forward(batch, options, out.result, cache.get());
        return out;
    });
}

bool Session::collect() {
    if (rows_asked_->exchange(false)) lend_rows();
    bool compared = comparison_.collect();
    compared = long_lens_.collect() || compared;
    if (std::optional<Worker<IntactShown>::Outcome> done = intact_worker_.take()) {
        // Only for what is shown now (a later keystroke's maps may have come first).
        const IntactShown& got = done->result;
        if (done->error.empty() && got.model == open_->model && got.token_ids == shown.token_ids &&
            !knocks_anything_out(got.options) && knocks_anything_out(shown_options))
            intact = std::move(done->result.result);
    }
    if (std::optional<Worker<ProbeReport>::Outcome> scored = probe_worker_.take())
        if (scored->error.empty()) probes_ = std::move(scored->result);  // else labels without scores
    if (effects_stage_) {
        std::lock_guard lock(effects_stage_->mutex);
        std::optional<EffectsShown>& newest = effects_stage_->newest;
        if (newest && newest->model == open_->model) effects_ = std::move(newest);
        newest.reset();
    }
    if (std::optional<Worker<EffectsShown>::Outcome> grid = effects_worker_.take()) {
        effects_stage_.reset();  // a stage taken after the outcome would be older than it
        if (grid->error.empty()) {
            if (grid->result.model == open_->model) effects_ = std::move(grid->result);  // else another model's
        } else
            effects_message = effects_progress_.cancelled() ? "the effects grid was cancelled" : grid->error;
    }
    if (std::optional<Worker<LoadedModel>::Outcome> opened = load_worker_.take()) {
        const std::string name = std::exchange(loading_, std::string());
        if (!opened->error.empty()) {
            model_message = load_progress_.cancelled()
                                ? "cancelled opening " + name + "; " + model_name() + " stays open"
                                : "cannot open the model: " + opened->error;
            return false;
        }
        model_message.clear();  // a "still loading" note is answered
        // Keep the options that still mean something for the new model.
        const Config& config = opened->result.model->config;
        if (state_.options.n_head &&
            (!accepts_head_count(config, state_.options.n_head) || state_.options.n_head == config.n_head))
            state_.options.n_head = 0;
        state_.layer = std::min(state_.layer, config.n_layer - 1);
        state_.options.ablate.clear();  // the other model's heads and experts
        state_.options.ablate_experts.clear();
        install(std::move(opened->result));
        return true;
    }
    if (std::optional<Worker<MapAnswer>::Outcome> map = map_worker_.take())
        if (map->error.empty() && asked_map_ == map->result.ask) map_answer_ = std::move(map->result);
    std::optional<Worker<LiveResult>::Outcome> computed = live_.take();
    if (!computed) return compared;
    if (!computed->error.empty()) {
        message = computed->error;
        stop_generation();
        if (step_submitted_ && !replaying()) generation.reset();  // its first step failed: nothing to show
        return false;
    }
    message.clear();
    shown = std::move(computed->result);
    shown_texts = submitted_texts_;  // an outcome always answers the newest request
    shown_options = submitted_options_;
    ++shown_generation;
    keep_maps();
    if (step_submitted_) take_step();
    submit_intact();
    state_.selected = std::min(state_.selected, static_cast<int>(shown.token_ids.size()) - 1);
    state_.layer = std::min(state_.layer, maps().layers() - 1);
    state_.head = std::min(state_.head, shown.attention.NH - 1);
    return true;
}

// The view's hold on the long text's kept rows goes (Session::rows_lent);
// the map and the lens asked last may finish first: the forward waits.
void Session::lend_rows() {
    if (!kept_maps_) return;
    rows_lent_ = true;
    kept_maps_.reset();
    shown.attention.kept.reset(), shown.attention.tail.reset();
    asked_map_.reset();  // the last map drawn stays drawn
}

void Session::keep_maps() {
    rows_lent_ = false;
    asked_map_.reset();
    map_answer_.reset();
    kept_maps_ = headscope::keep_maps(open_->model, shown, shown_options);
    if (kept_maps_)
        shown_options = kept_maps_->options;
    else
        long_lens_.forget();  // its cache holds a long text's keys and values
}

void Session::ask_map(const MapAsk& ask) {
    if (!kept_maps_ || asked_map_ == ask) return;
    asked_map_ = ask;
    map_worker_.submit([kept = kept_maps_, ask](std::stop_token) { return compute_map(*kept, ask); });
}

}  // namespace headscope
