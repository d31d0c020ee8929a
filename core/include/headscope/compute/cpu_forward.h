// The forward of every family on the CPU, capturing each returned layer's
// attention and, when asked, the predictions and the logit lens: the CPU
// backend runs it with batched per-head products, the checks with the
// tutorials' loop of dot products (the same layer code around both, so the
// check compares only the attention). Each layer is the layer loop
// (layer_ops.h) over this class's operations (LayerRun, cpu_layer_ops.cpp);
// what an analysis keeps and edits comes in a ForwardRequest.
// It computes, per text b, the rows of tokens [begin_b, T): all of them, or
// with a PrefixCache only those after the reused prefix (prefix_cache.h);
// the rows of all texts are stacked, R rows in all, so every product is one.
// Legend: B batch, T padded length, C channels, NH query heads, NKV key/value
// heads, hs head size, Qw = NH * hs, KVw = NKV * hs, F MLP hidden size,
// V vocabulary, R rows computed.
// Buffers are row-major and sized once per shape; a later call with the same
// or a smaller shape allocates nothing.
#pragma once
#include <memory>
#include <vector>

#include "headscope/base/aligned.h"
#include "headscope/base/progress.h"
#include "headscope/compute/attention.h"
#include "headscope/compute/forward.h"
#include "headscope/compute/forward_request.h"
#include "headscope/compute/head_effects.h"
#include "headscope/compute/layer_ops.h"
#include "headscope/compute/patching.h"
#include "headscope/compute/prefix_cache.h"
#include "headscope/model/model.h"

namespace headscope {

class CpuForward {
public:
    static constexpr int unembed_chunk = 64;  // rows read out through the output embedding at a time
    // Rows through a dense MLP at a time: its gate and up rows stay allocated after a long text's forward
    // (64 MiB at F = 8192; 4,096 rows put the window past its memory at 8k tokens, docs/benchmarks.md).
    static constexpr int mlp_chunk_rows = 1024;

    enum class Heads { batched, loop };

    // Validates (validate_forward, throws Error), then fills `result`,
    // reusing and refilling `cache` when given, keeping and editing what
    // `request` asks (forward_request.h). `progress` hears "computing
    // layers" before each layer (done: the layers finished); Cancelled
    // thrown by it ends the forward.
    void run(const Model& model, const Batch& batch, const AttentionOptions& options, AttentionResult& result,
             Heads heads, PrefixCache* cache = nullptr, const Progress& progress = {},
             const ForwardRequest& request = {});
    // The effects grid (backend.h, head_effects.h; cpu_effects.cpp).
    void head_effects(const Model& model, const Batch& batch, const AttentionOptions& options, HeadEffects& effects,
                      EffectsOf of, const Progress& progress, EffectsMethod method = EffectsMethod::exact,
                      const EffectsUpdate& on_update = {});
    // Exact activation patching (backend.h, patching.h; cpu_patching.cpp).
    void patch(const Model& model, const Batch& clean, const Batch& corrupted, const AttentionOptions& options,
               const PatchRequest& request, Patching& patching, const Progress& progress);
    void patched_run(const Model& model, const Batch& clean, const Batch& corrupted, const AttentionOptions& options,
                     PatchDirection direction, const PatchCell& cell, AttentionResult& result,
                     const Progress& progress);

private:
    // A layer of the loop: its index, its slot among the returned layers (-1:
    // not returned), where its maps go (null: none is held, AttentionOptions::maps),
    // and whether it is the last one needed.
    struct LayerAt {
        int layer, slot;
        float* att;
        bool last;
    };
    void reserve_buffers(const Config& config, const Batch& batch, const AttentionOptions& options,
                         const HeadSplit& split, int layers_run, size_t returned_layers, bool apart);
    // One layer: the layer loop (layer_ops.h) over the CPU's operations (LayerRun, cpu_layer_ops.cpp).
    class LayerRun;
    void run_layer(const Model& model, const Batch& batch, const AttentionOptions& options, const HeadSplit& split,
                   PrefixCache& store, LayerAt at, Heads heads, const ForwardRequest& request, AttentionResult& result);
    // options.contributions (cpu_contributions.cpp): a layer's value-weighted
    // maps (0 for a head options.ablate knocks out: it sends nothing from
    // any key), its step of the rollout and its heads' outputs kept; then,
    // after the predictions, the logit attribution.
    void contribute(const Model& model, const Batch& batch, const AttentionOptions& options, const HeadSplit& split,
                    const LayerAt& at, AttentionResult& result);
    void attribute_logits(const Model& model, const Batch& batch, const HeadSplit& split, AttentionResult& result);
    static void reserve_kv(PrefixCache& store, int B, int layers, int T, int width, int max_rows,
                           const std::vector<int>& keep);
    void keep_in_cache(const Model& model, const Batch& batch, const AttentionOptions& options, int layers_run,
                       AttentionResult& result, PrefixCache& cache);
    static int checked_cached_rows(const Batch& batch, const AttentionOptions& options,
                                   const ForwardRequest::CachedRows& cached, const PrefixCache* cache);
    // Layer `layer`'s keys and values of the rows `cached` reads into the
    // store's rows [0, begin_[0]) (ForwardRequest::cached_rows); throws RowsGone where they are gone.
    void read_cached_rows(const Model& model, const Batch& batch, const AttentionOptions& options,
                          const HeadSplit& split, const ForwardRequest::CachedRows& cached, PrefixCache& store,
                          int layer) const;
    // Grows `buffer` to at least `n` floats; never shrinks, so steady state allocates nothing.
    static void reserve_floats(AlignedVector<float>& buffer, size_t n);
    static void normalize(const Config& config, const float* x, const float* w, const float* b, float* out, int rows);
    // Throw Error naming the layer (and head) where the computed rows stopped being finite.
    void check_attention(int layer, const float* att, int B, int NH, int T, int hs) const;
    void check_residual(int layer, int C, const char* after) const;
    void knock_out(const AttentionOptions& options, const Batch& batch, const HeadSplit& split, int layer);
    // The effects grid's cell (layer * N + i) knocked out on top of `grid`,
    // from its layer's input in `inputs` (L, R, C): its exact changes into `effects`.
    void knock_out_exactly(const Model& model, const Batch& batch, const AttentionOptions& grid, const HeadSplit& split,
                           const float* inputs, int cell, AttentionResult& result, HeadEffects& effects);
    void project_qkv(const Model& model, const LayerWeights& w);
    void rotate(const Config& config, const Batch& batch, const AttentionOptions& options, const HeadSplit& split,
                int layer);
    void attention(const Model& model, const Batch& batch, const AttentionOptions& options, const HeadSplit& split,
                   PrefixCache& store, const LayerAt& at, Heads heads);
    // qkv_'s queries and keys (after the attention's RoPE) into the kept
    // rows' (kept_rows_) at the returned layer's `slot`, each text's rows from begin_.
    void keep_queries_keys(const HeadSplit& split, size_t slot, AttentionResult& result) const;
    // ln_ (R, C) -> the MLP's output, added into x_, or with `apart` into out_ (sublayer_output).
    void mlp(const Config& config, const LayerWeights& w, bool apart);
    // A layer of experts' MLP in mlp's place (cpu_experts.cpp): ln_ (R, C)
    // -> the chosen experts' weighted outputs, added into x_
    // (sublayer_output); each row's choices into the result (keep_routes).
    void mix_experts(const Config& config, const LayerWeights& w, const AttentionOptions& options, int layer,
                     bool apart, AttentionResult& result);
    void run_expert(const ExpertWeights& expert, const Config& config, int from, int n, int k);
    void keep_routes(int layer, AttentionResult& result) const;
    static bool sublayers_apart(const Config& config, const ForwardRequest& request);
    float* sublayer_output(bool apart);
    void add_sublayer_output(const Config& config, const float* norm_w, float* rms);
    // An encoder–decoder (cpu_encoder_decoder.cpp): the encoder's forward of
    // the batch's sources and every decoder layer's cross-attention keys and
    // values, unless those of the same sources and options are held (the
    // request's encoder patches and sublayers_apart, forward_request.h).
    void prepare_sources(const Model& model, const Batch& batch, const AttentionOptions& options,
                         const HeadSplit& split, Heads heads, const ForwardRequest& request);
    // A decoder layer's cross-attention over the R rows: x_ += its output
    // (then its norm, post-LN), its maps into the result's cross_weights.
    void cross_attend(const Model& model, const Batch& batch, const AttentionOptions& options, const HeadSplit& split,
                      const LayerAt& at, Heads heads, const ForwardRequest& request, AttentionResult& result);
    void keep_earlier_rows(const PrefixCache& cache, const Batch& batch, AttentionResult& result) const;
    void read_out(const Model& model, const float* x, int n);  // cpu_predict.cpp
    void unembed(const Model& model, const float* x, int n);
    static void soft_cap(const Config& config, float* logits, size_t n);  // Gemma's final cap tanh(logit / cap)
    // With `tracked` (B, T), also each row's p of the tracked id into `tracked_p` (B, T).
    void predict(const Model& model, const Batch& batch, const AttentionOptions& options, AttentionResult& result,
                 const Prediction* tracked = nullptr, float* tracked_p = nullptr);

    std::vector<int> begin_;      // (B) the first token computed of each text
    std::vector<int> first_row_;  // (B + 1) where each text's rows start among the R
    int rows_ = 0;                // R
    int first_held_ = 0;          // the first query row the maps hold (AttentionResult::first_row)
    bool lens_ = false;           // the lens is read out: lens_k, and a row from lens_from computed
    int text_length_ = 0;         // the text whose first T tokens run, for LongRoPE (ForwardRequest::text_length)
    PrefixCache own_cache_;       // the keys and values when the caller keeps no cache
    // The rows this forward writes its kept queries, keys and summaries into
    // (the result holds them: a pointer, so that the forward counts as no holder of them).
    KeptRows* kept_rows_ = nullptr;
    // A long text's forward without maps and without a cache keeps one
    // layer's keys and values at a time (every layer's: 2 GB at 32k tokens of a 1B model).
    bool one_layer_store_ = false;
    size_t stored_layer(int layer) const { return one_layer_store_ ? 0 : static_cast<size_t>(layer); }

    AlignedVector<float> x_;               // (R, C) residual stream
    AlignedVector<float> ln_;              // (R, C) norm output
    AlignedVector<float> qkv_;             // (R, Qw + 2 KVw) [Q | K | V]
    AlignedVector<float> fused_;           // (R, 3C) per-head [q k v] (QkvLayout::fused_per_head), before reordering
    AlignedVector<float> qkv_contiguous_;  // (B, T, Qw), (B, T, KVw) twice: naive-view only
    AlignedVector<float> y_;               // (R, Qw) attention output, heads merged
    AlignedVector<float> out_;             // (R, C) a sublayer's output before its output norm (OLMo 2)
    AlignedVector<float> hidden_;          // (mlp_chunk_rows, F) MLP hidden (SwiGLU: the gate); experts': (R, F)
    AlignedVector<float> up_;              // as hidden_: SwiGLU's up projection
    // A layer of experts (mix_experts): the router's logits, each row's
    // choices (choice i is row i / k's), the choices of each expert in turn,
    // an expert's input rows (then its output), and the layer's output.
    AlignedVector<float> router_logits_;   // (R, E)
    std::vector<int32_t> chosen_experts_;  // (R, k)
    std::vector<float> chosen_weights_;    // (R, k)
    std::vector<int> expert_choices_;      // (R k) grouped by expert, ascending
    AlignedVector<float> expert_in_;       // (n <= matmul_detail::small_rows, C)
    AlignedVector<float> experts_out_;     // (R, C)
    AlignedVector<float> scratch_att_;     // (B, NH, T, T) weights of layers not returned
    AlignedVector<float> unembed_in_;      // (lens slots + 1, R, C): residual rows to read out, the last layer's last
    AlignedVector<float> logits_;          // (unembed_chunk, V) logits of a chunk of those rows
    AlignedVector<float> head_in_;         // (unembed_chunk, C) ModernBERT's final norm output, the head's input
    AlignedVector<float> residuals_;  // (2L + 1, R, C) contributions: x_ after the embedding, each attention, each MLP
    AlignedVector<float> head_outputs_;  // (L, R, Qw) contributions: every layer's y_, knocked-out heads replaced
    // Activation patching (cpu_patching.cpp): its runs' requests ask for
    // every sublayer's output apart in out_ before it is added; the layer
    // loop applies each text's patch where the request has one, and keeps
    // each layer's input and MLP output where it asks.
    using PatchAt = ForwardRequest::Patch;
    // The run the patches copy from: every layer's maps and heads' outputs
    // (its forward), and each layer's input and MLP output, (L, T, C) each.
    // An encoder–decoder's decoder also keeps its cross-attention heads'
    // outputs (L, T, Qw) (its maps are the run's), and its encoder, run
    // without predictions, its output (T, C), which runs every layer.
    struct PatchSource {
        AttentionResult run;
        std::vector<float> inputs, mlp, cross, output;
        const float* at(PatchKind kind, int layer, bool cross_attention = false) const;
    };
    // A patching's runs: every layer computed and kept (source_options),
    // each sublayer's output apart (patching_request).
    static AttentionOptions source_options(AttentionOptions options);
    static ForwardRequest patching_request();
    void keep_patch_source(const Model& model, const Batch& source, const AttentionOptions& options, PatchSource& kept,
                           const Progress& progress);
    // Throws Error where `cell` is not one of the grids' (patch_stacks).
    static void check_patch_cell(const Model& model, const AttentionOptions& options, const Batch& clean,
                                 const PatchCell& cell);
    // An encoder–decoder's patching (cpu_patching_seq2seq.cpp): the source
    // run's decoder and encoder activations; each cell a whole forward of
    // the run being patched, its encoding reused unless the cell is the encoder's.
    void keep_seq2seq_source(const Model& model, const Batch& source, const AttentionOptions& options,
                             PatchSource& decoder, PatchSource& encoder, const Progress& progress);
    void patch_seq2seq(const Model& model, const Batch& clean, const Batch& corrupted, const AttentionOptions& options,
                       const PatchRequest& request, Patching& patching, const Progress& progress);
    void patched_seq2seq_run(const Model& model, const Batch& clean, const Batch& corrupted,
                             const AttentionOptions& options, PatchDirection direction, const PatchCell& cell,
                             AttentionResult& result, const Progress& progress);
    // A decoder layer's cross-attention heads' maps (`maps`, (B, NH, T, S)) or outputs patched.
    void patch_cross(const ForwardRequest& request, const HeadSplit& split, int layer, int B, int S, float* maps);
    void patch_residual(const ForwardRequest& request, int layer, int C);
    void patch_attention(const ForwardRequest& request, PatchKind kind, const HeadSplit& split,
                         const PrefixCache& store, int layer, float* att);
    void patch_mlp(const ForwardRequest& request, int layer, int C);
    // request.metric_row: after the last layer's attention, that row of each text alone.
    void keep_metric_rows(const ForwardRequest& request, int layer, int layers, size_t Qw, size_t C);
    void patch_together(const Model& model, const Batch& target, const AttentionOptions& options,
                        const HeadSplit& split, const float* input, const std::vector<float>& prefix_kv, int first,
                        int metric_row, const std::vector<PatchAt>& cells, AttentionResult& result);
    void patch_metrics(const Model& model, const PatchRequest& request, const std::vector<int32_t>& clean, int texts,
                       double prefix_loss, double* metrics);
    void token_logits(const Model& model, int32_t id, int n, float* logits);
    std::vector<float> position_bias_;  // (NH, 2T - 1) T5's, of this forward's stack (forward.h's position_bias)

    // An encoder–decoder's sources, as prepare_sources left them.
    struct Sources {
        const Model* model = nullptr;
        AttentionOptions options;
        Heads heads = Heads::batched;
        bool apart = false;  // each sublayer's output added apart (ForwardRequest::sublayers_apart)
        std::vector<std::vector<int32_t>> ids;
        std::shared_ptr<const AttentionResult> encoded;  // the encoder's result
        AlignedVector<float> memory;                     // (B, S, C) the encoder's output
        AlignedVector<float> cross_kv;                   // (L, B, S, 2 KVw) each decoder layer's [K | V]
    };
    Sources sources_;
    std::unique_ptr<CpuForward> encoder_;  // runs the encoder
    AlignedVector<float> scratch_cross_;   // (B, NH, T, S) cross maps of layers not returned
};

}  // namespace headscope
