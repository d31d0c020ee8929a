// Exact activation patching on the CPU (patching.h): a forward of the run
// that supplies the activations (the clean one when denoising) keeps what
// the patches copy (each layer's input, heads' outputs, maps and MLP
// outputs), and a forward of the run being patched keeps each layer's input
// and keys and values. Each patch then starts from its layer's input in that
// run and computes that layer and the ones after it, and of a causal model
// only the rows from the first token where the texts differ: the rows
// before it are the same in every run. It unembeds only the rows the metric
// reads.
#include <algorithm>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/cpu_forward.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/matmul.h"

namespace headscope {

namespace {

// Cells patched together, as the texts of one batch: as many as make about
// this many rows (one at least), so that a layer's weights are read once
// for them all.
constexpr int rows_patched_together = 1024;

}  // namespace

// What the run the patches copy from computes of `options`: every layer's
// maps and heads' outputs, and a prediction (which runs every layer).
AttentionOptions CpuForward::source_options(AttentionOptions options) {
    options.layers = {}, options.top_k = 1, options.lens_k = 0, options.contributions = false;
    options.new_rows_only = false, options.capture_outputs = true;
    options.maps = Maps::full, options.summaries = false;  // the runs patched read every layer's maps and keys
    return options;
}

// A patching's runs: each sublayer's output apart, so that they all add alike.
ForwardRequest CpuForward::patching_request() {
    ForwardRequest request;
    request.sublayers_apart = true;
    return request;
}

const float* CpuForward::PatchSource::at(PatchKind kind, int layer, bool cross_attention) const {
    const size_t layer_floats = inputs.size() / run.layers.size();
    switch (kind) {
        case PatchKind::heads:
            return cross_attention ? cross.data() + layer * cross.size() / run.layers.size()
                                   : run.outputs.data() + layer * run.outputs.size() / run.layers.size();
        case PatchKind::pattern:
            return cross_attention ? run.cross_weights.data() + layer * run.cross_weights.size() / run.layers.size()
                                   : run.map(layer, 0, 0);
        case PatchKind::residual: return inputs.data() + layer * layer_floats;
        case PatchKind::mlp: return mlp.data() + layer * layer_floats;
    }
    return nullptr;
}

// The source's forward with `options` (source_options'), keeping every
// layer's input and MLP output; x_ holds its last layer's output after.
void CpuForward::keep_patch_source(const Model& model, const Batch& source, const AttentionOptions& options,
                                   PatchSource& kept, const Progress& progress) {
    const Config& cfg = model.config;
    const size_t floats = static_cast<size_t>(cfg.n_layer) * source.T() * cfg.n_embd;
    kept.inputs.resize(floats);
    kept.mlp.resize(floats);
    ForwardRequest keep = patching_request();
    keep.layer_inputs = kept.inputs.data();
    keep.mlp_outputs = kept.mlp.data();
    if (cfg.is_encoder_decoder()) {
        kept.cross.resize(static_cast<size_t>(cfg.n_layer) * source.T() * head_split(cfg, options.n_head).q_width());
        keep.cross_outputs = kept.cross.data();
    }
    if (options.top_k == 0) {  // an encoder–decoder's encoder
        kept.output.resize(static_cast<size_t>(source.T()) * cfg.n_embd);
        keep.final_states = kept.output.data();
    }
    run(model, source, options, kept.run, Heads::batched, nullptr, progress, keep);
}

void CpuForward::check_patch_cell(const Model& model, const AttentionOptions& options, const Batch& clean,
                                  const PatchCell& cell) {
    const std::vector<PatchStack> stacks = patch_stacks(model.config, cell.kind);
    if (std::find(stacks.begin(), stacks.end(), cell.stack) == stacks.end())
        throw Error(std::string("this model has no ") + to_string(cell.kind) + " to patch in the " +
                    (cell.stack == PatchStack::own ? "stack of a decoder or an encoder"
                                                   : patch_stack_choices.labels[static_cast<size_t>(cell.stack)]));
    const bool encoder = cell.stack == PatchStack::encoder;
    const Config& cfg = encoder ? model.encoder->config : model.config;
    const bool per_head = cell.kind == PatchKind::heads || cell.kind == PatchKind::pattern;
    const AttentionOptions own = encoder ? encoder_options(options) : options;
    const int cells = per_head ? head_split(cfg, own.n_head).NH : encoder ? clean.S() : clean.T();
    if (cell.layer < 0 || cell.layer >= cfg.n_layer || cell.index < 0 || cell.index >= cells)
        throw Error(std::string("there is no ") + to_string(cell.kind) + " cell (layer " + std::to_string(cell.layer) +
                    ", " + (per_head ? "head " : "position ") + std::to_string(cell.index) + ") in " +
                    std::to_string(cfg.n_layer) + " layers of " + std::to_string(cells));
}

void CpuForward::patched_run(const Model& model, const Batch& clean, const Batch& corrupted,
                             const AttentionOptions& options, PatchDirection direction, const PatchCell& cell,
                             AttentionResult& result, const Progress& progress) {
    const Config& cfg = model.config;
    if (clean.B() != 1 || corrupted.B() != 1) throw Error("patching compares one clean text with one corrupted text");
    check_patch_texts(cfg, clean.token_ids[0], corrupted.token_ids[0]);
    if (options.split != Split::transpose)
        throw Error("patching copies each head's activations in the view + transpose split, not the naive view");
    check_patch_cell(model, options, clean, cell);
    if (cfg.is_encoder_decoder())
        return patched_seq2seq_run(model, clean, corrupted, options, direction, cell, result, progress);
    const bool denoise = direction == PatchDirection::denoise;
    PatchSource from;
    keep_patch_source(model, denoise ? clean : corrupted, source_options(options), from, progress);
    const std::vector<PatchAt> patch = {{cell.kind, cell.layer, cell.index, from.at(cell.kind, cell.layer)}};
    ForwardRequest patched = patching_request();
    patched.patches = &patch;
    AttentionOptions target = options;
    target.new_rows_only = false;  // a patched map holds every row
    run(model, denoise ? corrupted : clean, target, result, Heads::batched, nullptr, progress, patched);
}

void CpuForward::patch(const Model& model, const Batch& clean, const Batch& corrupted, const AttentionOptions& options,
                       const PatchRequest& asked, Patching& patching, const Progress& progress) {
    const Config& cfg = model.config;
    if (clean.B() != 1 || corrupted.B() != 1) throw Error("patching compares one clean text with one corrupted text");
    const PatchRequest request = checked_patch_request(cfg, clean.token_ids[0], corrupted.token_ids[0], asked);
    if (options.split != Split::transpose)
        throw Error("patching copies each head's activations in the view + transpose split, not the naive view");
    if (cfg.is_encoder_decoder()) return patch_seq2seq(model, clean, corrupted, options, request, patching, progress);
    const bool denoise = request.direction == PatchDirection::denoise;
    const Batch& source = denoise ? clean : corrupted;
    const Batch& target = denoise ? corrupted : clean;
    const std::vector<int32_t>& clean_ids = clean.token_ids[0];
    AttentionOptions grid = source_options(options);
    const HeadSplit split = head_split(cfg, grid.n_head);
    const int L = cfg.n_layer, T = clean.T(), NH = split.NH;
    const size_t layer_floats = static_cast<size_t>(T) * cfg.n_embd;

    PatchSource from;
    keep_patch_source(model, source, grid, from, progress);
    double source_metric = 0, target_metric = 0, prefix_loss = 0;
    patch_metrics(model, request, clean_ids, 1, 0, &source_metric);
    AttentionResult result;
    grid.capture_outputs = false, grid.layers = {L - 1};
    std::vector<float> inputs(L * layer_floats);  // the target's residual entering each layer
    ForwardRequest keep = patching_request();
    keep.layer_inputs = inputs.data();
    run(model, target, grid, result, Heads::batched, nullptr, progress, keep);
    patch_metrics(model, request, clean_ids, 1, 0, &target_metric);
    const int first = first_changed_row(clean_ids, corrupted.token_ids[0], grid, request);
    if (request.metric == PatchMetric::loss && first > 0) {  // the loss of the rows no patch changes
        const std::vector<int32_t> before(clean_ids.begin(), clean_ids.begin() + first + 1);
        patch_metrics(model, request, before, 1, 0, &prefix_loss);  // the mean of their `first` positions
        prefix_loss *= static_cast<double>(first) / (T - 1);
    }
    // Each patched text's keys and values of the rows before `first`, at every layer: the target's.
    const size_t kv_row = 2 * static_cast<size_t>(split.kv_width());
    std::vector<float> prefix_kv(L * first * kv_row);
    for (int l = 0; l < L; ++l)
        std::copy_n(own_cache_.kv[0].data() + l * own_cache_.capacity * kv_row, first * kv_row,
                    prefix_kv.data() + l * first * kv_row);
    Patching made{request,
                  L,
                  NH,
                  T,
                  denoise ? source_metric : target_metric,
                  denoise ? target_metric : source_metric,
                  {},
                  result.computed_on};
    check_patched_difference(request.metric, made.clean_metric, made.corrupted_metric);

    std::vector<double> metrics;
    for (PatchKind kind : request.kinds) {
        const bool per_head = kind == PatchKind::heads || kind == PatchKind::pattern;
        PatchGrid cells{kind, L, per_head ? NH : T, {}};
        const int count = L * cells.cols, together = std::clamp(rows_patched_together / T, 1, cells.cols);
        const std::string what = std::string("patching ") + patch_kind_choices.labels[static_cast<size_t>(kind)];
        for (int l = 0; l < L; ++l) {
            const float* at_layer = from.at(kind, l);
            for (int next = 0; next < cells.cols; next += together) {
                report_progress(progress, what, l * cells.cols + next, count, ProgressUnit::steps);
                std::vector<PatchAt> batch;
                for (int i = next; i < std::min(next + together, cells.cols); ++i)
                    batch.push_back({kind, l, i, at_layer});
                patch_together(model, target, grid, split, inputs.data() + l * layer_floats, prefix_kv, first,
                               request.metric == PatchMetric::loss ? -1 : request.position, batch, result);
                metrics.resize(batch.size());
                patch_metrics(model, request, clean_ids, static_cast<int>(batch.size()), prefix_loss, metrics.data());
                for (double patched : metrics)
                    cells.cells.push_back(
                        patched_fraction(request.direction, made.clean_metric, made.corrupted_metric, patched));
            }
        }
        report_progress(progress, what, count, count, ProgressUnit::steps);
        made.grids.push_back(std::move(cells));
    }
    patching = std::move(made);
}

// The run being patched once for each of `cells` (all of one layer), text b
// of a batch with cells[b] applied: its rows from `first` on, the rows
// before it the run's own (their keys and values `prefix_kv`, (L, first,
// 2 KVw)); from the layer's input (`input`, (T, C)), its residual row
// patched where the cell says so (run_layer), through that layer and the
// ones after it, into x_: of the last layer only its attention, and the rest
// at `metric_row` alone where it is not -1 (keep_metric_rows).
void CpuForward::patch_together(const Model& model, const Batch& target, const AttentionOptions& options,
                                const HeadSplit& split, const float* input, const std::vector<float>& prefix_kv,
                                int first, int metric_row, const std::vector<PatchAt>& cells, AttentionResult& result) {
    const Config& cfg = model.config;
    const int n = static_cast<int>(cells.size()), T = target.T(), C = cfg.n_embd, R = T - first;
    const Batch batch{std::vector<std::vector<int32_t>>(n, target.token_ids[0]), target.pad_id};
    begin_.assign(n, first);
    first_row_.resize(n + 1);
    for (int b = 0; b <= n; ++b) first_row_[b] = b * R;
    rows_ = n * R;
    set_up_result(cfg, batch, options, result, 0);
    const size_t kv_row = 2 * static_cast<size_t>(split.kv_width());
    reserve_kv(own_cache_, n, cfg.n_layer, T, static_cast<int>(kv_row), cfg.n_positions, begin_);
    reserve_buffers(cfg, batch, options, split, cfg.n_layer, 1, /*apart=*/true);
    reserve_floats(scratch_att_, static_cast<size_t>(n) * split.NH * T * T);
    for (int b = 0; b < n; ++b) {
        for (int l = cells[0].layer; l < cfg.n_layer; ++l)
            std::copy_n(prefix_kv.data() + l * first * kv_row, first * kv_row,
                        own_cache_.kv[b].data() + l * own_cache_.capacity * kv_row);
        float* x = x_.data() + static_cast<size_t>(b) * R * C;
        std::copy_n(input + static_cast<size_t>(first) * C, static_cast<size_t>(R) * C, x);
    }
    ForwardRequest patched = patching_request();
    patched.patches = &cells;
    patched.metric_row = metric_row;
    for (int layer = cells[0].layer; layer < cfg.n_layer; ++layer)
        run_layer(model, batch, options, split, own_cache_, {layer, -1, scratch_att_.data(), false}, Heads::batched,
                  patched, result);
}

// x_ entering layer `layer`: each text's row patched where its patch says so (a row it computes).
void CpuForward::patch_residual(const ForwardRequest& request, int layer, int C) {
    for (size_t b = 0; request.patches && b < request.patches->size(); ++b) {
        const PatchAt& cell = (*request.patches)[b];
        const bool computed = cell.index >= begin_[b] && cell.index - begin_[b] < first_row_[b + 1] - first_row_[b];
        if (cell.kind == PatchKind::residual && cell.layer == layer && computed)
            std::copy_n(cell.from + static_cast<size_t>(cell.index) * C, C,
                        x_.data() + (static_cast<size_t>(first_row_[b]) + cell.index - begin_[b]) * C);
    }
}

// Each text's head's maps (`pattern`: the source's weights over this run's
// values) or its outputs (`heads`) replaced at every position, where its
// patch says so. Text b's rows are its positions from begin_[b] on.
void CpuForward::patch_attention(const ForwardRequest& request, PatchKind kind, const HeadSplit& split,
                                 const PrefixCache& store, int layer, float* att) {
    if (!request.patches) return;
    const int hs = split.hs, Qw = split.q_width(), KVw = split.kv_width(), NH = split.NH;
    for (size_t b = 0; b < request.patches->size(); ++b) {
        const PatchAt& cell = (*request.patches)[b];
        if (cell.kind != kind || cell.layer != layer || cell.cross) continue;
        const int R = first_row_[b + 1] - first_row_[b], first = begin_[b], T = first + R, h = cell.index;
        float* y = y_.data() + static_cast<size_t>(first_row_[b]) * Qw + h * hs;
        if (kind == PatchKind::heads) {
            for (int r = 0; r < R; ++r)
                std::copy_n(cell.from + static_cast<size_t>(first + r) * Qw + h * hs, hs,
                            y + static_cast<size_t>(r) * Qw);
            continue;
        }
        float* map = att + (b * NH + h) * static_cast<size_t>(T) * T;
        std::copy_n(cell.from + static_cast<size_t>(h) * T * T, static_cast<size_t>(T) * T, map);
        const float* values =
            store.kv[b].data() + layer * static_cast<size_t>(store.capacity) * 2 * KVw + KVw + h / split.group() * hs;
        ops::StridedMap<float>(y, R, hs, Eigen::OuterStride<>(Qw)).noalias() =
            ops::ConstMatrixMap<float>(map + static_cast<size_t>(first) * T, R, T) *
            ops::ConstStridedMap<float>(values, T, hs, Eigen::OuterStride<>(2 * KVw));
    }
}

// After the last layer's attention, where a patched run's metric reads one
// position: the output projection and the MLP need only that row of each
// text, so x_ and y_ keep those rows alone, text b's at row b.
void CpuForward::keep_metric_rows(const ForwardRequest& request, int layer, int layers, size_t Qw, size_t C) {
    const int metric_row = request.metric_row;
    if (metric_row < 0 || layer != layers - 1) return;
    const int texts = static_cast<int>(first_row_.size()) - 1;
    for (int b = 0; b < texts; ++b) {
        const size_t from = static_cast<size_t>(first_row_[b] + metric_row - begin_[b]), to = b;
        if (from != to) {  // from > to: the rows move up
            std::copy_n(x_.data() + from * C, C, x_.data() + to * C);
            std::copy_n(y_.data() + from * Qw, Qw, y_.data() + to * Qw);
        }
        begin_[b] = metric_row, first_row_[b] = b;
    }
    first_row_[texts] = rows_ = texts;
}

// out_ holds layer `layer`'s MLP output: kept (the source run, every row
// computed), or a row of each text patched where its patch says so (a row
// the text does not compute is the run's own, or one the metric does not read).
void CpuForward::patch_mlp(const ForwardRequest& request, int layer, int C) {
    const size_t floats = static_cast<size_t>(rows_) * C;
    if (request.mlp_outputs) std::copy_n(out_.data(), floats, request.mlp_outputs + layer * floats);
    for (size_t b = 0; request.patches && b < request.patches->size(); ++b) {
        const PatchAt& cell = (*request.patches)[b];
        const bool computed = cell.index >= begin_[b] && cell.index - begin_[b] < first_row_[b + 1] - first_row_[b];
        if (cell.kind == PatchKind::mlp && cell.layer == layer && computed)
            std::copy_n(cell.from + static_cast<size_t>(cell.index) * C, C,
                        out_.data() + (static_cast<size_t>(first_row_[b]) + cell.index - begin_[b]) * C);
    }
}

// The logit of token `id` at the n rows ln_ holds, into `logits`: its row
// of the output embedding alone, with its bias and the final soft-cap.
void CpuForward::token_logits(const Model& model, int32_t id, int n, float* logits) {
    linear(ln_.data(), n, model.lm_head.output_rows(id, 1), model.lm_bias ? model.lm_bias + id : nullptr, logits, 1);
    soft_cap(model.config, logits, n);
}

// Each of the `texts` texts' metric of the residual after the last layer
// (x_: text b's rows, from first_row_[b], are its positions from begin_[b]
// on), unembedding only the rows the metric reads: for a logit difference
// only its two tokens' rows of the output embedding, where it is stored a
// row per token. The loss (over positions 0..clean.size() - 2) reads the
// positions from begin_[b] on, and adds `prefix_loss` for those before.
void CpuForward::patch_metrics(const Model& model, const PatchRequest& request, const std::vector<int32_t>& clean,
                               int texts, double prefix_loss, double* metrics) {
    const int C = model.config.n_embd, V = model.config.vocab_size, first = begin_[0];
    const bool loss = request.metric == PatchMetric::loss;
    const int positions = static_cast<int>(clean.size()) - 1;  // the loss's
    // The rows read: each text's loss positions from `first` on, else each one's row at the position, gathered.
    const int per_text = loss ? positions - first : 1, total = texts * per_text;
    const auto row = [&](int i) {
        const int b = i / per_text, t = loss ? first + i % per_text : request.position;
        return x_.data() + (static_cast<size_t>(first_row_[b]) + t - first) * C;
    };
    std::fill_n(metrics, texts, loss ? prefix_loss : 0.0);
    reserve_floats(logits_, static_cast<size_t>(std::min(total, unembed_chunk)) * V);
    std::vector<float> answer(unembed_chunk), wrong(unembed_chunk);
    for (int start = 0; start < total; start += unembed_chunk) {
        const int n = std::min(unembed_chunk, total - start);
        for (int i = 0; i < n; ++i) std::copy_n(row(start + i), C, unembed_in_.data() + static_cast<size_t>(i) * C);
        if (request.metric == PatchMetric::logit_diff && model.lm_head.out_by_in) {
            read_out(model, unembed_in_.data(), n);
            token_logits(model, request.answer, n, answer.data());
            token_logits(model, request.wrong, n, wrong.data());
            for (int i = 0; i < n; ++i) metrics[start + i] = static_cast<double>(answer[i]) - wrong[i];
            continue;
        }
        unembed(model, unembed_in_.data(), n);
        for (int i = 0; i < n; ++i) {
            const float* logits = logits_.data() + static_cast<size_t>(i) * V;
            const int b = (start + i) / per_text;
            if (request.metric == PatchMetric::logit_diff) {
                metrics[b] = static_cast<double>(logits[request.answer]) - logits[request.wrong];
                continue;
            }
            const int32_t token = loss ? clean[first + (start + i) % per_text + 1] : request.answer;
            const double logprob = static_cast<double>(logits[token]) - ops::log_sum_exp(logits, V);
            metrics[b] += loss ? -logprob / positions : logprob;
        }
    }
}

}  // namespace headscope
