// The batch's padding, the masks, the score scale and the options' words.
#include "headscope/compute/attention.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <string>
#include <tuple>

#include "headscope/base/error.h"
#include "headscope/model/model_description.h"

namespace headscope {

int Batch::T() const {
    size_t longest = 0;
    for (const auto& ids : token_ids) longest = std::max(longest, ids.size());
    return static_cast<int>(longest);
}

int Batch::S() const {
    size_t longest = 0;
    for (const auto& ids : source_ids) longest = std::max(longest, ids.size());
    return static_cast<int>(longest);
}

int32_t Batch::padded_id(int b, int t) const {
    const std::vector<int32_t>& ids = token_ids[b];
    return t < static_cast<int>(ids.size()) ? ids[t] : pad_id;
}

int32_t Batch::token_type(int b, int t) const {
    if (token_types.empty()) return 0;
    const std::vector<int32_t>& types = token_types[b];
    return t < static_cast<int>(types.size()) ? types[t] : 0;
}

bool operator==(const HeadRef& a, const HeadRef& b) { return a.layer == b.layer && a.head == b.head; }
bool operator<(const HeadRef& a, const HeadRef& b) { return std::tie(a.layer, a.head) < std::tie(b.layer, b.head); }
bool operator==(const ExpertRef& a, const ExpertRef& b) { return a.layer == b.layer && a.expert == b.expert; }
bool operator<(const ExpertRef& a, const ExpertRef& b) {
    return std::tie(a.layer, a.expert) < std::tie(b.layer, b.expert);
}

// lens_from is left out: it changes no key or value a prefix cache keeps.
bool operator==(const AttentionOptions& a, const AttentionOptions& b) {
    const auto fields = [](const AttentionOptions& o) {
        return std::tie(o.causal, o.padding_mask, o.n_head, o.scale, o.split, o.layers, o.capture_outputs,
                        o.sliding_window, o.window_both_ways, o.top_k, o.lens_k, o.new_rows_only, o.ablate, o.ablation,
                        o.ablate_experts, o.contributions);
    };
    return fields(a) == fields(b);
}

bool same_keys_and_values(const AttentionOptions& a, const AttentionOptions& b) {
    const auto fields = [](const AttentionOptions& o) {
        return std::tie(o.causal, o.padding_mask, o.n_head, o.scale, o.split, o.sliding_window, o.window_both_ways,
                        o.ablate, o.ablation, o.ablate_experts);
    };
    return fields(a) == fields(b);
}

void RowSummaries::assign(size_t rows) {
    for (std::vector<float>* field : {&entropy, &first_key, &previous_key, &max, &distance}) field->assign(rows, 0.f);
}

void RowSummaries::put(size_t at, const RowSummary& summary) {
    entropy[at] = summary.entropy;
    first_key[at] = summary.first_key;
    previous_key[at] = summary.previous_key;
    max[at] = summary.max;
    distance[at] = summary.distance;
}

RowSummary RowSummaries::at(size_t at) const {
    return {entropy[at], first_key[at], previous_key[at], max[at], distance[at]};
}

void RowSummaries::copy_rows(const RowSummaries& from, size_t from_at, size_t to_at, size_t n) {
    const std::vector<float>* sources[] = {&from.entropy, &from.first_key, &from.previous_key, &from.max,
                                           &from.distance};
    std::vector<float>* targets[] = {&entropy, &first_key, &previous_key, &max, &distance};
    for (int f = 0; f < 5; ++f) std::copy_n(sources[f]->data() + from_at, n, targets[f]->data() + to_at);
}

KeptRows::KeptRows(const Shape& kept_shape, int rows) : shape(kept_shape), capacity(rows) {
    const size_t per_slot_text = static_cast<size_t>(shape.slots) * shape.B * capacity;
    queries.resize(per_slot_text * shape.Qw);
    keys.resize(per_slot_text * shape.KVw);
    summaries.assign(shape.summaries ? per_slot_text * shape.NH : 0);
    covered.assign(shape.B, 0);
}

void KeptRows::copy_rows(const KeptRows& from, int b, int first, int to, int n) {
    if (n <= 0) return;
    const size_t rows = static_cast<size_t>(n);
    for (size_t slot = 0; slot < static_cast<size_t>(shape.slots); ++slot) {
        std::copy_n(from.queries.data() + from.row(slot, b, first) * shape.Qw, rows * shape.Qw,
                    queries.data() + row(slot, b, to) * shape.Qw);
        std::copy_n(from.keys.data() + from.row(slot, b, first) * shape.KVw, rows * shape.KVw,
                    keys.data() + row(slot, b, to) * shape.KVw);
        for (int h = 0; h < shape.NH && shape.summaries; ++h)
            summaries.copy_rows(from.summaries, from.summary_row(slot, b, h, first), summary_row(slot, b, h, to), rows);
    }
}

RowSummaries AttentionResult::row_summaries() const {
    RowSummaries dense;
    if (!has_summaries()) return dense;
    dense.assign(layers.size() * B * NH * T);
    for (size_t slot = 0; slot < layers.size(); ++slot)
        for (int b = 0; b < B; ++b) {
            const int own_from = tail ? tail_from[b] : T;
            for (int h = 0; h < NH; ++h) {
                const size_t at = ((slot * B + b) * NH + h) * T;
                dense.copy_rows(kept->summaries, kept->summary_row(slot, b, h, 0), at, static_cast<size_t>(own_from));
                if (tail)
                    dense.copy_rows(tail->summaries, tail->summary_row(slot, b, h, 0), at + own_from,
                                    static_cast<size_t>(T - own_from));
            }
        }
    return dense;
}

double AttentionResult::loss(int b) const {
    if (logprob_next.empty()) return std::nan("");  // a forward without predictions
    double sum = 0;
    int count = 0;
    for (int t = 0; t < T; ++t) {
        const float logprob = logprob_next[static_cast<size_t>(b) * T + t];
        if (std::isnan(logprob)) continue;
        sum -= logprob;
        ++count;
    }
    return count ? sum / count : std::nan("");
}

bool causal_allows(const AttentionOptions& options, int i, int j) { return !options.causal || j <= i; }

bool padding_allows(const AttentionOptions& options, int j, int length) { return !options.padding_mask || j < length; }

bool window_allows(const AttentionOptions& options, int i, int j) {
    return options.sliding_window <= 0 ||
           (j > i - options.sliding_window && (!options.window_both_ways || j < i + options.sliding_window));
}

int visible_begin(const AttentionOptions& options, int i) {
    return options.sliding_window > 0 ? std::max(0, i - options.sliding_window + 1) : 0;
}

int visible_end(const AttentionOptions& options, int i, int length, int T) {
    if (!padding_allows(options, i, length)) return 0;  // a pad query
    // Both masks allow a prefix of the keys: j < i + 1 and j < length; the window, j < i + W.
    const int end = std::min(options.causal ? i + 1 : T, options.padding_mask ? length : T);
    return options.sliding_window > 0 && options.window_both_ways ? std::min(end, i + options.sliding_window) : end;
}

bool attends(const AttentionOptions& options, int i, int j, int length, int T) {
    return j >= visible_begin(options, i) && j < visible_end(options, i, length, T);
}

int cross_visible_end(const AttentionOptions& options, int i, int target_length, int source_length, int S) {
    if (!options.padding_mask) return S;
    return i < target_length ? source_length : 0;
}

Scale own_scale(bool scaled_scores) { return scaled_scores ? Scale::head : Scale::none; }

float score_scale(Scale scale, const Config& config, int hs) {
    switch (scale) {
        case Scale::head: return config.attention_scale > 0 ? config.attention_scale : 1.f / std::sqrt(float(hs));
        case Scale::model: return 1.f / std::sqrt(static_cast<float>(config.n_embd));
        case Scale::none: return 1.f;
    }
    return 1.f;
}

bool parse_on_off(std::string_view option, std::string_view word) {
    static constexpr const char* off_on[] = {"off", "on"};
    return word_index(option, off_on, std::size(off_on), word) == 1;
}

Scale parse_scale(std::string_view word) { return parse_choice(scale_choices, word); }
Ablation parse_ablation(std::string_view word) { return parse_choice(ablation_choices, word); }
const char* to_string(Ablation ablation) { return word_of(ablation_choices, ablation); }
Maps parse_maps(std::string_view word) { return parse_choice(maps_choices, word); }
const char* to_string(Maps maps) { return word_of(maps_choices, maps); }

namespace {

// "A.B,A.B,..." as ascending unique {A, B}; errors name an item as `what` ("a head") of `form` ("LAYER.HEAD").
template <typename Ref>
std::vector<Ref> parse_pairs(std::string_view words, const char* what, const char* form) {
    std::vector<Ref> refs;
    if (words.empty()) return refs;
    size_t start = 0;
    while (start <= words.size()) {
        const size_t end = std::min(words.find(',', start), words.size());
        const std::string_view item = words.substr(start, end - start);
        const size_t dot = item.find('.');
        int first = 0, second = 0;
        const auto number = [&](size_t from, size_t to, int& value) {
            const auto [ptr, ec] = std::from_chars(item.data() + from, item.data() + to, value);
            return from < to && ec == std::errc() && ptr == item.data() + to;
        };
        if (dot == std::string_view::npos || !number(0, dot, first) || !number(dot + 1, item.size(), second))
            throw Error("'" + std::string(item) + "' is not " + what + " (expected " + form + ",...)");
        refs.push_back({first, second});
        start = end + 1;
    }
    std::sort(refs.begin(), refs.end());
    refs.erase(std::unique(refs.begin(), refs.end()), refs.end());
    return refs;
}

}  // namespace

std::vector<HeadRef> parse_heads(std::string_view words) { return parse_pairs<HeadRef>(words, "a head", "LAYER.HEAD"); }

std::vector<ExpertRef> parse_experts(std::string_view words) {
    return parse_pairs<ExpertRef>(words, "an expert", "LAYER.EXPERT");
}

Split parse_split(std::string_view word) { return parse_choice(split_choices, word); }

const char* to_string(Scale scale) { return word_of(scale_choices, scale); }

const char* to_string(Split split) { return word_of(split_choices, split); }

}  // namespace headscope
