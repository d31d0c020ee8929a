// Exact activation patching of an encoder–decoder on the CPU (patching.h):
// the text is the encoder's source and the decoder's target, the metric read
// from the decoder's logits. The run the patches copy from keeps its
// decoder's activations (with its cross-attention heads' outputs and maps)
// and its encoder's; each cell is then a whole forward of the run being
// patched, whose encoding (the encoder's output and the cross-attention's
// keys and values) is reused unless the cell is in the encoder.
#include <algorithm>
#include <string>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/compute/cpu_forward.h"
#include "headscope/compute/cpu_ops.h"

namespace headscope {

namespace {

// The run being patched, once per cell: no maps kept but the last layer's
// (the cells' patched maps are the run's own buffers), and no predictions:
// the metric unembeds only the rows it reads (patch_metrics). Its request
// keeps the decoder's output (`states`, (T, C)), so that it runs every layer.
AttentionOptions patched_options(AttentionOptions grid, int layers) {
    grid.capture_outputs = false, grid.layers = {layers - 1}, grid.top_k = 0;
    return grid;
}

}  // namespace

// The encoder runs without predictions (keep_patch_source keeps its output, which runs every layer).
void CpuForward::keep_seq2seq_source(const Model& model, const Batch& source, const AttentionOptions& options,
                                     PatchSource& decoder, PatchSource& encoder, const Progress& progress) {
    keep_patch_source(model, source, options, decoder, progress);
    AttentionOptions own = source_options(encoder_options(options));
    own.top_k = 0;
    if (!encoder_) encoder_ = std::make_unique<CpuForward>();
    encoder_->keep_patch_source(*model.encoder, Batch{source.source_ids, source.pad_id}, own, encoder, progress);
}

void CpuForward::patch_seq2seq(const Model& model, const Batch& clean, const Batch& corrupted,
                               const AttentionOptions& options, const PatchRequest& request, Patching& patching,
                               const Progress& progress) {
    const Config& cfg = model.config;
    check_patch_sources(clean.source_ids.at(0), corrupted.source_ids.at(0));
    const bool denoise = request.direction == PatchDirection::denoise;
    const Batch& target = denoise ? corrupted : clean;
    const std::vector<int32_t>& clean_ids = clean.token_ids[0];
    const AttentionOptions grid = source_options(options);
    PatchSource from, from_encoder;
    keep_seq2seq_source(model, denoise ? clean : corrupted, grid, from, from_encoder, progress);
    double source_metric = 0, target_metric = 0;
    patch_metrics(model, request, clean_ids, 1, 0, &source_metric);
    const AttentionOptions patched = patched_options(grid, cfg.n_layer);
    std::vector<float> states(static_cast<size_t>(target.T()) * cfg.n_embd);
    ForwardRequest plain = patching_request();
    plain.final_states = states.data();
    AttentionResult result;
    run(model, target, patched, result, Heads::batched, nullptr, progress, plain);
    patch_metrics(model, request, clean_ids, 1, 0, &target_metric);
    Patching made{request,
                  cfg.n_layer,
                  head_split(cfg, grid.n_head).NH,
                  clean.T(),
                  denoise ? source_metric : target_metric,
                  denoise ? target_metric : source_metric,
                  {},
                  result.computed_on};
    check_patched_difference(request.metric, made.clean_metric, made.corrupted_metric);

    for (PatchKind kind : request.kinds)
        for (PatchStack stack : patch_stacks(cfg, kind)) {
            const bool encoder = stack == PatchStack::encoder, cross = stack == PatchStack::cross;
            const int L = encoder ? model.encoder->config.n_layer : cfg.n_layer;
            const bool per_head = kind == PatchKind::heads || kind == PatchKind::pattern;
            const int cols = per_head  ? (encoder ? head_split(model.encoder->config, grid.n_head).NH : made.NH)
                             : encoder ? clean.S()
                                       : clean.T();
            PatchGrid cells{kind, L, cols, {}, stack};
            const std::string what = std::string("patching the ") +
                                     patch_stack_choices.labels[static_cast<size_t>(stack)] + "'s " +
                                     patch_kind_choices.labels[static_cast<size_t>(kind)];
            const PatchSource& kept = encoder ? from_encoder : from;
            for (int cell = 0; cell < L * cols; ++cell) {
                report_progress(progress, what, cell, L * cols, ProgressUnit::steps);
                const int l = cell / cols;
                const std::vector<PatchAt> one = {{kind, l, cell % cols, kept.at(kind, l, cross), cross}};
                ForwardRequest edit = plain;
                (encoder ? edit.encoder_patches : edit.patches) = &one;
                run(model, target, patched, result, Heads::batched, nullptr, {}, edit);
                double metric = 0;
                patch_metrics(model, request, clean_ids, 1, 0, &metric);
                cells.cells.push_back(
                    patched_fraction(request.direction, made.clean_metric, made.corrupted_metric, metric));
            }
            report_progress(progress, what, L * cols, L * cols, ProgressUnit::steps);
            made.grids.push_back(std::move(cells));
        }
    patching = std::move(made);
}

void CpuForward::patched_seq2seq_run(const Model& model, const Batch& clean, const Batch& corrupted,
                                     const AttentionOptions& options, PatchDirection direction, const PatchCell& cell,
                                     AttentionResult& result, const Progress& progress) {
    check_patch_sources(clean.source_ids.at(0), corrupted.source_ids.at(0));
    const bool denoise = direction == PatchDirection::denoise, cross = cell.stack == PatchStack::cross;
    PatchSource from, from_encoder;
    keep_seq2seq_source(model, denoise ? clean : corrupted, source_options(options), from, from_encoder, progress);
    const PatchSource& kept = cell.stack == PatchStack::encoder ? from_encoder : from;
    const std::vector<PatchAt> one = {
        {cell.kind, cell.layer, cell.index, kept.at(cell.kind, cell.layer, cross), cross}};
    ForwardRequest edit = patching_request();
    (cell.stack == PatchStack::encoder ? edit.encoder_patches : edit.patches) = &one;
    AttentionOptions target = options;
    target.new_rows_only = false;  // a patched map holds every row
    run(model, denoise ? corrupted : clean, target, result, Heads::batched, nullptr, progress, edit);
}

// Text b's cross-attention head's maps (`pattern`: the source run's weights
// over this run's encoding) or its outputs (`heads`) replaced at every
// position, where its patch says so; text b's rows are its positions from
// begin_[b] on, its maps' rows from first_held_.
void CpuForward::patch_cross(const ForwardRequest& request, const HeadSplit& split, int layer, int B, int S,
                             float* maps) {
    if (!request.patches) return;
    const int hs = split.hs, Qw = split.q_width(), KVw = split.kv_width(), NH = split.NH;
    for (size_t b = 0; b < request.patches->size(); ++b) {
        const PatchAt& cell = (*request.patches)[b];
        if (!cell.cross || cell.layer != layer) continue;
        const int R = first_row_[b + 1] - first_row_[b], first = begin_[b], T = first + R, h = cell.index;
        float* y = y_.data() + static_cast<size_t>(first_row_[b]) * Qw + h * hs;
        if (cell.kind == PatchKind::heads) {
            for (int r = 0; r < R; ++r)
                std::copy_n(cell.from + static_cast<size_t>(first + r) * Qw + h * hs, hs,
                            y + static_cast<size_t>(r) * Qw);
            continue;
        }
        // The source's map (NH, T, S) of one text, every row; this run's rows from `first`.
        float* map = maps + ((b * NH + h) * static_cast<size_t>(T - first_held_) + first - first_held_) * S;
        std::copy_n(cell.from + (static_cast<size_t>(h) * T + first) * S, static_cast<size_t>(R) * S, map);
        const float* values = sources_.cross_kv.data() + (static_cast<size_t>(layer) * B + b) * S * 2 * KVw + KVw +
                              h / split.group() * hs;
        ops::StridedMap<float>(y, R, hs, Eigen::OuterStride<>(Qw)).noalias() =
            ops::ConstMatrixMap<float>(map, R, S) *
            ops::ConstStridedMap<float>(values, S, hs, Eigen::OuterStride<>(2 * KVw));
    }
}

}  // namespace headscope
