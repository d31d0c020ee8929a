// Test support: GGUF files of the bert and t5 architectures (gguf_models.h),
// their names and keys as llama.cpp's converter writes them (its BertModel
// and T5Model, and gguf-py's tensor_mapping.py), with their tokenizers
// (gguf_vocabs.h).
#include <stdexcept>

#include "gguf_models.h"
#include "gguf_vocabs.h"

namespace headscope::test {

namespace fs = std::filesystem;

namespace {

// llama.cpp's quantizer leaves these in their own type, F32 in the tests.
bool quantized(const std::string& gguf) {
    return gguf != "position_embd.weight" && gguf != "token_types.weight" &&
           gguf.find("attn_rel_b") == std::string::npos;
}

// BERT's names after "bert."; its masked-LM head (cls.*) has none: the converter leaves it out.
const NameTable bert_names = {"encoder.layer.",
                              "blk.",
                              {{"embeddings.word_embeddings.weight", "token_embd.weight"},
                               {"embeddings.position_embeddings.weight", "position_embd.weight"},
                               {"embeddings.token_type_embeddings.weight", "token_types.weight"},
                               {"embeddings.LayerNorm.weight", "token_embd_norm.weight"},
                               {"embeddings.LayerNorm.bias", "token_embd_norm.bias"}},
                              {{"attention.self.query.weight", "attn_q.weight"},
                               {"attention.self.query.bias", "attn_q.bias"},
                               {"attention.self.key.weight", "attn_k.weight"},
                               {"attention.self.key.bias", "attn_k.bias"},
                               {"attention.self.value.weight", "attn_v.weight"},
                               {"attention.self.value.bias", "attn_v.bias"},
                               {"attention.output.dense.weight", "attn_output.weight"},
                               {"attention.output.dense.bias", "attn_output.bias"},
                               {"attention.output.LayerNorm.weight", "attn_output_norm.weight"},
                               {"attention.output.LayerNorm.bias", "attn_output_norm.bias"},
                               {"intermediate.dense.weight", "ffn_up.weight"},
                               {"intermediate.dense.bias", "ffn_up.bias"},
                               {"output.dense.weight", "ffn_down.weight"},
                               {"output.dense.bias", "ffn_down.bias"},
                               {"output.LayerNorm.weight", "layer_output_norm.weight"},
                               {"output.LayerNorm.bias", "layer_output_norm.bias"}}};

// T5's two stacks; the feed-forward's wi is up (ReLU), wi_0 the gate and wi_1 up (gated GELU).
const NameTable t5_encoder_names = {
    "encoder.block.",
    "enc.blk.",
    {{"shared.weight", "token_embd.weight"}, {"encoder.final_layer_norm.weight", "enc.output_norm.weight"}},
    {{"layer.0.SelfAttention.q.weight", "attn_q.weight"},
     {"layer.0.SelfAttention.k.weight", "attn_k.weight"},
     {"layer.0.SelfAttention.v.weight", "attn_v.weight"},
     {"layer.0.SelfAttention.o.weight", "attn_o.weight"},
     {"layer.0.SelfAttention.relative_attention_bias.weight", "attn_rel_b.weight"},
     {"layer.0.layer_norm.weight", "attn_norm.weight"},
     {"layer.1.DenseReluDense.wi.weight", "ffn_up.weight"},
     {"layer.1.DenseReluDense.wi_0.weight", "ffn_gate.weight"},
     {"layer.1.DenseReluDense.wi_1.weight", "ffn_up.weight"},
     {"layer.1.DenseReluDense.wo.weight", "ffn_down.weight"},
     {"layer.1.layer_norm.weight", "ffn_norm.weight"}}};
const NameTable t5_decoder_names = {
    "decoder.block.",
    "dec.blk.",
    {{"lm_head.weight", "output.weight"}, {"decoder.final_layer_norm.weight", "dec.output_norm.weight"}},
    {{"layer.0.SelfAttention.q.weight", "attn_q.weight"},
     {"layer.0.SelfAttention.k.weight", "attn_k.weight"},
     {"layer.0.SelfAttention.v.weight", "attn_v.weight"},
     {"layer.0.SelfAttention.o.weight", "attn_o.weight"},
     {"layer.0.SelfAttention.relative_attention_bias.weight", "attn_rel_b.weight"},
     {"layer.0.layer_norm.weight", "attn_norm.weight"},
     {"layer.1.EncDecAttention.q.weight", "cross_attn_q.weight"},
     {"layer.1.EncDecAttention.k.weight", "cross_attn_k.weight"},
     {"layer.1.EncDecAttention.v.weight", "cross_attn_v.weight"},
     {"layer.1.EncDecAttention.o.weight", "cross_attn_o.weight"},
     {"layer.1.layer_norm.weight", "cross_attn_norm.weight"},
     {"layer.2.DenseReluDense.wi.weight", "ffn_up.weight"},
     {"layer.2.DenseReluDense.wi_0.weight", "ffn_gate.weight"},
     {"layer.2.DenseReluDense.wi_1.weight", "ffn_up.weight"},
     {"layer.2.DenseReluDense.wo.weight", "ffn_down.weight"},
     {"layer.2.layer_norm.weight", "ffn_norm.weight"}}};

StoredAs stored_as(const std::string& gguf) {
    StoredAs as;
    as.name = gguf;
    as.quantized = quantized(gguf);
    return as;
}

// The keys that both architectures' converters write alike.
void write_sizes(GgufSpec& gguf, const std::string& arch, int layers, int C, int F, int NH, int positions) {
    const auto key = [&](const std::string& name, uint32_t value) {
        gguf.metadata.emplace_back(arch + "." + name, gguf_uint32(value));
    };
    key("context_length", uint32_t(positions));
    key("embedding_length", uint32_t(C));
    key("feed_forward_length", uint32_t(F));
    key("block_count", uint32_t(layers));
    key("attention.head_count", uint32_t(NH));
}

// T5's vocabulary: a Unigram model trained with SentencePiece's default rule, T5's.
const SpmGgufVocab& t5_vocab() { return unigram_gguf_vocab("nmt_nfkc"); }

void add_metadata(GgufSpec& gguf, const GgufMetadata& more) {
    gguf.metadata.insert(gguf.metadata.end(), more.begin(), more.end());
}

}  // namespace

EncoderSpec gguf_bert_spec() {
    EncoderSpec s = encoder_spec(Encoder::bert);
    s.n_embd = 256, s.n_head = 8, s.mlp_dim = 512;
    s.vocab_size = static_cast<int>(bert_gguf_vocab().tokens.size());
    return s;
}

EncoderCheckpoint write_gguf_bert(const fs::path& file, const EncoderSpec& spec, const MatrixTypes& matrices,
                                  const std::function<void(GgufSpec&)>& edit) {
    if (spec.family != Encoder::bert || spec.vocab_size != gguf_bert_spec().vocab_size || spec.pad_id != 0)
        throw std::invalid_argument("write_gguf_bert: not a spec of BERT's GGUF vocabulary ([PAD] 0)");
    EncoderCheckpoint checkpoint = make_encoder_checkpoint(spec);
    GgufSpec gguf;
    write_gguf_header(gguf, "bert", matrices);
    write_sizes(gguf, "bert", spec.n_layer, spec.n_embd, spec.mlp_dim, spec.n_head, spec.max_positions);
    gguf.metadata.emplace_back("bert.attention.layer_norm_epsilon", gguf_float32(float(spec.norm_eps)));
    gguf.metadata.emplace_back("bert.attention.causal", gguf_bool(false));
    add_metadata(gguf, bert_gguf_tokenizer());
    gguf.metadata.emplace_back("tokenizer.ggml.token_type_count", gguf_uint32(uint32_t(spec.type_vocab_size)));
    write_tensors(
        gguf, checkpoint.tensors,
        [](const std::string& hf) {
            return stored_as(hf.starts_with("bert.") ? bert_names.gguf_name(hf.substr(5)) : "");
        },
        matrices, spec.seed);
    for (const NamedTensor& t : checkpoint.tensors)  // the loader's names are without "bert."
        if (t.name.starts_with("bert.")) matrices.fix(t.name.substr(5), matrices.written(t.name));
    if (edit) edit(gguf);
    write_gguf(file, gguf);
    return checkpoint;
}

Seq2SeqSpec gguf_t5_spec(const std::string& variant, int head_dim) {
    Seq2SeqSpec s = seq2seq_variant(variant);
    if (s.family != Seq2Seq::t5) throw std::invalid_argument("gguf_t5_spec: not a T5 variant");
    s.n_embd = 256, s.n_head = 8, s.head_dim = head_dim, s.mlp_dim = 512;
    s.buckets = 32, s.max_distance = 128;
    // The trained model has no <pad>: its <s>, which T5 does not use, pads and starts the decoder.
    const GgufVocab& vocab = t5_vocab().vocab;
    s.vocab_size = static_cast<int>(vocab.tokens.size());
    s.eos_id = token_id(vocab, "</s>");
    s.pad_id = s.start_id = token_id(vocab, "<s>");
    return s;
}

Seq2SeqCheckpoint write_gguf_t5(const fs::path& file, const Seq2SeqSpec& spec, const MatrixTypes& matrices,
                                const std::function<void(GgufSpec&)>& edit) {
    if (spec.vocab_size != int(t5_vocab().vocab.tokens.size()) || spec.eos_id != token_id(t5_vocab().vocab, "</s>"))
        throw std::invalid_argument("write_gguf_t5: not a spec of T5's GGUF vocabulary");
    Seq2SeqCheckpoint checkpoint = make_seq2seq_checkpoint(spec);
    GgufSpec gguf;
    write_gguf_header(gguf, "t5", matrices);
    write_sizes(gguf, "t5", spec.encoder_layers, spec.n_embd, spec.mlp_dim, spec.n_head, spec.max_positions);
    const auto key = [&](const std::string& name, GgufMetaValue value) {
        gguf.metadata.emplace_back("t5." + name, std::move(value));
    };
    key("decoder_block_count", gguf_uint32(uint32_t(spec.decoder_layers)));
    key("attention.key_length", gguf_uint32(uint32_t(spec.head_dim)));
    key("attention.value_length", gguf_uint32(uint32_t(spec.head_dim)));
    key("attention.layer_norm_epsilon", gguf_float32(1e-6f));
    key("attention.relative_buckets_count", gguf_uint32(uint32_t(spec.buckets)));
    key("attention.layer_norm_rms_epsilon", gguf_float32(1e-6f));
    key("decoder_start_token_id", gguf_uint32(uint32_t(spec.start_id)));
    add_metadata(gguf, t5_gguf_tokenizer(t5_vocab()));
    gguf.metadata.emplace_back("tokenizer.ggml.padding_token_id", gguf_uint32(uint32_t(spec.pad_id)));
    write_tensors(
        gguf, checkpoint.tensors,
        [](const std::string& hf) {
            const std::string encoder = t5_encoder_names.gguf_name(hf);
            return stored_as(encoder.empty() ? t5_decoder_names.gguf_name(hf) : encoder);
        },
        matrices, spec.seed);
    if (edit) edit(gguf);
    write_gguf(file, gguf);
    return checkpoint;
}

}  // namespace headscope::test
