// Exact activation patching on the CPU (patching.h): a forward of the run
// that supplies the activations (the clean one when denoising) keeps what
// the patches copy (each layer's input, heads' outputs, maps and MLP
// outputs), and a forward of the run being patched keeps each layer's input.
// Each patch then starts from its layer's input in that run, computes that
// layer and the ones after it, and unembeds only the rows the metric reads.
#include <algorithm>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/cpu_forward.h"
#include "headscope/compute/cpu_ops.h"
#include "headscope/compute/matmul.h"

namespace headscope {

void CpuForward::patch(const Model& model, const Batch& clean, const Batch& corrupted, const AttentionOptions& options,
                       const PatchRequest& asked, Patching& patching, const Progress& progress) {
    const Config& cfg = model.config;
    if (clean.B() != 1 || corrupted.B() != 1) throw Error("patching compares one clean text with one corrupted text");
    const PatchRequest request = checked_patch_request(cfg, clean.token_ids[0], corrupted.token_ids[0], asked);
    if (options.split != Split::transpose)
        throw Error("patching copies each head's activations in the view + transpose split, not the naive view");
    const bool denoise = request.direction == PatchDirection::denoise;
    const Batch& source = denoise ? clean : corrupted;
    const Batch& target = denoise ? corrupted : clean;
    const std::vector<int32_t>& clean_ids = clean.token_ids[0];
    AttentionOptions grid = options;
    grid.layers = {}, grid.top_k = 1, grid.lens_k = 0, grid.contributions = false, grid.new_rows_only = false;
    grid.capture_outputs = true;
    const HeadSplit split = head_split(cfg, grid.n_head);
    const int L = cfg.n_layer, T = clean.T(), NH = split.NH;
    const size_t layer_floats = static_cast<size_t>(T) * cfg.n_embd;

    // However the work ends (a Cancelled from `progress` included), the forward is a plain one again.
    struct Reset {
        CpuForward& forward;
        ~Reset() {
            forward.patching_ = forward.keep_layer_inputs_ = false;
            forward.patch_ = nullptr;
            forward.kept_mlp_outputs_ = nullptr;
        }
    } reset{*this};
    patching_ = keep_layer_inputs_ = true;
    AttentionResult from;  // every layer's maps and heads' outputs
    std::vector<float> from_mlp(L * layer_floats);
    kept_mlp_outputs_ = from_mlp.data();
    run(model, source, grid, from, Heads::batched, nullptr, progress);
    kept_mlp_outputs_ = nullptr;
    const double source_metric = metric(model, request, clean_ids);
    const std::vector<float> from_inputs(layer_inputs_.data(), layer_inputs_.data() + L * layer_floats);
    AttentionResult result;
    grid.capture_outputs = false, grid.layers = {L - 1};
    run(model, target, grid, result, Heads::batched, nullptr, progress);
    const double target_metric = metric(model, request, clean_ids);
    Patching made{request,
                  L,
                  NH,
                  T,
                  denoise ? source_metric : target_metric,
                  denoise ? target_metric : source_metric,
                  {},
                  result.computed_on};
    if (!(made.clean_metric != made.corrupted_metric))
        throw Error(std::string("the clean and the corrupted text give the same ") +
                    patch_metric_choices.labels[static_cast<size_t>(request.metric)] + " (" +
                    std::to_string(made.clean_metric) + "): there is no difference for a patch to restore");

    reserve_floats(scratch_att_, static_cast<size_t>(NH) * T * T);
    for (PatchKind kind : request.kinds) {
        const bool per_head = kind == PatchKind::heads || kind == PatchKind::pattern;
        PatchGrid cells{kind, L, per_head ? NH : T, {}};
        const int count = L * cells.cols;
        const std::string what = std::string("patching ") + patch_kind_choices.labels[static_cast<size_t>(kind)];
        for (int cell = 0; cell < count; ++cell) {
            report_progress(progress, what, cell, count, ProgressUnit::steps);
            const int l = cell / cells.cols;
            const float* at_layer = kind == PatchKind::heads      ? from.outputs.data() + l * T * split.q_width()
                                    : kind == PatchKind::pattern  ? from.map(l, 0, 0)
                                    : kind == PatchKind::residual ? from_inputs.data() + l * layer_floats
                                                                  : from_mlp.data() + l * layer_floats;
            const double patched = patched_metric(model, target, grid, split, result, request, clean_ids,
                                                  {kind, l, cell % cells.cols, at_layer});
            cells.cells.push_back(
                patched_fraction(request.direction, made.clean_metric, made.corrupted_metric, patched));
        }
        report_progress(progress, what, count, count, ProgressUnit::steps);
        made.grids.push_back(std::move(cells));
    }
    patching = std::move(made);
}

// The metric of the run being patched with `at` applied: from its layer's
// input (layer_inputs_), with the residual row replaced where `at` patches
// the residual, through that layer and the ones after it.
double CpuForward::patched_metric(const Model& model, const Batch& batch, const AttentionOptions& options,
                                  const HeadSplit& split, AttentionResult& result, const PatchRequest& request,
                                  const std::vector<int32_t>& clean, const PatchAt& at) {
    const int C = model.config.n_embd;
    const size_t floats = static_cast<size_t>(rows_) * C;
    std::copy_n(layer_inputs_.data() + at.layer * floats, floats, x_.data());
    if (at.kind == PatchKind::residual)
        std::copy_n(at.from + static_cast<size_t>(at.index) * C, C, x_.data() + static_cast<size_t>(at.index) * C);
    patch_ = &at;
    for (int layer = at.layer; layer < model.config.n_layer; ++layer)
        run_layer(model, batch, options, split, own_cache_, {layer, -1, scratch_att_.data(), false}, Heads::batched,
                  result);
    patch_ = nullptr;
    return metric(model, request, clean);
}

// A head's maps (`pattern`: the source's weights over this run's values) or
// its outputs (`heads`) replaced at every position, where patch_ says so.
// One text, every row computed: R = T.
void CpuForward::patch_attention(PatchKind kind, const HeadSplit& split, const PrefixCache& store, int layer,
                                 float* att) {
    if (!patch_ || patch_->kind != kind || patch_->layer != layer) return;
    const int T = rows_, hs = split.hs, Qw = split.q_width(), KVw = split.kv_width(), h = patch_->index;
    if (kind == PatchKind::heads) {
        for (int t = 0; t < T; ++t)
            std::copy_n(patch_->from + static_cast<size_t>(t) * Qw + h * hs, hs,
                        y_.data() + static_cast<size_t>(t) * Qw + h * hs);
        return;
    }
    float* map = att + static_cast<size_t>(h) * T * T;
    std::copy_n(patch_->from + static_cast<size_t>(h) * T * T, static_cast<size_t>(T) * T, map);
    const float* values =
        store.kv[0].data() + layer * static_cast<size_t>(store.capacity) * 2 * KVw + KVw + h / split.group() * hs;
    ops::StridedMap<float>(y_.data() + h * hs, T, hs, Eigen::OuterStride<>(Qw)).noalias() =
        ops::ConstMatrixMap<float>(map, T, T) *
        ops::ConstStridedMap<float>(values, T, hs, Eigen::OuterStride<>(2 * KVw));
}

// out_ holds layer `layer`'s MLP output: kept (the source run), or its row patched.
void CpuForward::patch_mlp(int layer, int C) {
    const size_t floats = static_cast<size_t>(rows_) * C;
    if (kept_mlp_outputs_) std::copy_n(out_.data(), floats, kept_mlp_outputs_ + layer * floats);
    if (patch_ && patch_->kind == PatchKind::mlp && patch_->layer == layer)
        std::copy_n(patch_->from + static_cast<size_t>(patch_->index) * C, C,
                    out_.data() + static_cast<size_t>(patch_->index) * C);
}

// The request's metric of the residual after the last layer (x_), unembedding only the rows it reads.
double CpuForward::metric(const Model& model, const PatchRequest& request, const std::vector<int32_t>& clean) {
    const int C = model.config.n_embd, V = model.config.vocab_size;
    const bool loss = request.metric == PatchMetric::loss;
    const int first = loss ? 0 : request.position, end = loss ? rows_ - 1 : first + 1;
    reserve_floats(logits_, static_cast<size_t>(std::min(end - first, unembed_chunk)) * V);
    double sum = 0;
    for (int start = first; start < end; start += unembed_chunk) {
        const int n = std::min(unembed_chunk, end - start);
        unembed(model, x_.data() + static_cast<size_t>(start) * C, n);
        for (int r = 0; r < n; ++r) {
            const float* logits = logits_.data() + static_cast<size_t>(r) * V;
            if (request.metric == PatchMetric::logit_diff)
                return static_cast<double>(logits[request.answer]) - logits[request.wrong];
            const int32_t token = loss ? clean[start + r + 1] : request.answer;
            const double logprob = static_cast<double>(logits[token]) - ops::log_sum_exp(logits, V);
            if (!loss) return logprob;
            sum -= logprob;
        }
    }
    return sum / (end - first);
}

}  // namespace headscope
