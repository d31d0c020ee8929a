// The options of a forward: see forward_options.h.
#include "state/forward_options.h"

#include "headscope/base/error.h"
#include "state/word_option.h"

namespace headscope {

void add_forward_options(CLI::App* app, const ForwardOptionTargets& to) {
    add_word_option(
        app, "--causal", to.attention.causal, "on|off",
        [](std::string_view word) { return parse_on_off("causal mask", word); },
        "the causal mask (default: the model's own, on for a decoder, off for an encoder)");
    add_word_option(
        app, "--padding-mask", to.attention.padding_mask, "on|off",
        [](std::string_view word) { return parse_on_off("padding mask", word); }, "the padding mask");
    add_word_option(
        app, "--sliding-window", to.sliding_window, "on|off",
        [](std::string_view word) { return parse_on_off("sliding window", word); },
        "the model's sliding window, when it has one (default on)");
    app->add_option("--heads", to.heads,
                    "re-split into N query heads (N a multiple of the heads sharing a key/value head, dividing "
                    "the query width)");
    add_word_option(app, "--scale", to.attention.scale, join_words(scale_choices, "|"), parse_scale,
                    "1/sqrt(head size), 1/sqrt(C), 1 (default: the model's own, none for T5)");
    add_word_option(app, "--split", to.attention.split, join_words(split_choices, "|"), parse_split,
                    "how Q, K and V are split into heads");
    add_backend_option(app, to.backend);
}

void add_ablation_options(CLI::App* app, AblationWords& words, Ablation& mode) {
    app->add_option("--ablate", words.heads, "knock heads out of the forward: LAYER.HEAD,... (heads of the split)");
    add_word_option(app, "--ablate-mode", mode, join_words(ablation_choices, "|"), parse_ablation,
                    "what a knocked-out head's output becomes: zero (the default), or its mean over the text");
    app->add_option("--ablate-expert", words.experts,
                    "knock experts out of their layers' choices: LAYER.EXPERT,... (repeatable); each token takes "
                    "the next expert in one's place")
        ->type_name("L.E,...")
        ->allow_extra_args(false);
}

void parse_ablation_words(const AblationWords& words, AttentionOptions& options) {
    try {
        options.ablate = parse_heads(words.heads);
    } catch (const Error& e) {
        throw Error(std::string("--ablate: ") + e.what());
    }
    std::string experts;  // each --ablate-expert's list, joined
    for (const std::string& list : words.experts) experts += (experts.empty() ? "" : ",") + list;
    try {
        options.ablate_experts = parse_experts(experts);
    } catch (const Error& e) {
        throw Error(std::string("--ablate-expert: ") + e.what());
    }
}

void add_backend_option(CLI::App* app, BackendChoice& backend, const std::string& help) {
    add_word_option(app, "--backend", backend, join_words(backend_choices, "|"), parse_backend_choice, help);
}

}  // namespace headscope
