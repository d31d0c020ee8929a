// A model loaded from a Hugging Face directory (config.json, model.safetensors
// or its shards with model.safetensors.index.json, tokenizer.json or
// vocab.json + merges.txt), a hub name in the local HF cache, or a GGUF file
// (llama.cpp's, quantized or not): any family of model_description.h.
// Matrices stay memory-mapped in the file's dtype (base/matrix.h); vectors
// are float32.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "headscope/base/aligned.h"
#include "headscope/base/matrix.h"
#include "headscope/base/progress.h"
#include "headscope/model/model_description.h"
#include "headscope/tokenize/tokenizer.h"

namespace headscope {

class SafetensorsFile;  // safetensors.h
struct GgufModelFiles;  // gguf.h

// One expert of a mixture: a SwiGLU MLP, down(SiLU(gate x) * up x)
// (gpt-oss's clamped one: Config::swiglu_limit).
struct ExpertWeights {
    Matrix gate, up;                                 // C -> Fe
    Matrix down;                                     // Fe -> C
    const float *gate_b = nullptr, *up_b = nullptr;  // (Fe) gpt-oss's biases, else none
    const float* down_b = nullptr;                   // (C)
};

// One layer's weights; a weight the family lacks is null (an empty Matrix).
// Vectors are float32 (C) unless noted; matrices stay as the file has them.
struct LayerWeights {
    const float* ln_1_w = nullptr;
    const float* ln_1_b = nullptr;  // null for RMSNorm
    Matrix attn;                    // fused Q, K, V (GPT-2, Pythia: see qkv_columns)
    const float* attn_b = nullptr;  // (NH * hs + 2 * NKV * hs)
    Matrix q, k, v;                 // separate projections (C -> NH * hs, NKV * hs, NKV * hs)
    const float *q_b = nullptr, *k_b = nullptr, *v_b = nullptr;
    const float *q_norm = nullptr, *k_norm = nullptr;  // (hs) Qwen 3; (NH * hs), (NKV * hs) OLMo 2
    const float* sinks = nullptr;                      // (NH) gpt-oss's logit per head (attention_sinks)
    Matrix attn_proj;                                  // NH * hs -> C
    const float* attn_proj_b = nullptr;
    const float* ln_2_w = nullptr;
    const float* ln_2_b = nullptr;
    const float *attn_out_norm = nullptr, *mlp_out_norm = nullptr;  // OLMo 2: on each sublayer's output
    Matrix fc, gate;                                                // C -> F (gate: SwiGLU and GeGLU only)
    Matrix gate_up;  // C -> 2F, [gate | up] (GeGLU's fused Wi), whose halves gate and fc are
    const float* fc_b = nullptr;
    Matrix fc_proj;  // F -> C
    const float* fc_proj_b = nullptr;
    // An encoder–decoder's decoder layer: the cross-attention (queries C -> NH
    // * hs from the decoder, keys and values C -> NKV * hs from the encoder's
    // output, NH * hs -> C) and its norm.
    Matrix cross_q, cross_k, cross_v, cross_proj;
    const float *cross_q_b = nullptr, *cross_k_b = nullptr, *cross_v_b = nullptr, *cross_proj_b = nullptr;
    const float *ln_x_w = nullptr, *ln_x_b = nullptr;
    // A layer of experts (Config::expert_layer), in place of the MLP: the
    // router C -> E and the E experts; none elsewhere.
    Matrix router;
    const float* router_b = nullptr;  // (E) gpt-oss's
    std::vector<ExpertWeights> experts;
};

struct TensorInfo {
    std::string name;  // as in the file, e.g. "transformer.h.0.attn.c_attn.weight"
    std::vector<int64_t> shape;
    DType dtype = DType::F32;  // as the file stores it
    int64_t bytes = 0;         // in the file
};

// Move-only: the weights point into `files` (memory-mapped) and `storage`,
// which a move hands over intact but a copy would not.
struct Model {
    Model();
    ~Model();
    Model(Model&&) noexcept;
    Model& operator=(Model&&) noexcept;
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    std::filesystem::path path;  // the resolved directory, or GGUF file
    std::string file_type;       // a GGUF file's quantization (its general.file_type: "Q4_K_M"), else ""
    Config config;
    Tokenizer tokenizer;
    std::vector<TensorInfo> tensors;  // sorted by name
    int64_t params = 0;               // number of weights (the tied output embedding counted once)
    DType dtype = DType::F32;         // of the checkpoint's matrices
    int64_t file_bytes = 0;           // of its safetensors files together

    std::vector<std::unique_ptr<SafetensorsFile>> files;  // the mapped shards
    std::shared_ptr<const GgufModelFiles> gguf;           // or the mapped GGUF file and its parts
    AlignedVector<float> storage;                         // vectors as float32, and any matrix the map could not serve
    // gpt-oss's packed experts (Config::packed_experts) repacked: their
    // matrices as ggml's MXFP4 blocks, their biases as float32.
    std::vector<std::byte> expert_blocks;
    std::vector<float> expert_biases;
    Matrix wte;                        // (V, C) token embedding
    Matrix wpe;                        // (n_positions, C) learned positions, else none
    Matrix lm_head;                    // C -> V: the output embedding (wte's bytes when tied)
    std::vector<LayerWeights> layers;  // (L)
    const float* ln_f_w = nullptr;     // (C)
    const float* ln_f_b = nullptr;     // (C), null for RMSNorm
    // Encoders (null where the family has none):
    Matrix wtt;                                            // (type_vocab_size, C) token types
    const float *emb_ln_w = nullptr, *emb_ln_b = nullptr;  // (C) the embeddings' LayerNorm
    Matrix head_dense;                                     // C -> C the masked-LM head's transform
    const float *head_dense_b = nullptr, *head_ln_w = nullptr, *head_ln_b = nullptr;  // (C)
    const float* lm_bias = nullptr;  // (V) on the logits (the masked-LM head's, BART's final_logits_bias)
    Matrix rel_bias;                 // (relative_buckets, NH) T5's position bias
    // An encoder–decoder's encoder (encoder_config): its weights point into
    // this model's files, and it has no tokenizer or path of its own (this
    // model's tokenize its source). Null for other models.
    std::unique_ptr<Model> encoder;
};

// How the weights are stored: each dtype's tensor count, and the bits per
// weight over every tensor (a GGUF file's mix of types, e.g. Q4_K_M's 4.9).
struct WeightStorage {
    std::map<std::string, int> tensors_by_dtype;  // "Q4_K" -> 96
    double bits_per_weight = 0;
};
WeightStorage weight_storage(const Model& model);

// "Q4_K_M, 4.9 bits per weight" for a GGUF file, "BF16" for a checkpoint of
// one dtype, "BF16 and F32" otherwise: what the window's model bar shows.
std::string storage_summary(const Model& model);

// The name of the model Headscope ships and opens by default: the directory
// $HEADSCOPE_BUILTIN_MODEL if set, else assets/builtin of the source tree.
inline constexpr const char* builtin_model = "builtin";

// `builtin_model`, a directory path, a GGUF file (named .gguf, or starting
// "GGUF"), a hub name ("gpt2", "openai-community/gpt2-medium") looked up in
// the local Hugging Face cache, or else a name in a local store of GGUF
// models, tried in this order (the file each gives):
//   Ollama's, $OLLAMA_MODELS or ~/.ollama/models: "llama3.2:1b", "llama3.2"
//     (tag latest), "library/llama3.2:1b", "user/model:tag",
//     "registry.ollama.ai/library/llama3.2:1b": the blob its manifest names;
//   LM Studio's, ~/.lmstudio/models then ~/.cache/lm-studio/models:
//     "publisher/model" (its folder's one GGUF model), "publisher/model:stem"
//     (<stem>.gguf there), "publisher/model/file.gguf";
//   llama.cpp's cache, $LLAMA_CACHE or ~/.cache/llama.cpp: a file name there,
//     ".gguf" optional.
// Never downloads. Throws Error when none of these, saying where it looked,
// and when a store holds the name but its entry is wrong.
std::filesystem::path resolve_model_path(const std::string& name_or_path);

// Throws Error naming the file, tensor or field on any problem.
// `progress`, if given, hears "reading the weights" in bytes: 0 before the
// first tensor, then after each tensor is read (its every value checked, or
// converted to float32) the bytes of the tensors read so far, ending at the
// total of every tensor the model uses. Cancelled thrown by it ends the load,
// which returns nothing.
Model load_model(const std::string& name_or_path, const Progress& progress = {});

// An encoder–decoder's decoder input for the target text: its start token,
// then the target as the tokenizer encodes it with its special tokens, less
// a final end-of-sequence token (the labels shifted right, as transformers
// trains them: BART's </s> <s> ...). "" gives the start token alone, where
// transformers' generation starts (BART's <s> is then a generated token).
std::vector<int32_t> decoder_input_ids(const Model& model, std::string_view target);

// A model of a supported family in the local Hugging Face cache.
struct CachedModel {
    std::string name;            // the hub name load_model takes, e.g. "openai-community/gpt2"
    std::filesystem::path path;  // the snapshot resolve_model_path picks
};

// The cache's models whose config.json names a supported model_type, by name.
// Unreadable entries are left out; a missing cache gives none.
std::vector<CachedModel> list_cached_models();

// A GGUF model in Ollama's store, LM Studio's folders or llama.cpp's cache.
struct GgufModel {
    std::string name;            // as resolve_model_path takes it: "llama3.2:1b", "publisher/model"
    std::filesystem::path path;  // the file resolve_model_path gives (a split model's first part)
    uint64_t bytes = 0;          // on disk, every part of a split model
    std::string quantization;    // general.file_type's name ("Q4_K_M"); "" when the file has none
    std::string title;           // general.name; "" when absent
    std::string architecture;    // general.architecture ("llama"); "" when absent
};

// The GGUF models of those stores, by name, each read with its metadata.
// Unreadable entries are left out; missing stores give none.
std::vector<GgufModel> list_gguf_models();

}  // namespace headscope
