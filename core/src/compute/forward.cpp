// What every forward shares: see forward.h.
#include "headscope/compute/forward.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "headscope/base/error.h"
#include "headscope/compute/attention_maps.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/matmul.h"

namespace headscope {

HeadSplit head_split(const Config& config, int n_head) {
    const HeadSplit own{config.n_head, config.kv_heads(), config.head_size()};
    if (!n_head) return own;
    if (config.positions == Positions::relative && n_head != own.NH)
        throw Error("this model learned a position bias for each of its " + std::to_string(own.NH) +
                    " heads: they cannot be re-split into " + std::to_string(n_head));
    if (!config.rope.long_divisors.empty() && n_head != own.NH)
        throw Error("this model's LongRoPE factors are one per pair of its heads' rotary dims: its " +
                    std::to_string(own.NH) + " heads cannot be re-split into " + std::to_string(n_head));
    if (config.attention_sinks && n_head != own.NH)
        throw Error("this model learned a sink logit for each of its " + std::to_string(own.NH) +
                    " heads: they cannot be re-split into " + std::to_string(n_head));
    const int group = own.group(), width = own.q_width();
    if (n_head <= 0 || width % n_head != 0) {
        // GPT-2's words when the query width is C: "does not divide C".
        const std::string what = width == config.n_embd ? "C = " : "the query width NH x hs = ";
        throw Error("head count " + std::to_string(n_head) + " does not divide " + what + std::to_string(width));
    }
    if (n_head % group != 0)
        throw Error("head count " + std::to_string(n_head) + " is not a multiple of " + std::to_string(group) +
                    ", the query heads that share each key/value head");
    return {n_head, n_head / group, width / n_head};
}

AttentionOptions layer_options(const Config& config, const AttentionOptions& options, int layer) {
    AttentionOptions at = options;
    if (!config.windowed(layer)) at.sliding_window = 0;
    at.window_both_ways = config.is_encoder();  // an encoder's window reaches both ways; a decoder's back
    return at;
}

AttentionOptions encoder_options(const AttentionOptions& options) {
    AttentionOptions own = {};
    own.causal = false;
    own.padding_mask = options.padding_mask;
    own.n_head = options.n_head;
    own.scale = options.scale;
    own.split = options.split;
    return own;
}

Rope layer_rope(const Config& config, int layer) {
    Rope rope = config.rope;
    if (config.local_rope_theta > 0 && config.windowed(layer)) {  // Gemma 3's local rope has no rope_scaling
        rope.theta = config.local_rope_theta;
        rope.linear_factor = 1;
    }
    return rope;
}

int head_count(const Config& config, int n_head) { return head_split(config, n_head).NH; }

// head_split's two rules, as a list.
std::vector<int> head_counts(const Config& config) {
    const HeadSplit own = head_split(config, 0);
    if (config.positions == Positions::relative || !config.rope.long_divisors.empty() || config.attention_sinks)
        return {own.NH};
    std::vector<int> counts;
    for (int n = own.group(); n <= own.q_width(); n += own.group())
        if (own.q_width() % n == 0) counts.push_back(n);
    return counts;
}

bool accepts_head_count(const Config& config, int n_head) {
    const std::vector<int> counts = head_counts(config);
    return std::find(counts.begin(), counts.end(), n_head) != counts.end();
}

bool long_rope(const Rope& rope, int T) { return !rope.long_divisors.empty() && T > rope.long_after; }

int rope_dims(const Rope& rope, int hs) { return static_cast<int>(hs * rope.fraction) / 2 * 2; }

RopeTable rope_table(const Rope& rope, int hs, int T, int first, int text_length) {
    RopeTable table;
    table.dims = rope_dims(rope, hs);
    table.first = first;
    table.adjacent_pairs = rope.adjacent_pairs;
    const int half = table.dims / 2;
    // inv_freq as Hugging Face's default rope: 1 / theta^(2d / dims), in float32.
    std::vector<float> inv_freq(half);
    for (int d = 0; d < half; ++d)
        inv_freq[d] = 1.f / std::pow(rope.theta, static_cast<float>(2 * d) / static_cast<float>(table.dims));
    const bool long_factors = long_rope(rope, text_length > 0 ? text_length : T);
    const std::vector<float>& divisors = long_factors ? rope.long_divisors : rope.frequency_divisors;
    for (size_t d = 0; d < divisors.size() && d < inv_freq.size(); ++d) inv_freq[d] /= divisors[d];
    if (rope.linear_factor != 1)
        for (float& f : inv_freq) f /= rope.linear_factor;
    if (rope.factor > 0) {  // Llama 3: long wavelengths slowed by `factor`, a smooth blend between
        const float low_wavelen = rope.original_max_positions / rope.low_freq_factor;
        const float high_wavelen = rope.original_max_positions / rope.high_freq_factor;
        for (float& f : inv_freq) {
            const float wavelen = 2 * static_cast<float>(M_PI) / f;
            if (wavelen > low_wavelen) {
                f /= rope.factor;
            } else if (wavelen >= high_wavelen) {
                const float smooth = (rope.original_max_positions / wavelen - rope.low_freq_factor) /
                                     (rope.high_freq_factor - rope.low_freq_factor);
                f = (1 - smooth) * f / rope.factor + smooth * f;
            }
        }
    }
    table.cos.resize(static_cast<size_t>(T - first) * half);
    table.sin.resize(table.cos.size());
    for (int t = first; t < T; ++t)
        for (int d = 0; d < half; ++d) {
            const float angle = static_cast<float>(t) * inv_freq[d];  // float32, as HF's matmul of the two
            table.cos[static_cast<size_t>(t - first) * half + d] = std::cos(angle) * rope.cos_sin_scale;
            table.sin[static_cast<size_t>(t - first) * half + d] = std::sin(angle) * rope.cos_sin_scale;
        }
    return table;
}

void apply_rope(const RopeTable& table, float* x, int first_position, int rows, int stride) {
    const int half = table.dims / 2;
    for (int r = 0; r < rows; ++r) {
        const int t = first_position + r;
        float* row = x + static_cast<size_t>(r) * stride;
        const float* cos = table.cos.data() + static_cast<size_t>(t - table.first) * half;
        const float* sin = table.sin.data() + static_cast<size_t>(t - table.first) * half;
        const int step = table.adjacent_pairs ? 2 : 1, partner = table.adjacent_pairs ? 1 : half;
        for (int d = 0; d < half; ++d) {  // rotate-half: dims d and d + half are a pair; else 2d and 2d + 1
            float* a = row + d * step;
            const float x = a[0], y = a[partner];
            a[0] = x * cos[d] - y * sin[d];
            a[partner] = y * cos[d] + x * sin[d];
        }
    }
}

void check_ablation(const Config& config, const AttentionOptions& options) {
    const int NH = head_count(config, options.n_head);
    for (size_t i = 0; i < options.ablate.size(); ++i) {
        const HeadRef& h = options.ablate[i];
        if (h.layer < 0 || h.layer >= config.n_layer || h.head < 0 || h.head >= NH)
            throw Error("head " + std::to_string(h.layer) + "." + std::to_string(h.head) +
                        " to knock out is not one of the model's (layers 0.." + std::to_string(config.n_layer - 1) +
                        ", heads 0.." + std::to_string(NH - 1) + ")");
        if (i > 0 && !(options.ablate[i - 1] < h)) throw Error("the heads to knock out must be ascending and unique");
    }
}

void check_expert_ablation(const Config& config, const AttentionOptions& options) {
    const std::vector<ExpertRef>& knocked = options.ablate_experts;
    for (size_t i = 0; i < knocked.size(); ++i) {
        const ExpertRef& e = knocked[i];
        const std::string name = "expert " + std::to_string(e.layer) + "." + std::to_string(e.expert);
        if (!config.has_experts()) throw Error(name + " to knock out: the model has no experts");
        if (e.layer < 0 || e.layer >= config.n_layer || e.expert < 0 || e.expert >= config.n_experts)
            throw Error(name + " to knock out is not one of the model's (layers 0.." +
                        std::to_string(config.n_layer - 1) + ", experts 0.." + std::to_string(config.n_experts - 1) +
                        ")");
        if (!config.expert_layer(e.layer))
            throw Error(name + " to knock out: layer " + std::to_string(e.layer) + "'s MLP is dense, without experts");
        if (i > 0 && !(knocked[i - 1] < e)) throw Error("the experts to knock out must be ascending and unique");
        const auto in_layer = std::count_if(knocked.begin(), knocked.end(),
                                            [&](const ExpertRef& other) { return other.layer == e.layer; });
        if (config.n_experts - in_layer < config.experts_per_token)
            throw Error("knocking out " + std::to_string(in_layer) + " of layer " + std::to_string(e.layer) + "'s " +
                        std::to_string(config.n_experts) + " experts leaves fewer than the " +
                        std::to_string(config.experts_per_token) + " each token takes");
    }
}

namespace {

// Each text non-empty, within the model's positions, its ids in the vocabulary; `what` names them ("text", "source").
void check_texts(const Config& cfg, const std::vector<std::vector<int32_t>>& texts, const std::string& what) {
    for (size_t b = 0; b < texts.size(); ++b) {
        const auto& ids = texts[b];
        if (ids.empty()) throw Error(what + " " + std::to_string(b + 1) + " is empty");
        if (ids.size() > static_cast<size_t>(cfg.n_positions))
            throw Error(what + " " + std::to_string(b + 1) + " has " + std::to_string(ids.size()) +
                        " tokens, more than the model's limit of " + std::to_string(cfg.n_positions));
        for (int32_t id : ids)
            if (id < 0 || id >= cfg.vocab_size)
                throw Error("token id " + std::to_string(id) + " outside the vocabulary of " +
                            std::to_string(cfg.vocab_size));
    }
}

// The batch's token types: one per token, each below the model's type_vocab_size.
void check_token_types(const Config& cfg, const Batch& batch) {
    if (batch.token_types.empty()) return;
    if (batch.token_types.size() != batch.token_ids.size()) throw Error("token types given for some texts only");
    for (int b = 0; b < batch.B(); ++b) {
        if (batch.token_types[b].size() != batch.token_ids[b].size())
            throw Error("text " + std::to_string(b + 1) + " has a token type for some of its tokens only");
        for (int32_t type : batch.token_types[b])
            if (type != 0 && (type < 0 || type >= cfg.type_vocab_size))
                throw Error("token type " + std::to_string(type) + " is not one of the model's " +
                            (cfg.type_vocab_size > 1 ? std::to_string(cfg.type_vocab_size) + " types"
                                                     : "(it has one type: it takes no text pairs)"));
    }
}

}  // namespace

std::string TextCut::message() const {
    return std::string(source ? "source " : "text ") + std::to_string(index + 1) + " has " + std::to_string(tokens) +
           " tokens; cut to the first " + std::to_string(kept) + ", the model's limit";
}

std::vector<TextCut> cut_to_context(const Config& config, Batch& batch) {
    const size_t limit = static_cast<size_t>(config.n_positions);
    std::vector<TextCut> cuts;
    for (bool source : {false, true}) {
        std::vector<std::vector<int32_t>>& texts = source ? batch.source_ids : batch.token_ids;
        for (size_t b = 0; b < texts.size(); ++b) {
            if (texts[b].size() <= limit) continue;
            cuts.push_back({source, static_cast<int>(b), static_cast<int>(texts[b].size()), config.n_positions});
            texts[b].resize(limit);
            if (!source && b < batch.token_types.size()) batch.token_types[b].resize(limit);
        }
    }
    return cuts;
}

void validate_forward(const Model& model, const Batch& batch, const AttentionOptions& options) {
    const Config& cfg = model.config;
    if (batch.B() == 0) throw Error("no text given");
    check_texts(cfg, batch.token_ids, "text");
    if (cfg.is_encoder_decoder()) {
        if (batch.source_ids.size() != batch.token_ids.size())
            throw Error("an encoder–decoder reads one source per target: " + std::to_string(batch.source_ids.size()) +
                        " sources for " + std::to_string(batch.B()) + " targets");
        check_texts(cfg, batch.source_ids, "source");
        if (options.contributions)
            throw Error("the contributions of an encoder–decoder's heads are not computed (only decoders' are)");
    } else if (!batch.source_ids.empty()) {
        throw Error(std::string("a source text is for an encoder–decoder; this model is ") +
                    (cfg.is_encoder() ? "an encoder" : "a decoder"));
    }
    check_token_types(cfg, batch);
    if (options.new_rows_only && batch.B() != 1)
        throw Error("maps of the new rows only are computed for one text at a time, not " + std::to_string(batch.B()));
    if (batch.pad_id < 0 || batch.pad_id >= cfg.vocab_size)
        throw Error("pad token id " + std::to_string(batch.pad_id) + " outside the vocabulary");
    const int NH = head_count(cfg, options.n_head);
    if (options.sliding_window < 0) throw Error("the sliding window cannot be negative");
    for (const auto& [k, what] : {std::pair{options.top_k, "predictions"}, std::pair{options.lens_k, "logit lens"}})
        if (k < 0 || k > cfg.vocab_size)
            throw Error(std::string("the ") + what + " asks for " + std::to_string(k) +
                        " tokens; it can give 0 to the vocabulary's " + std::to_string(cfg.vocab_size));
    if (options.lens_from < 0) throw Error("the logit lens cannot start before the first token");
    check_ablation(cfg, options);
    check_expert_ablation(cfg, options);
    if ((options.top_k || options.lens_k || options.contributions) && !cfg.predicts())
        throw Error(
            "this checkpoint has no masked-LM head (a bare encoder, as BertModel saves it and llama.cpp's converter "
            "writes BERT): it gives maps, not predictions");
    if (const std::string refusal = contributions_refusal(cfg); options.contributions && !refusal.empty())
        throw Error("the contributions add up through a final norm and the output embedding: " + refusal);
    if (options.contributions && (options.top_k < 1 || options.split != Split::transpose))
        throw Error(
            "the contributions need the predictions (the attribution is to the top token) and the view + "
            "transpose split");
    int previous = -1;
    for (int l : options.layers) {
        if (l < 0 || l >= cfg.n_layer)
            throw Error("layer " + std::to_string(l) + " out of range (the model has layers 0.." +
                        std::to_string(cfg.n_layer - 1) + ")");
        if (l <= previous) throw Error("layers must be ascending and unique");
        previous = l;
    }
    check_maps_options(cfg, options);
    if (options.maps != Maps::full) return;  // blocks of rows: no T x T map
    // Every returned map is kept: heads = C at a long T would ask for tens of GB.
    const double layers = options.layers.empty() ? cfg.n_layer : options.layers.size();
    // An encoder–decoder also keeps its encoder's maps (S x S) and its cross-attention's (T x S).
    const double T = batch.T(), S = batch.S();
    const double map_bytes =
        (layers * (T * T + T * S) + cfg.encoder_layers * S * S) * batch.B() * NH * double(sizeof(float));
    if (map_bytes > max_attention_bytes)
        throw Error("the attention maps would need " + std::to_string(static_cast<int>(map_bytes / 1e9 + 0.5)) +
                    " GB (" + std::to_string(batch.B()) + " texts x " + std::to_string(NH) + " heads x " +
                    std::to_string(batch.T()) + "^2 tokens x " + std::to_string(static_cast<int>(layers)) +
                    " layers); the limit is " + std::to_string(static_cast<int>(max_attention_bytes / 1e9)) +
                    " GB: fewer heads, tokens or layers");
}

std::string contributions_refusal(const Config& config) {
    if (config.post_norm)
        return "this model normalizes after every layer (post-LN), so its heads' contributions do not add up";
    if (config.mlm_head)
        return "this model's masked-LM head (dense, GELU, LayerNorm) is not linear, so its heads' contributions do "
               "not add up";
    return "";
}

void set_up_result(const Config& config, const Batch& batch, const AttentionOptions& options, AttentionResult& result,
                   int first_row) {
    const int B = batch.B(), T = batch.T();
    result.first_row = first_row;
    const HeadSplit split = head_split(config, options.n_head);
    result.B = B;
    result.T = T;
    result.NH = split.NH;
    result.NKV = split.NKV;
    result.hs = split.hs;
    result.layers = options.layers;
    if (result.layers.empty())
        for (int l = 0; l < config.n_layer; ++l) result.layers.push_back(l);
    const size_t slots = result.layers.size();
    result.maps = options.maps;
    result.weights.resize(options.maps == Maps::full ? slots * B * result.NH * (T - first_row) * T : 0);
    result.outputs.resize(options.capture_outputs ? slots * B * T * split.q_width() : 0);
    result.fully_masked.resize(static_cast<size_t>(B) * T);
    result.top_k = options.top_k;
    result.predictions.resize(static_cast<size_t>(B) * T * options.top_k);
    result.logprob_next.resize(options.top_k ? static_cast<size_t>(B) * T : 0);
    result.V = config.vocab_size;
    result.last_logits.resize(options.top_k ? static_cast<size_t>(B) * config.vocab_size : 0);
    result.lens_k = options.lens_k;
    result.lens.resize(slots * B * T * options.lens_k);
    result.reused.assign(B, 0);
    result.ablated = options.ablate;
    result.ablated_experts = options.ablate_experts;
    result.router_k = config.has_experts() ? config.experts_per_token : 0;
    result.router_layers = config.has_experts() ? config.n_layer : 0;
    const size_t routes = static_cast<size_t>(result.router_layers) * B * T * result.router_k;
    result.router_experts.assign(routes, -1);
    result.router_weights.assign(routes, 0.f);
    result.ablation = options.ablation;
    const size_t rows = static_cast<size_t>(B) * T, maps = options.contributions ? slots * B * result.NH : 0;
    const size_t L = options.contributions ? config.n_layer : 0;
    result.value_weighted.resize(maps * T * T);
    result.rollout.assign(options.contributions ? rows * T : 0, 0.f);
    result.L = static_cast<int>(L);
    result.head_logit_attribution.assign(L * result.NH * rows, 0.f);
    result.part_logit_attribution.assign(L ? (2 * L + 2) * rows : 0, 0.f);
    result.attributed_logit.assign(L ? rows : 0, 0.f);
    result.final_scale.assign(L ? rows : 0, 0.f);
    result.attention_output_scale.assign(config.output_norms ? L * rows : 0, 0.f);
    result.S = batch.S();
    result.cross_weights.resize(config.is_encoder_decoder() ? slots * B * result.NH * (T - first_row) * result.S : 0);
    if (!config.is_encoder_decoder()) result.encoder.reset();
    result.kept.reset();  // the forward takes its rows (kept_shape, prefix_cache.h's take_kept_rows)
    result.tail.reset(), result.tail_from.clear();
    for (int b = 0; b < B; ++b) {
        const int length = static_cast<int>(batch.token_ids[b].size());
        for (int t = 0; t < T; ++t)
            result.fully_masked[static_cast<size_t>(b) * T + t] =
                visible_begin(options, t) >= visible_end(options, t, length, T);
    }
}

KeptRows::Shape kept_shape(const AttentionOptions& options, const AttentionResult& result) {
    KeptRows::Shape shape;
    shape.slots = static_cast<int>(result.layers.size());
    shape.B = result.B;
    shape.NH = result.NH;
    const bool queries_and_keys = options.contributions || options.maps == Maps::queries_and_keys;
    shape.Qw = queries_and_keys ? static_cast<size_t>(result.NH) * result.hs : 0;
    shape.KVw = queries_and_keys ? static_cast<size_t>(result.NKV) * result.hs : 0;
    shape.summaries = options.summaries;
    return shape;
}

namespace {

// Marian's sinusoidal positions (the paper's, in Hugging Face's layout): for
// c < C / 2, sin(t / 10000^(2c / C)) at c and cos of the same at C / 2 + c,
// computed in double and rounded to float32, as Hugging Face builds its table.
void add_sinusoid(int t, int C, float* xt) {
    const int half = C / 2;
    for (int c = 0; c < half; ++c) {
        const double angle = t / std::pow(10000.0, 2.0 * c / C);
        xt[c] += static_cast<float>(std::sin(angle));
        xt[half + c] += static_cast<float>(std::cos(angle));
    }
}

}  // namespace

int relative_position_bucket(int relative, bool bidirectional, int buckets, int max_distance) {
    int bucket = 0, distance = 0;
    if (bidirectional) {
        buckets /= 2;
        bucket = relative > 0 ? buckets : 0;
        distance = std::abs(relative);
    } else {
        distance = -std::min(relative, 0);
    }
    const int max_exact = buckets / 2;
    if (distance < max_exact) return bucket + distance;
    const float log_ratio = std::log(static_cast<float>(distance) / static_cast<float>(max_exact)) /
                            static_cast<float>(std::log(static_cast<double>(max_distance) / max_exact));
    const int large = max_exact + static_cast<int>(log_ratio * static_cast<float>(buckets - max_exact));
    return bucket + std::min(large, buckets - 1);
}

void position_bias(const Model& model, int T, std::vector<float>& bias) {
    const Config& cfg = model.config;
    const int NH = cfg.n_head, width = 2 * T - 1;
    bias.resize(static_cast<size_t>(NH) * width);
    std::vector<float> per_head(NH);
    for (int relative = 1 - T; relative < T; ++relative) {
        const int bucket =
            relative_position_bucket(relative, cfg.is_encoder(), cfg.relative_buckets, cfg.relative_max_distance);
        stored_row(model.rel_bias, bucket, per_head.data());
        for (int h = 0; h < NH; ++h) bias[static_cast<size_t>(h) * width + relative + T - 1] = per_head[h];
    }
}

void embed_text(const Model& model, const Batch& batch, int b, int first, float* x) {
    const Config& cfg = model.config;
    const int T = batch.T(), C = cfg.n_embd, length = static_cast<int>(batch.token_ids[b].size());
    std::vector<float> row(C);
    const auto add_row = [&](const Matrix& table, int index, float* xt) {
        stored_row(table, index, row.data());
        for (int c = 0; c < C; ++c) xt[c] += row[c];
    };
    for (int t = first; t < T; ++t) {
        float* xt = x + static_cast<size_t>(t - first) * C;
        stored_row(model.wte, batch.padded_id(b, t), xt);
        if (cfg.embedding_scale != 1)
            for (int c = 0; c < C; ++c) xt[c] *= cfg.embedding_scale;
        // RoBERTa's positions count from padding_idx + 1, and a pad is at padding_idx.
        const int offset = cfg.position_offset, position = cfg.pad_positions && t >= length ? offset - 1 : t + offset;
        if (model.wpe) add_row(model.wpe, position, xt);
        if (cfg.positions == Positions::sinusoidal) add_sinusoid(t, C, xt);
        if (model.wtt) add_row(model.wtt, batch.token_type(b, t), xt);
    }
    if (cfg.embedding_norm) ops::layer_norm(x, model.emb_ln_w, model.emb_ln_b, x, T - first, C, cfg.layer_norm_epsilon);
}

}  // namespace headscope
