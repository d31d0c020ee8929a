// What computes from the window's state (state/window_state.h), drawing
// nothing: the open model with its backend, the last finished compute of the
// state's texts and options, and the workers and caches behind it. The live
// forward, the head probes and a model being opened each run on a Worker
// (core's worker.h); another model replaces the open one when it is ready,
// while work still reading the old one keeps it alive through its shared_ptr.
#pragma once
#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "headscope/base/worker.h"
#include "headscope/compute/backend.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/generate.h"
#include "headscope/compute/live.h"
#include "headscope/inspect/heatmap.h"
#include "headscope/inspect/probes.h"
#include "headscope/model/model.h"
#include "session/comparison.h"
#include "session/job_progress.h"
#include "session/long_lens.h"
#include "session/long_maps.h"
#include "state/window_state.h"

namespace headscope {

// A generation from the batch's one text as made so far, each step one live
// worker job (Session::generate starts or goes on with one; typing, or any
// other recompute, ends it).
struct GenerationShown {
    int prompt_tokens = 0;              // the text's tokens before the first generated one
    std::vector<GenerationStep> steps;  // made so far; their tokens are appended to the text
    Stop stop = Stop::running;          // why the generator stopped; running: it can go on
    int remaining = 0;                  // steps still to make; 0: none asked
    int step = 0;                       // the step replayed, 0..steps.size()
    // The query row the maps end at and outline: the step-th generated token's (0: the prompt's last).
    int replayed_row() const { return prompt_tokens - 1 + step; }
};

// The maps the heads and model tabs draw, of the selected text: the shown
// forward's self-attention (every model's; an encoder–decoder's decoder's),
// or an encoder–decoder's encoder self-attention, or its cross-attention,
// whose queries are the target's tokens and keys the source's.
struct ShownMaps {
    const AttentionResult* result = nullptr;  // whose maps: the shown forward's, or its encoder's
    AttentionKind kind = AttentionKind::decoder;
    int rows = 0, cols = 0;                           // queries, keys (padded)
    int query_length = 0, key_length = 0;             // the selected text's
    const std::vector<int32_t>* query_ids = nullptr;  // the selected text's queries' tokens
    const std::vector<int32_t>* key_ids = nullptr;    // and its keys'
    bool sinks = false;    // each row leaves a share to the head's learned sink (gpt-oss's self-attention)
    int b = 0;             // the selected text's index in `result`
    bool patched = false;  // a patched run's (Comparison::PatchedRun): nothing more of it is computed
    int layers() const { return static_cast<int>(result->layers.size()); }
    const float* row(int slot, int b, int h, int i) const {
        return kind == AttentionKind::cross ? result->cross_row(slot, b, h, i) : result->row(slot, b, h, i);
    }
    // Whether query i sees key j under `options` (the layer's, Session::maps_options_at).
    bool visible(const AttentionOptions& options, int i, int j) const {
        if (kind == AttentionKind::cross) return j < cross_visible_end(options, i, query_length, key_length, cols);
        return attends(options, i, j, key_length, cols);
    }
};

// Whether `options` knock anything out of the forward (heads or experts):
// the intact model's predictions are then shown beside.
inline bool knocks_anything_out(const AttentionOptions& options) {
    return !options.ablate.empty() || !options.ablate_experts.empty();
}

// What the predictions and the lens say of a bare encoder, which has no head to predict with.
inline constexpr const char* no_head_message =
    "No predictions: this checkpoint has no masked-LM head (a bare encoder, as BertModel saves it).";

class Session {
public:
    // Computes for `state` (its texts: the default text when it has none),
    // which outlives the session. `wake` runs on a worker whenever one has
    // something new for the frame.
    Session(LoadedModel loaded, WindowState& state, std::function<void()> wake);

    const Model& model() const { return *open_->model; }
    std::shared_ptr<const Model> shared_model() const { return open_->model; }
    const Backend& backend() const { return *open_->backend; }
    const std::string& backend_reason() const { return open_->backend_reason; }
    // The device that computed `shown` (empty before the first compute), and why that one.
    const ComputedOn& computed_on() const { return shown.attention.computed_on; }
    std::string computed_on_reason() const { return device_reason(computed_on(), backend_reason()); }
    BackendChoice backend_choice() const { return open_->backend_choice; }
    const std::string& model_name() const { return open_->name; }
    double model_load_ms() const { return open_->load_ms; }
    const std::function<void()>& wake() const { return wake_; }
    bool busy() const { return live_.busy(); }
    // The live compute's progress: shown once it has run JobProgress::long_work, with Cancel.
    JobProgress& live_progress() { return live_progress_; }

    // Recomputes for the current texts and options (never waits), with the
    // open model's sliding window as sliding_window_on says.
    void submit();
    // Takes what the workers finished: true when `shown` changed. A refused
    // request (an empty text, a bad head count, ...) sets `message` and keeps
    // the last good maps; a text past the model's positions is cut to them
    // (shown.cuts). Also swaps in a model open_model finished loading.
    bool collect();

    // A long text's forward (long_maps.h) kept no map: what maps are computed
    // from; null when the shown forward has every map (a short text).
    // Null also while the rows are lent (rows_lent).
    const std::shared_ptr<const KeptMaps>& kept_maps() const { return kept_maps_; }
    bool long_text() const { return kept_maps_ != nullptr || rows_lent_; }
    // Whether the shown long text's kept rows are lent to the running forward
    // (an edit deeper than core's held_rows rewrites rows they read, and one
    // set is kept rather than two: PrefixCache::ask_for_rows): the views keep
    // what they last drew, and what needs the rows says it waits.
    bool rows_lent() const { return rows_lent_; }
    // Whether a compute has been shown: its maps, or a long text's summaries.
    bool computed() const { return !shown.attention.weights.empty() || long_text(); }
    // Computes `ask` of the long text on the map worker, unless it is the
    // one asked last; map_answer() is the newest map answered, null before one.
    void ask_map(const MapAsk& ask);
    const MapAnswer* map_answer() const { return map_answer_ ? &*map_answer_ : nullptr; }
    const std::optional<MapAsk>& asked_map() const { return asked_map_; }  // the last asked, for the exports
    bool map_pending() const { return map_worker_.busy(); }
    // A long text's logit lens of the selected text's positions [first, end), asked of its worker (long_lens.h).
    void ask_lens(int first, int end) { long_lens_.ask(kept_maps_, {state_.selected, first, end, lens_k}); }
    const LongLens& long_lens() const { return long_lens_; }

    // Appends `tokens` tokens to the text (the batch has one), chosen as
    // `sampling` says, one worker job each: the maps show the generation as it
    // grows. Goes on from the shown generation if there is one.
    void generate(const Sampling& sampling, int tokens);
    // Makes no more steps after the one running.
    void stop_generation() {
        if (generation) generation->remaining = 0;
    }
    bool generating() const { return generation && generation->remaining > 0; }
    // The options a generation's steps run with: the controls', without the lens and the contributions; a long
    // text's as its live forward runs (long_text_options: no map kept).
    AttentionOptions generation_options() const;
    // Whether the maps replay a generation: it has made a step.
    bool replaying() const { return generation && !generation->steps.empty(); }

    // Replaces the selected text with the text of the file at `path` (UTF-8,
    // any length: past the model's positions it is cut), recomputing; a file
    // that cannot be read sets `message` and changes nothing.
    void open_text_file(const std::string& path);

    // Runs the open model on the backend `choice` picks, recomputing. A
    // failure (cuda without a usable device) sets `model_message` and changes nothing.
    void choose_backend(BackendChoice choice);

    // Loads another model on a worker; the open one stays in use until the
    // new one is ready. A failure, or a cancel through load_progress(), sets
    // `model_message` and changes nothing.
    void open_model(const std::string& name_or_path);
    // The model being loaded; empty when none is.
    const std::string& loading() const { return loading_; }
    // How far the load has got (its bytes read), and its cancel.
    JobProgress& load_progress() { return load_progress_; }

    // What the live forward predicts besides the maps: the top predictions_k
    // next tokens at every position (the predictions panel) and, while the
    // logit-lens tab is shown, the top lens_k of every layer.
    static constexpr int predictions_k = 10, lens_k = 5;

    // The maps the heads and model tabs draw: `kind`'s where the model has
    // it (an encoder–decoder's), else the shown forward's; maps() attention_kind's.
    ShownMaps maps(AttentionKind kind) const;
    ShownMaps maps() const { return maps(state_.attention_kind); }
    // The options the shown compute used for `maps` in layer `layer` (the encoder's: encoder_options).
    AttentionOptions maps_options_at(const ShownMaps& maps, int layer) const;
    // Appends the most likely next token at the end of the selected text's
    // target (an encoder–decoder's greedy step), recomputing; or, changing
    // nothing, says why not (the end of the sequence, a token with no text).
    std::string extend_target();
    std::optional<GenerationShown> generation;  // the generation shown, if any

    LiveResult shown;  // the last good compute (weights empty before the first)
    // With heads or experts knocked out: the intact model's predictions of the shown
    // texts (the last layer's maps only), computed after the maps; empty until then.
    AttentionResult intact;
    std::vector<std::string> shown_texts;  // what `shown` was computed from
    AttentionOptions shown_options;        // and with
    uint64_t shown_generation = 0;         // changes whenever `shown` does
    std::string message;                   // why the last request was refused; empty when it was not
    std::string model_message;             // why the last open_model failed; empty when it did not

    // What heads do. The contributions (value-weighted maps, the logit
    // attribution, why a head attends, what it writes) are computed while
    // the effects tab is shown or the maps are shaded by value
    // (state.contributions_shown, state.shading), in the view + transpose
    // split (contributions_refusal says so otherwise).
    std::string contributions_refusal() const;
    // The state's `shading` as the shown compute can draw it (value-weighted once its norms are computed).
    MapShading shown_shading() const {
        const int second = shown_second_start();
        const MapShading& shading = state_.shading;
        return {shading.value_weighted && !shown.attention.value_weighted.empty(), shading.hide_first_key,
                second >= 0 ? shading.sentences : Sentences::all, std::max(second, 0)};
    }
    // Where the selected text's pair's second text starts in the shown tokens; -1: no pair.
    int shown_second_start() const {
        return state_.selected < static_cast<int>(shown.second_starts.size()) ? shown.second_starts[state_.selected]
                                                                              : -1;
    }
    // Knocks head (layer, head) of the shown split out of the forward, or
    // back in, and recomputes; a head count changed or another model brings every head back.
    void toggle_knock_out(int layer, int head);
    bool knocked_out(int layer, int head) const;
    // Knocks expert `expert` of layer `layer`'s mixture out of its router's
    // choices, or back in, and recomputes; else, changing nothing, says why
    // not (core's check: a layer keeps experts_per_token of its experts).
    // Another model brings every expert back.
    std::string toggle_expert_knock_out(int layer, int expert);
    void bring_experts_back();  // every expert, recomputing
    bool expert_knocked_out(int layer, int expert) const { return shown_options.knocks_out_expert({layer, expert}); }

    // The effects grid of the selected text under the options (with the heads
    // and experts already knocked out), of effects_of(), computed on a worker
    // on a CPU backend of its own, with progress and cancel; a failure sets
    // effects_message. By effects_method(): hybrid's estimate is shown at
    // once, and each exact value as it arrives.
    void compute_effects();
    EffectsMethod effects_method() const {
        return state_.effects_all_exact ? EffectsMethod::exact : EffectsMethod::hybrid;
    }
    // The state's effects_of where the model has experts; else heads.
    EffectsOf effects_of() const { return model().config.has_experts() ? state_.effects_of : EffectsOf::heads; }
    const HeadEffects* effects() const { return effects_ ? &effects_->grid : nullptr; }
    // Whether the grid shown was computed from the selected text and options
    // as they are now, of effects_of(), by effects_method().
    bool effects_current() const;
    bool effects_pending() const { return effects_worker_.busy(); }
    bool intact_pending() const { return intact_worker_.busy(); }
    JobProgress& effects_progress() { return effects_progress_; }
    std::string effects_message;

    // The compare text (a decoder's or an encoder's, without a pair; an
    // encoder–decoder's maps are not compared), computed with the live options.
    Comparison& comparison() { return comparison_; }
    const Comparison& comparison() const { return comparison_; }
    // Computes the state's compare text again (it changed); the live forward stays.
    void submit_compare();
    // Whether the compare text's tokens are as many as the selected text's: the diff view and patching need it.
    bool same_lengths() const { return comparison_.length() > 0 && comparison_.length() == length(state_.selected); }
    // Whether the heads and model tabs draw B - A: asked, of the same lengths,
    // a decoder's or an encoder's maps (not an encoder–decoder's), and no generation replayed.
    bool diff_shown() const {
        return state_.diff_shown && same_lengths() && !replaying() && !shown.attention.encoder && !patched_run_shown();
    }
    // The patched run the heads and model tabs and the predictions show in
    // place of the selected text's own: one was computed of the selected
    // text, the compare text and the options as they are, and no generation is replayed; else null.
    const Comparison::PatchedRun* patched_run_shown() const;
    // The diff's symmetric scale: the largest |B - A| over every map of the selected text.
    float diff_scale() const;

    // The model's own heads scored by core's probes, computed in the
    // background once per model; null until ready (or if they cannot be).
    const ProbeReport* probes() const { return probes_ ? &*probes_ : nullptr; }
    bool probes_pending() const { return probe_worker_.busy(); }
    // How far the scoring has got, and its cancel (the heads then go without scores).
    JobProgress& probe_progress() { return probe_progress_; }

    int heads_shown() const { return shown.attention.NH; }
    // The options the shown compute used in layer `layer` (the window is off in ModernBERT's global layers).
    AttentionOptions shown_options_at(int layer) const { return layer_options(model().config, shown_options, layer); }
    int length(int b) const { return static_cast<int>(shown.token_ids[b].size()); }
    // Text b's ids as shown, with its source (an encoder–decoder's) or its token types (a pair's).
    TextIds shown_ids(int b) const {
        const auto of = [b](const std::vector<std::vector<int32_t>>& rows) {
            return static_cast<size_t>(b) < rows.size() ? rows[b] : std::vector<int32_t>{};
        };
        return {shown.token_ids[b], of(shown.source_ids), of(shown.token_types)};
    }
    // The cut of the selected text's tokens (its source's when `source`) to the model's positions; null: none.
    const TextCut* cut_shown(bool source) const {
        for (const TextCut& cut : shown.cuts)
            if (cut.index == state_.selected && cut.source == source) return &cut;
        return nullptr;
    }
    // The query row the predictions panel shows: hovered, else a
    // generation's replayed row, else clicked, else an encoder's first mask
    // token, else the selected text's last token (what the model predicts next).
    int predicted_query() const;
    // Where text b's mask tokens ([MASK], <mask>) are, which an encoder fills.
    std::vector<int> mask_positions(int b) const;

private:
    // What is shown and chosen, which the session computes from and adds to:
    // the options a compute needs (the sliding window, the predictions, the
    // lens, the contributions), a generation's tokens to the text, a greedy
    // step to a target, a knocked-out head to the options, and a selection
    // kept within what another compute or model shows. The views reach it
    // through MainView, which owns it, never through the session.
    WindowState& state_;
    // Makes `loaded` the open model, recomputes and scores its heads.
    void install(LoadedModel loaded);

    std::function<void()> wake_;
    std::shared_ptr<LoadedModel> open_;  // shared with the live job that runs on it
    // The live forward's token prefixes, for the next keystroke to reuse;
    // written only by the live jobs, one at a time, and read by the long
    // lens's (under its lock: long_lens.h); a new model starts another.
    std::shared_ptr<PrefixCache> live_cache_;
    // The intact comparison's: a CPU backend of its own (the live forward may run at the same time) and its cache.
    std::shared_ptr<Backend> intact_backend_;
    std::shared_ptr<PrefixCache> intact_cache_;
    struct IntactShown {
        AttentionResult result;
        std::shared_ptr<const Model> model;
        std::vector<std::vector<int32_t>> token_ids;
        AttentionOptions options;
    };
    void submit_intact();
    // The generator a generation's step jobs share, made by the first of them.
    struct GenerationRun {
        std::vector<int32_t> prompt;  // empty: `text` tokenized (on the worker)
        std::string text;
        AttentionOptions options;
        Sampling sampling;
        // The live forward's cache, which the generator's forwards go through: its prompt reuses the rows
        // the live forward left, and a long text's lens reads the generated ones there.
        std::shared_ptr<PrefixCache> cache;
        std::optional<Generator> generator;  // last: it writes into `cache`
    };
    std::shared_ptr<GenerationRun> generation_run_;
    bool step_submitted_ = false;  // the live worker's newest job is a generation step
    void submit_step();
    // A finished step job's new tokens into `generation` and the text; the next step if more are asked.
    void take_step();
    std::vector<std::string> submitted_texts_;
    AttentionOptions submitted_options_;
    std::optional<ProbeReport> probes_;
    // An effects grid and what it was computed from: the model, the text and the options (effects_key).
    struct EffectsShown {
        HeadEffects grid;
        std::shared_ptr<const Model> model;
        std::string text;
        AttentionOptions options;
        EffectsMethod asked = EffectsMethod::exact;
    };
    std::optional<EffectsShown> effects_;
    // The running grid's newest stage (its estimate, then each exact value), handed over by its job.
    struct EffectsStage {
        std::mutex mutex;
        std::optional<EffectsShown> newest;
    };
    std::shared_ptr<EffectsStage> effects_stage_;
    std::string loading_;
    Comparison comparison_{wake_};
    struct DiffScaleKey {
        uint64_t shown = 0, compared = 0;
        int b = -1;
        bool operator==(const DiffScaleKey&) const = default;
    };
    mutable DiffScaleKey diff_scale_key_;  // what diff_scale_ was computed from
    mutable float diff_scale_ = 0;
    // Written by their jobs. A load shows its bytes read at once, the probes after JobProgress::long_work.
    JobProgress load_progress_{std::chrono::milliseconds(0)}, probe_progress_, live_progress_, effects_progress_;
    std::shared_ptr<const KeptMaps> kept_maps_;
    // Set by the live forward (live_cache_'s ask_for_rows), taken by collect(): the view lets go of the rows.
    std::shared_ptr<std::atomic<bool>> rows_asked_ = std::make_shared<std::atomic<bool>>(false);
    bool rows_lent_ = false;
    void lend_rows();
    std::optional<MapAsk> asked_map_;
    std::optional<MapAnswer> map_answer_;
    // A long text's shown forward's queries and keys, kept for its maps (collect).
    void keep_maps();
    // Last: their threads stop before the members their jobs' outcomes go to.
    Worker<LiveResult> live_{wake_};
    Worker<ProbeReport> probe_worker_{wake_};
    Worker<LoadedModel> load_worker_{wake_};
    Worker<EffectsShown> effects_worker_{wake_};
    Worker<IntactShown> intact_worker_{wake_};
    Worker<MapAnswer> map_worker_{wake_};
    LongLens long_lens_{wake_};
};

}  // namespace headscope
