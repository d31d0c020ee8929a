// An encoder–decoder on the CPU (cpu_forward.h): the encoder's forward of the
// sources, once per source, and the keys and values every decoder layer's
// cross-attention reads of its output.
#include "headscope/compute/cpu_forward.h"
#include "headscope/compute/matmul.h"

namespace headscope {

// The encoder runs with encoder_options (forward.h), by the same heads
// (batched, or the checks' loop) as the decoder, every layer of it, its
// output (its final norm's, where it has one) into sources_.memory (B, S, C).
// A patching's forward (request.sublayers_apart) runs its encoder so too,
// with the request's encoder patches; a patched encoding is not reused.
void CpuForward::prepare_sources(const Model& model, const Batch& batch, const AttentionOptions& options,
                                 const HeadSplit& split, Heads heads, const ForwardRequest& asked) {
    const AttentionOptions own = encoder_options(options);
    if (!asked.encoder_patches && sources_.encoded && sources_.model == &model && sources_.options == own &&
        sources_.heads == heads && sources_.ids == batch.source_ids && sources_.apart == asked.sublayers_apart)
        return;
    sources_.encoded.reset();  // invalid until complete
    const Model& encoder = *model.encoder;
    const Batch source{batch.source_ids, batch.pad_id};
    const int B = batch.B(), S = batch.S(), C = model.config.n_embd, KVw = split.kv_width();
    const size_t rows = static_cast<size_t>(B) * S;
    reserve_floats(sources_.memory, rows * C);
    reserve_floats(sources_.cross_kv, static_cast<size_t>(model.config.n_layer) * rows * 2 * KVw);
    if (!encoder_) encoder_ = std::make_unique<CpuForward>();
    auto encoded = std::make_shared<AttentionResult>();
    ForwardRequest request;
    request.final_states = sources_.memory.data();
    request.sublayers_apart = asked.sublayers_apart;
    request.patches = asked.encoder_patches;
    encoder_->run(encoder, source, own, *encoded, heads, nullptr, {}, request);
    for (int l = 0; l < model.config.n_layer; ++l) {
        const LayerWeights& w = model.layers[l];
        float* kv = sources_.cross_kv.data() + l * rows * 2 * KVw;
        linear(sources_.memory.data(), static_cast<int>(rows), w.cross_k, w.cross_k_b, kv, 2 * KVw);
        linear(sources_.memory.data(), static_cast<int>(rows), w.cross_v, w.cross_v_b, kv + KVw, 2 * KVw);
    }
    sources_.model = asked.encoder_patches ? nullptr : &model;
    sources_.options = own;
    sources_.heads = heads;
    sources_.ids = batch.source_ids;
    sources_.apart = asked.sublayers_apart;
    sources_.encoded = std::move(encoded);
}

}  // namespace headscope
