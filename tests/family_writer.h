// Test support: random-weight checkpoints of today's families (Llama, Qwen 2,
// Qwen 3, Mistral, GPT-NeoX, GPT-2, OLMo 2, Phi-3, Gemma 2 and 3) as Hugging Face saves them: the family's real
// config.json keys, tensor names and layouts, in one model.safetensors or in
// shards with model.safetensors.index.json, beside a real tokenizer: whole,
// for the programs given text, or cut to its first 8000 ids for the tests
// given ids (family_tokenizers.cpp), whose tiny models' every forward would
// otherwise spend most of its time on 128k or 152k output rows. The
// weights stay here as floats, as rounded to the file's dtype, so that
// family_reference reads them from the writer and never through the loader.
// Legend: C channels, V vocab, NH query heads, NKV key/value heads, hs head
// size, F the MLP's hidden size.
#pragma once
#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "model_writer.h"

namespace headscope::test {

// The family's tokenizer: as it ships, or cut to its first 8000 ids (test_vocabulary_id).
enum class Vocabulary { whole, test_cut };

// gemma3: a Gemma3ForConditionalGeneration checkpoint's language model (text_config).
// mixtral, qwen3_moe and olmoe: mixtures of experts (moe_writer.cpp);
// gpt_oss too, its experts packed as MXFP4 (gpt_oss_writer.cpp).
enum class Family {
    llama,
    qwen2,
    qwen3,
    mistral,
    gpt_neox,
    gpt2,
    olmo2,
    phi3,
    gemma2,
    gemma3_text,
    gemma3,
    mixtral,
    qwen3_moe,
    olmoe,
    gpt_oss
};
const char* model_type(Family family);  // config.json's model_type
bool gemma(Family family);              // Gemma 2 or 3

struct FamilySpec {
    Family family = Family::llama;
    int n_layer = 3;
    int n_embd = 32;             // C
    int n_head = 4;              // NH
    int n_kv_head = 2;           // NKV; GPT-NeoX and GPT-2 have no grouping (NH)
    int head_dim = 8;            // hs; must be C / NH where config.json does not say
    bool write_head_dim = true;  // config.json names head_dim (Qwen 2 and GPT-NeoX never do)
    int mlp_dim = 64;            // F, intermediate_size
    // Llama and Qwen 3: biases on q, k, v and o. Qwen 2 always has q, k and v
    // biases, and GPT-NeoX every bias.
    bool attention_bias = false;
    bool tied_embeddings = false;
    double norm_eps = 1e-5;  // rms_norm_eps or layer_norm_eps
    double rope_theta = 10000;
    // Llama 3's rope_scaling (rope_type "llama3"); factor 0: none.
    double rope_factor = 0, low_freq_factor = 1, high_freq_factor = 4;
    int original_max_positions = 8192;  // also Phi-3's original_max_position_embeddings, LongRoPE's switch length
    double rotary_pct = 1;              // GPT-NeoX's rotary_pct, Phi-3's partial_rotary_factor (GPT-2: 0, none)
    // Phi-3's LongRoPE (rope_scaling of type longrope_type): one factor per
    // pair of rotary dims each; empty: no rope_scaling.
    std::vector<double> short_factors, long_factors;
    std::string longrope_type = "longrope";
    bool parallel_residual = true;  // GPT-NeoX's use_parallel_residual
    int sliding_window = 0;         // Mistral: query i sees keys j > i - window; 0: null
    // Gemma: the head scale's query_pre_attn_scalar, the soft-caps (0:
    // null), Gemma 3's local rope base and its global layers' linear
    // rope_scaling factor (0: none), and whether the layers' types are
    // written as layer_types (else Gemma 3's sliding_window_pattern, 6).
    double query_pre_attn_scalar = 0, attn_softcap = 0, final_softcap = 0;
    double local_rope_theta = 0, rope_linear_factor = 0;
    bool write_layer_types = false;
    int window_pattern = 0;  // Gemma: each pattern-th layer global, the others windowed; 0: the family's 2 or 6
    int max_positions = 2048;
    // Mixtures of experts: E experts of Fe, k per token (0 experts: none);
    // Qwen 3 MoE's and OLMoE's norm_topk_prob (Mixtral always renormalizes),
    // and Qwen 3 MoE's dense layers (mlp_only_layers, decoder_sparse_step).
    int n_experts = 0, experts_per_token = 0, expert_mlp_dim = 0;
    bool norm_topk_prob = false;
    std::vector<int> mlp_only_layers;
    int decoder_sparse_step = 1;
    // gpt-oss: its experts' clamped SwiGLU's limit; YaRN's stretch is
    // max_positions / original_max_positions, its beta_fast 32 and beta_slow
    // 1, its correction dims rounded out to whole dims where yarn_truncate
    // (llama.cpp's; transformers' gpt-oss does not round them).
    double swiglu_limit = 7;
    bool yarn_truncate = false;

    // The family's tokenizer's, whole or cut (family_spec sets them).
    Vocabulary vocabulary = Vocabulary::whole;
    int vocab_size = 0;
    int bos_id = -1;
    std::vector<int> eos_ids;  // written as a number when one, else as a list
    int pad_token_id = -1;     // -1: config.json has none, and texts are padded with the first eos

    FileDType dtype = FileDType::F32;
    int shards = 1;  // 1: model.safetensors; more: that many shards and the index
    uint64_t seed = 1;

    bool expert_layer(int l) const {
        return n_experts > 0 && (l + 1) % decoder_sparse_step == 0 &&
               std::find(mlp_only_layers.begin(), mlp_only_layers.end(), l) == mlp_only_layers.end();
    }
    // A layer's names of the router and of expert e's gate, up and down (moe_writer.cpp).
    std::string router_name(int l) const;
    std::string expert_name(int l, int e, const char* part) const;  // part: "gate", "up" or "down"
    int kv_heads() const { return family == Family::gpt_neox || family == Family::gpt2 ? n_head : n_kv_head; }
    int pad_id() const { return pad_token_id >= 0 ? pad_token_id : eos_ids.at(0); }
    // Whether layer l has the sliding window (with one at all): Gemma 2's
    // and gpt-oss's even layers, Gemma 3's all but each sixth (or each window_pattern-th);
    // every layer of the others.
    bool windowed(int l) const {
        if (!sliding_window) return false;
        const int pattern = window_pattern                                          ? window_pattern
                            : family == Family::gemma2 || family == Family::gpt_oss ? 2
                                                                                    : 6;
        return !(gemma(family) || family == Family::gpt_oss) || (l + 1) % pattern != 0;
    }
    // The prefix of the language model's tensor names: "model.", a gemma3
    // checkpoint's older "language_model.model.".
    std::string model_prefix() const { return family == Family::gemma3 ? "language_model.model." : "model."; }
};

// A small model of `family` with its tokenizer's vocabulary and special ids
// (whole or cut), its biases and rope_theta as its real checkpoints have them.
FamilySpec family_spec(Family family, Vocabulary vocabulary = Vocabulary::test_cut);

// The family's tokenizer cut to its first 8000 ids: its BPE pieces below
// that and the merges between them, its special tokens (and the rows past
// them) renumbered from 8000 on. test_vocabulary_id moves a real id there
// (std::invalid_argument for a cut one); write_family_tokenizer writes
// `spec`'s tokenizer, whole or cut, into `dir` (tokenizer.json and
// tokenizer_config.json, or vocab.json and merges.txt for GPT-2's).
int test_vocabulary_id(Family family, int id);
void write_family_tokenizer(const std::filesystem::path& dir, const FamilySpec& spec);

// The tests' models, each named, shaped to exercise its family's features:
// grouped K/V heads (groups of 2, 3 and 4, and none), a head size other than
// C / NH, Llama 3's rope scaling (reaching the test texts' positions), tied
// and untied embeddings, biases, a sliding window shorter than the texts,
// partial rotary, parallel and sequential residuals.
struct FamilyVariant {
    std::string name;
    FamilySpec spec;
};
std::vector<FamilyVariant> family_variants(Vocabulary vocabulary = Vocabulary::test_cut);
inline std::ostream& operator<<(std::ostream& os, const FamilyVariant& v) { return os << v.name; }

// Two texts for `spec`'s vocabulary, 11 and 7 tokens long (so that the
// second is padded), reaching its last rows.
std::vector<std::vector<int32_t>> family_texts(const FamilySpec& spec);

struct NamedTensor {
    std::string name;            // as in the family's files
    std::vector<int64_t> shape;  // as in the family's files
    std::vector<float> values;   // row-major, each as the file's dtype holds it
};

// Appends tensor `name` of `shape` to `tensors`, its values drawn from
// N(mean, std) by `rng` and rounded to `dtype`.
void draw_tensor(std::vector<NamedTensor>& tensors, std::mt19937_64& rng, const std::string& name,
                 std::vector<int64_t> shape, float mean, float std, FileDType dtype = FileDType::F32);
// Appends `spec`'s (V, C) token table `name`, drawn by draw_tensor; for a
// cut vocabulary drawn as the whole tokenizer's, of which it keeps the rows
// of the ids the cut keeps: the other weights, drawn after it, are the
// whole model's.
void draw_vocabulary_table(std::vector<NamedTensor>& tensors, std::mt19937_64& rng, const FamilySpec& spec,
                           const std::string& name, float mean, float std);
// `tensors` as one float32 safetensors file.
void write_f32_tensors(const std::filesystem::path& file, const std::vector<NamedTensor>& tensors);

struct FamilyCheckpoint {
    FamilySpec spec;
    nlohmann::json config;             // config.json, its keys sorted as Hugging Face writes them
    std::vector<NamedTensor> tensors;  // in the order of the files
    // gpt-oss's experts: written as their MXFP4 blocks and scales (`packed`,
    // after the tensors), found by name as the floats they hold (`unpacked`:
    // gate_up_proj (E, 2Fe, C), rows interleaving gate and up, and down_proj (E, C, Fe)).
    std::vector<RawTensor> packed;
    std::vector<NamedTensor> unpacked;

    // The values of tensor `name`: null when there is none, or (operator[])
    // std::out_of_range naming it.
    const std::vector<float>* find(const std::string& name) const;
    const std::vector<float>& operator[](const std::string& name) const;
};

// Seeded random weights for `spec`, drawn so that attention maps are peaked
// rather than uniform.
FamilyCheckpoint make_family_checkpoint(const FamilySpec& spec);

// Writes `checkpoint` into `dir` (created if needed): config.json, its
// tensors (split in order into spec.shards files, with the index naming each
// tensor's, when more than one) and the family's tokenizer files. A tensor
// listed twice is written twice: the index names its later file. `extra`
// tensors, written as given, follow in the last file: the buffers that older
// checkpoints saved beside the weights.
void write_family_checkpoint(const std::filesystem::path& dir, const FamilyCheckpoint& checkpoint,
                             const std::vector<RawTensor>& extra = {});

// `spec`'s config.json, its keys sorted as Hugging Face writes them.
nlohmann::json family_config_json(const FamilySpec& spec);

// Gemma's config.json (a gemma3 checkpoint's with the language model's in
// text_config) and its tensors, drawn into `out` by `rng` (gemma_writer.cpp).
nlohmann::json gemma_config_json(const FamilySpec& spec);
void draw_gemma_tensors(FamilyCheckpoint& out, std::mt19937_64& rng);

// A mixture of experts' keys added to its config.json `c` (moe_writer.cpp).
void add_expert_keys(const FamilySpec& spec, nlohmann::json& c);
// A layer's router and experts (Linear (out, in)) drawn into `out`, its names `spec`'s.
void draw_expert_tensors(FamilyCheckpoint& out, std::mt19937_64& rng, int layer);
// gpt-oss's: its router and bias, its experts packed with their biases (gpt_oss_writer.cpp).
void draw_gpt_oss_experts(FamilyCheckpoint& out, std::mt19937_64& rng, int layer);
// gpt-oss's config.json.
nlohmann::json gpt_oss_config_json(const FamilySpec& spec);

// Hugging Face's name for shard `index` (from 1) of `count`: model-00001-of-00003.safetensors.
std::string shard_file_name(int index, int count);

}  // namespace headscope::test
