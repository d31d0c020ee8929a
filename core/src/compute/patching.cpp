// What activation patching asks and how its cells read (patching.h): the
// request's checks, the fraction a patch restores or destroys, and the words
// of the command line.
#include "headscope/compute/patching.h"

#include <algorithm>
#include <string>

#include "headscope/base/error.h"
#include "headscope/model/model_description.h"

namespace headscope {

bool operator==(const PatchCell& a, const PatchCell& b) {
    return a.kind == b.kind && a.layer == b.layer && a.index == b.index && a.stack == b.stack;
}

double patched_fraction(PatchDirection direction, double clean, double corrupted, double patched) {
    const double moved = direction == PatchDirection::denoise ? patched - corrupted : clean - patched;
    return moved == 0 ? 0.0 : moved / (clean - corrupted);  // 0, not -0, where the patch changes nothing
}

int first_changed_row(const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupted,
                      const AttentionOptions& options, const PatchRequest& request) {
    const int first =
        std::min(static_cast<int>(std::mismatch(clean.begin(), clean.end(), corrupted.begin()).first - clean.begin()),
                 static_cast<int>(clean.size()) - 1);
    const bool mean_knock_out = options.ablation == Ablation::mean && !options.ablate.empty();
    const bool read_before = request.metric != PatchMetric::loss && request.position < first;
    return options.causal && !mean_knock_out && !read_before ? first : 0;
}

namespace {

void check_token(const Config& config, int32_t id, const char* what) {
    if (id < 0 || id >= config.vocab_size)
        throw Error(std::string("the ") + what + " token " + (id < 0 ? "is not given" : std::to_string(id) + " is") +
                    (id < 0 ? "" : " outside the vocabulary of " + std::to_string(config.vocab_size)));
}

}  // namespace

void check_patch_texts(const Config& config, const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupted) {
    if (!config.predicts()) throw Error("patching measures the predictions, and this checkpoint has no output head");
    if (clean.size() != corrupted.size())
        throw Error(
            "patching copies activations position by position, so both texts need the same length: the clean "
            "text has " +
            std::to_string(clean.size()) + " tokens, the corrupted " + std::to_string(corrupted.size()));
}

void check_patch_sources(const std::vector<int32_t>& clean, const std::vector<int32_t>& corrupted) {
    if (clean.size() != corrupted.size())
        throw Error(
            "patching copies the encoder's activations position by position, so both sources need the same length: "
            "the clean source has " +
            std::to_string(clean.size()) + " tokens, the corrupted " + std::to_string(corrupted.size()));
}

void check_patched_difference(PatchMetric metric, double clean, double corrupted) {
    if (!(clean != corrupted))
        throw Error(std::string("the clean and the corrupted text give the same ") +
                    patch_metric_choices.labels[static_cast<size_t>(metric)] + " (" + std::to_string(clean) +
                    "): there is no difference for a patch to restore");
}

std::vector<PatchStack> patch_stacks(const Config& config, PatchKind kind) {
    if (!config.is_encoder_decoder()) return {PatchStack::own};
    if (kind == PatchKind::heads || kind == PatchKind::pattern)
        return {PatchStack::encoder, PatchStack::decoder, PatchStack::cross};
    return {PatchStack::encoder, PatchStack::decoder};
}

std::string patch_grid_name(PatchKind kind, PatchStack stack) {
    const std::string word = to_string(kind);
    return stack == PatchStack::own ? word : std::string(word_of(patch_stack_choices, stack)) + "_" + word;
}

PatchRequest checked_patch_request(const Config& config, const std::vector<int32_t>& clean,
                                   const std::vector<int32_t>& corrupted, PatchRequest request) {
    check_patch_texts(config, clean, corrupted);
    const int T = static_cast<int>(clean.size());
    if (request.metric == PatchMetric::loss && config.is_encoder())
        throw Error(
            "the loss reads each next token, which an encoder does not predict: its masked-language-model "
            "logits are measured at a position (a logit difference or a log-probability)");
    if (T < 1 || (request.metric == PatchMetric::loss && T < 2))
        throw Error("the " + std::string(to_string(request.metric)) + " metric needs texts of at least " +
                    (request.metric == PatchMetric::loss ? "two tokens" : "one token"));
    if (request.metric != PatchMetric::loss) {
        if (request.position == -1) request.position = T - 1;
        if (request.position < 0 || request.position >= T)
            throw Error("position " + std::to_string(request.position) + " is outside the texts' " + std::to_string(T) +
                        " tokens (0.." + std::to_string(T - 1) + ")");
        check_token(config, request.answer, "answer");
    }
    if (request.metric == PatchMetric::logit_diff) {
        check_token(config, request.wrong, "wrong");
        if (request.answer == request.wrong)
            throw Error("the answer and the wrong token are the same token: their logit difference is always 0");
    }
    if (request.kinds.empty()) throw Error("no component to patch was asked for");
    std::vector<PatchKind> kinds = request.kinds;
    std::sort(kinds.begin(), kinds.end());
    if (std::adjacent_find(kinds.begin(), kinds.end()) != kinds.end())
        throw Error("a component to patch is asked for twice");
    return request;
}

PatchMetric parse_patch_metric(std::string_view word) { return parse_choice(patch_metric_choices, word); }

PatchDirection parse_patch_direction(std::string_view word) { return parse_choice(patch_direction_choices, word); }

std::vector<PatchKind> parse_patch_kinds(std::string_view words) {
    std::vector<PatchKind> kinds;
    size_t start = 0;
    while (start <= words.size()) {
        const size_t end = std::min(words.find(',', start), words.size());
        kinds.push_back(parse_choice(patch_kind_choices, words.substr(start, end - start)));
        start = end + 1;
    }
    std::sort(kinds.begin(), kinds.end());
    kinds.erase(std::unique(kinds.begin(), kinds.end()), kinds.end());
    return kinds;
}

const char* to_string(PatchMetric metric) { return word_of(patch_metric_choices, metric); }

const char* to_string(PatchDirection direction) { return word_of(patch_direction_choices, direction); }

const char* to_string(PatchKind kind) { return word_of(patch_kind_choices, kind); }

}  // namespace headscope
