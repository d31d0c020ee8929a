// What the window shows and what the user has chosen, as plain data: the
// batch of texts, the options the controls set, the selected map and query,
// what the mouse is over, which analyses are shown. The session computes
// from it (session/session.h); the views draw from both.
#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "headscope/base/choices.h"
#include "headscope/compute/attention.h"
#include "headscope/compute/head_effects.h"
#include "headscope/compute/patching.h"
#include "headscope/inspect/heatmap.h"

namespace headscope {

// Which of an encoder–decoder's three attentions the heads and model tabs draw.
enum class AttentionKind { decoder, encoder, cross };
inline constexpr Choices<AttentionKind, 3> attention_kind_choices = {
    "attention",
    {"decoder", "encoder", "cross"},
    {"decoder self-attention", "encoder self-attention", "cross-attention"}};

// The text a session opens with when it is given none.
inline constexpr const char* default_text = "The cat sat on the mat because it was soft.";

// What the patching tab computes: core's exact patching (patching.h), the
// attribution estimate (backward.h), or both, side by side.
enum class PatchMethod { exact, attribution, both };
inline constexpr Choices<PatchMethod, 3> patch_method_choices = {
    "method", {"exact", "attribution", "both"}, {"exact", "attribution estimate", "exact and estimate"}};

// What the patching tab asks of core's patching, the selected text the
// clean run and the compare text the corrupted one.
struct PatchChoices {
    PatchMethod method = PatchMethod::exact;
    PatchMetric metric = PatchMetric::logit_diff;
    int32_t answer = -1, wrong = -1;  // token ids; -1: not chosen (the tab offers the two runs' top tokens)
    int position = -1;                // where logit_diff and logprob read; -1: the last token
    PatchDirection direction = PatchDirection::denoise;
    bool kinds[4] = {true, true, true, true};  // patch_kind_choices' order: heads, residual, MLPs, patterns
    PatchStack stack = PatchStack::decoder;    // an encoder–decoder's grids shown: encoder, decoder or cross
};

// The stacks an encoder–decoder's patching tab shows the grids of (PatchChoices::stack): core's PatchStack less `own`,
// their words and labels patch_stack_choices' from the second on.
inline constexpr const char* shown_patch_stack_labels[] = {patch_stack_choices.labels[1], patch_stack_choices.labels[2],
                                                           patch_stack_choices.labels[3]};
// A stack shown by its word (encoder, decoder or cross: --patch-stack, the settings file); throws Error naming the
// word.
inline PatchStack parse_shown_patch_stack(std::string_view word) {
    return static_cast<PatchStack>(1 + word_index("stack shown", patch_stack_choices.words + 1, 3, word));
}

struct WindowState {
    std::vector<std::string> texts = {};  // the batch, padded to the longest; never empty once a session has opened
    // An encoder's second text of each pair ("": none), as texts; a decoder's stay empty.
    std::vector<std::string> text_pairs = {};
    // An encoder–decoder's target of each text (what the decoder has produced
    // so far, after its start token), as texts, which are its sources.
    std::vector<std::string> targets = {};
    AttentionOptions options = {};  // as the controls say now
    bool sliding_window_on = true;  // the model's own sliding window, when it has one: options.sliding_window
    AttentionKind attention_kind = AttentionKind::cross;  // an encoder–decoder's maps shown
    int selected = 0;                                     // the text the views show
    int layer = 0, head = 0;                              // the selected map
    int query = -1;                             // the query row clicked (or --query); -1: the text's last token
    int hovered_query = -1;                     // the query row under the mouse this frame; -1: none
    int hovered_layer = -1, hovered_head = -1;  // the map under the mouse this frame; -1: none
    // A long text's query rows last on screen, [begin, end): the tokens
    // tab's lines in view, or the heads tab's zoomed map's rows (--rows);
    // the lens shows positions there. Empty: none yet, or the whole map.
    int rows_shown_begin = 0, rows_shown_end = 0;
    bool lens_shown = false;  // the logit-lens tab is open: options.lens_k
    // The contributions are computed while the effects tab is shown or the maps are shaded by value.
    bool contributions_shown = false;
    // What the effects grid knocks out in turn: each head, or each expert of a mixture (Session::effects_of).
    EffectsOf effects_of = EffectsOf::heads;
    // The effects grid's every cell exact (its knock-out run), not the estimate refined by the largest exact.
    bool effects_all_exact = false;
    MapShading shading = {};  // how the heads and model tabs shade their maps
    // The "compare with" text (B) beside the selected one (A), an
    // encoder–decoder's source with its target compare_target, an encoder's
    // with its pair's second text compare_pair ("": none); "": none.
    std::string compare_text = {};
    std::string compare_target = {};
    std::string compare_pair = {};
    // The heads and model tabs draw B - A of every map (when both have the same token count).
    bool diff_shown = false;
    PatchChoices patch = {};
};

}  // namespace headscope
