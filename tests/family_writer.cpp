// Test support: the families' checkpoints; see family_writer.h.
#include "family_writer.h"

#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <stdexcept>

namespace headscope::test {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

const char* torch_dtype(FileDType dtype) {
    switch (dtype) {
        case FileDType::F32: return "float32";
        case FileDType::F16: return "float16";
        case FileDType::BF16: return "bfloat16";
    }
    return "";
}

json eos_json(const FamilySpec& s) { return s.eos_ids.size() == 1 ? json(s.eos_ids[0]) : json(s.eos_ids); }

// Phi-3's config.json as Phi-3.5-mini and Phi-4-mini ship it: no head_dim,
// original_max_position_embeddings at the top, LongRoPE's lists in rope_scaling.
json phi3_config_json(const FamilySpec& s) {
    json c = {{"architectures", {"Phi3ForCausalLM"}},
              {"attention_bias", false},
              {"attention_dropout", 0.0},
              {"bos_token_id", s.bos_id},
              {"embd_pdrop", 0.0},
              {"eos_token_id", eos_json(s)},
              {"hidden_act", "silu"},
              {"hidden_size", s.n_embd},
              {"initializer_range", 0.02},
              {"intermediate_size", s.mlp_dim},
              {"max_position_embeddings", s.max_positions},
              {"model_type", "phi3"},
              {"num_attention_heads", s.n_head},
              {"num_hidden_layers", s.n_layer},
              {"num_key_value_heads", s.n_kv_head},
              {"original_max_position_embeddings", s.original_max_positions},
              {"pad_token_id", s.pad_id()},
              {"partial_rotary_factor", s.rotary_pct},
              {"resid_pdrop", 0.0},
              {"rms_norm_eps", s.norm_eps},
              {"rope_scaling", nullptr},
              {"rope_theta", s.rope_theta},
              {"sliding_window", s.sliding_window > 0 ? json(s.sliding_window) : json()},
              {"tie_word_embeddings", s.tied_embeddings},
              {"torch_dtype", torch_dtype(s.dtype)},
              {"use_cache", true},
              {"vocab_size", s.vocab_size}};
    if (!s.long_factors.empty())
        c["rope_scaling"] = {
            {"long_factor", s.long_factors}, {"short_factor", s.short_factors}, {"type", s.longrope_type}};
    return c;
}

json gpt2_config_json(const FamilySpec& s) {
    return {{"activation_function", "gelu_new"},
            {"architectures", {"GPT2LMHeadModel"}},
            {"bos_token_id", s.bos_id},
            {"eos_token_id", eos_json(s)},
            {"layer_norm_epsilon", s.norm_eps},
            {"model_type", "gpt2"},
            {"n_ctx", s.max_positions},
            {"n_embd", s.n_embd},
            {"n_head", s.n_head},
            {"n_layer", s.n_layer},
            {"n_positions", s.max_positions},
            {"tie_word_embeddings", s.tied_embeddings},
            {"torch_dtype", torch_dtype(s.dtype)},
            {"vocab_size", s.vocab_size}};
}

json gpt_neox_config_json(const FamilySpec& s) {
    return {{"architectures", {"GPTNeoXForCausalLM"}},
            {"bos_token_id", s.bos_id},
            {"eos_token_id", eos_json(s)},
            {"hidden_act", "gelu"},
            {"hidden_size", s.n_embd},
            {"initializer_range", 0.02},
            {"intermediate_size", s.mlp_dim},
            {"layer_norm_eps", s.norm_eps},
            {"max_position_embeddings", s.max_positions},
            {"model_type", "gpt_neox"},
            {"num_attention_heads", s.n_head},
            {"num_hidden_layers", s.n_layer},
            {"rotary_emb_base", s.rope_theta},
            {"rotary_pct", s.rotary_pct},
            {"tie_word_embeddings", false},
            {"torch_dtype", torch_dtype(s.dtype)},
            {"use_cache", true},
            {"use_parallel_residual", s.parallel_residual},
            {"vocab_size", s.vocab_size}};
}

// Llama's, Qwen 2's, Qwen 3's, Mistral's and OLMo 2's.
json llama_config_json(const FamilySpec& s) {
    const int L = s.n_layer;
    const char* architecture = s.family == Family::llama       ? "LlamaForCausalLM"
                               : s.family == Family::qwen2     ? "Qwen2ForCausalLM"
                               : s.family == Family::qwen3     ? "Qwen3ForCausalLM"
                               : s.family == Family::olmo2     ? "Olmo2ForCausalLM"
                               : s.family == Family::mixtral   ? "MixtralForCausalLM"
                               : s.family == Family::qwen3_moe ? "Qwen3MoeForCausalLM"
                               : s.family == Family::olmoe     ? "OlmoeForCausalLM"
                                                               : "MistralForCausalLM";
    json c = {{"architectures", {architecture}}, {"model_type", model_type(s.family)}};
    if (s.family == Family::llama || s.family == Family::qwen3 || s.family == Family::olmo2 ||
        s.family == Family::qwen3_moe || s.family == Family::olmoe)
        c["attention_bias"] = s.attention_bias;
    c["attention_dropout"] = 0.0;
    c["bos_token_id"] = s.bos_id;
    c["eos_token_id"] = eos_json(s);
    if (s.write_head_dim) c["head_dim"] = s.head_dim;
    c["hidden_act"] = "silu";
    c["hidden_size"] = s.n_embd;
    c["initializer_range"] = 0.02;
    c["intermediate_size"] = s.mlp_dim;
    c["max_position_embeddings"] = s.max_positions;
    if (s.family == Family::llama) c["mlp_bias"] = false;
    if (s.family == Family::qwen2 || s.family == Family::qwen3) c["max_window_layers"] = L;
    c["num_attention_heads"] = s.n_head;
    c["num_hidden_layers"] = L;
    c["num_key_value_heads"] = s.n_kv_head;
    if (s.pad_token_id >= 0) c["pad_token_id"] = s.pad_token_id;
    if (s.family == Family::llama) c["pretraining_tp"] = 1;
    c["rms_norm_eps"] = s.norm_eps;
    if (s.rope_factor > 0)
        c["rope_scaling"] = {{"factor", s.rope_factor},
                             {"high_freq_factor", s.high_freq_factor},
                             {"low_freq_factor", s.low_freq_factor},
                             {"original_max_position_embeddings", s.original_max_positions},
                             {"rope_type", "llama3"}};
    else
        c["rope_scaling"] = nullptr;
    c["rope_theta"] = s.rope_theta;
    // Qwen's configs carry a window they do not use: use_sliding_window is false.
    if (s.family == Family::qwen2) c["sliding_window"] = 32768;
    if (s.family == Family::qwen3) c["sliding_window"] = nullptr;
    if (s.family == Family::mistral || s.family == Family::mixtral)
        c["sliding_window"] = s.sliding_window > 0 ? json(s.sliding_window) : json();
    c["tie_word_embeddings"] = s.tied_embeddings;
    c["torch_dtype"] = torch_dtype(s.dtype);
    c["use_cache"] = true;
    if (s.family == Family::qwen2 || s.family == Family::qwen3) c["use_sliding_window"] = false;
    c["vocab_size"] = s.vocab_size;
    if (s.n_experts) add_expert_keys(s, c);
    return c;
}

}  // namespace

json family_config_json(const FamilySpec& s) {
    switch (s.family) {
        case Family::gpt2: return gpt2_config_json(s);
        case Family::gpt_neox: return gpt_neox_config_json(s);
        case Family::phi3: return phi3_config_json(s);
        case Family::gemma2:
        case Family::gemma3_text:
        case Family::gemma3: return gemma_config_json(s);
        case Family::gpt_oss: return gpt_oss_config_json(s);
        default: return llama_config_json(s);
    }
}

void draw_tensor(std::vector<NamedTensor>& tensors, std::mt19937_64& rng, const std::string& name,
                 std::vector<int64_t> shape, float mean, float std, FileDType dtype) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    std::normal_distribution<float> normal(mean, std);
    std::vector<float> values(static_cast<size_t>(n));
    for (float& v : values) v = rounded(normal(rng), dtype);
    tensors.push_back({name, std::move(shape), std::move(values)});
}

void write_f32_tensors(const std::filesystem::path& file, const std::vector<NamedTensor>& tensors) {
    std::vector<RawTensor> raw;
    for (const NamedTensor& t : tensors)
        raw.push_back({t.name, dtype_name(FileDType::F32), t.shape, encode(t.values, FileDType::F32)});
    write_safetensors(file, raw);
}

const char* model_type(Family family) {
    switch (family) {
        case Family::llama: return "llama";
        case Family::qwen2: return "qwen2";
        case Family::qwen3: return "qwen3";
        case Family::mistral: return "mistral";
        case Family::gpt_neox: return "gpt_neox";
        case Family::gpt2: return "gpt2";
        case Family::olmo2: return "olmo2";
        case Family::phi3: return "phi3";
        case Family::gemma2: return "gemma2";
        case Family::gemma3_text: return "gemma3_text";
        case Family::gemma3: return "gemma3";
        case Family::mixtral: return "mixtral";
        case Family::qwen3_moe: return "qwen3_moe";
        case Family::olmoe: return "olmoe";
        case Family::gpt_oss: return "gpt_oss";
    }
    return "";
}

bool gemma(Family family) {
    return family == Family::gemma2 || family == Family::gemma3_text || family == Family::gemma3;
}

namespace {

// The family's spec with its real tokenizer's ids, before the test vocabulary's cut.
FamilySpec real_family_spec(Family family) {
    FamilySpec s;
    s.family = family;
    switch (family) {
        case Family::llama:  // Llama 3's tokenizer
            s.vocab_size = 128256, s.bos_id = 128000, s.eos_ids = {128001};
            break;
        case Family::qwen2:  // Qwen's tokenizer; 151936 rows, past its last id 151668 (8293 past 8025, cut)
            s.vocab_size = 151936, s.bos_id = 151643, s.eos_ids = {151643};
            s.write_head_dim = false, s.norm_eps = 1e-6, s.rope_theta = 1e6, s.tied_embeddings = true;
            break;
        case Family::qwen3:
            s.vocab_size = 151936, s.bos_id = 151643, s.eos_ids = {151645};
            s.norm_eps = 1e-6, s.rope_theta = 1e6, s.tied_embeddings = true;
            break;
        case Family::mistral:  // Llama 2's tokenizer
            s.vocab_size = 32000, s.bos_id = 1, s.eos_ids = {2};
            break;
        case Family::gpt_neox:  // GPT-2's tokenizer, in Pythia's 50304 rows
            s.vocab_size = 50304, s.bos_id = 50256, s.eos_ids = {50256};
            s.write_head_dim = false, s.rotary_pct = 0.25;
            break;
        case Family::olmo2:  // Llama 3's tokenizer stands in for OLMo 2's own (cl100k's), which no reference ships
            s.vocab_size = 128256, s.bos_id = 128000, s.eos_ids = {128001}, s.pad_token_id = 128004;
            s.norm_eps = 1e-6, s.rope_theta = 500000;
            break;
        case Family::gpt2:  // GPT-2's own tokenizer; learned positions, tied, an MLP of 4C
            s.vocab_size = 50257, s.bos_id = 50256, s.eos_ids = {50256};
            s.write_head_dim = false, s.rotary_pct = 0, s.tied_embeddings = true, s.mlp_dim = 4 * s.n_embd;
            break;
        case Family::phi3:  // Phi-3's: Llama 2's tokenizer in 32064 rows, <|endoftext|> its eos and pad
            s.vocab_size = 32064, s.bos_id = 1, s.eos_ids = {32000}, s.pad_token_id = 32000;
            s.write_head_dim = false, s.original_max_positions = 4096;
            break;
        case Family::gemma2:       // Llama 2's tokenizer (SentencePiece BPE with byte fallback, as Gemma's) stands in
        case Family::gemma3_text:  // for Gemma's own, which no reference here ships; tied, as Gemma is
        case Family::gemma3:
            s.vocab_size = 32000, s.bos_id = 1, s.eos_ids = {2}, s.pad_token_id = 0;
            s.norm_eps = 1e-6, s.tied_embeddings = true, s.head_dim = 16;
            s.rope_theta = family == Family::gemma2 ? 10000 : 1e6;
            break;
        // Llama 2's tokenizer, Mixtral's own, stands in for Qwen's and OLMoE's
        // (GPT-NeoX's): a small vocabulary keeps the tests of every expert short.
        case Family::mixtral:
        case Family::qwen3_moe:
        case Family::olmoe:
            s.vocab_size = 32000, s.bos_id = 1, s.eos_ids = {2};
            s.n_experts = 4, s.experts_per_token = 2, s.expert_mlp_dim = 32, s.rope_theta = 1e6;
            if (family != Family::qwen3_moe) s.mlp_dim = s.expert_mlp_dim;  // intermediate_size: the experts'
            s.write_head_dim = family == Family::qwen3_moe;
            break;
        // gpt-oss's shape in small: heads of 16, groups of 2, every attention
        // bias, a window of 4 on the even layers (0 and 2), experts of 32 (MXFP4 blocks of
        // 32 values), YaRN stretching 64 positions 32 times.
        case Family::gpt_oss:
            s.vocab_size = 32000, s.bos_id = 1, s.eos_ids = {2};
            s.n_embd = 64, s.head_dim = 16, s.attention_bias = true, s.sliding_window = 4;
            s.n_experts = 4, s.experts_per_token = 2, s.expert_mlp_dim = s.mlp_dim = 32, s.rope_theta = 150000;
            s.original_max_positions = 64, s.max_positions = 2048;
            break;
    }
    return s;
}

// `s`'s vocabulary and special ids moved to `vocabulary` (from the whole tokenizer's).
FamilySpec with_vocabulary(FamilySpec s, Vocabulary vocabulary) {
    s.vocabulary = vocabulary;
    if (vocabulary == Vocabulary::whole) return s;
    const auto cut = [&](int id) { return id < 0 ? id : test_vocabulary_id(s.family, id); };
    s.vocab_size = cut(s.vocab_size);
    s.bos_id = cut(s.bos_id), s.pad_token_id = cut(s.pad_token_id);
    for (int& id : s.eos_ids) id = cut(id);
    return s;
}

}  // namespace

FamilySpec family_spec(Family family, Vocabulary vocabulary) {
    return with_vocabulary(real_family_spec(family), vocabulary);
}

std::vector<FamilyVariant> family_variants(Vocabulary vocabulary) {
    std::vector<FamilyVariant> variants;
    const auto add = [&](const char* name, Family family, auto&& adjust) {
        FamilySpec spec = real_family_spec(family);
        adjust(spec);
        variants.push_back({name, with_vocabulary(spec, vocabulary)});
    };
    // Llama 3.0: no head_dim in config.json, groups of 2.
    add("llama", Family::llama, [](FamilySpec& s) { s.write_head_dim = false, s.rope_theta = 500000; });
    // Llama 3.1: rope scaling whose original length (256) puts one of the
    // head's 4 frequencies between the bounds and two past them; groups of 3,
    // heads of 8 that make 48 columns from C = 32.
    add("llama3_scaled", Family::llama, [](FamilySpec& s) {
        s.n_head = 6, s.n_kv_head = 2, s.rope_theta = 500000;
        s.rope_factor = 8, s.low_freq_factor = 1, s.high_freq_factor = 4, s.original_max_positions = 256;
    });
    // Tied, with every attention bias, no grouping, a list of eos ids and a pad id of its own.
    add("llama_tied", Family::llama, [](FamilySpec& s) {
        s.n_kv_head = 4, s.tied_embeddings = true, s.attention_bias = true;
        s.eos_ids = {128001, 128008, 128009}, s.pad_token_id = 128004;
    });
    add("qwen2", Family::qwen2, [](FamilySpec&) {});
    // Heads of 16: 64 columns from C = 32.
    add("qwen3", Family::qwen3, [](FamilySpec& s) { s.head_dim = 16; });
    // Groups of 4 and a window of 4 keys.
    add("mistral", Family::mistral, [](FamilySpec& s) { s.n_kv_head = 1, s.sliding_window = 4; });
    // Pythia: heads of 16, of which a quarter (4 dims) rotate.
    const auto pythia = [](bool parallel) {
        return [parallel](FamilySpec& s) {
            s.n_embd = 48, s.n_head = 3, s.head_dim = 16, s.mlp_dim = 192, s.parallel_residual = parallel;
        };
    };
    // OLMo 2: groups of 2, so that K's whole-projection norm spans NKV * hs = 16
    // values and Q's 32; and one with every attention bias, ungrouped.
    add("olmo2", Family::olmo2, [](FamilySpec&) {});
    add("olmo2_biased", Family::olmo2, [](FamilySpec& s) { s.n_kv_head = 4, s.attention_bias = true; });
    add("gpt_neox_parallel", Family::gpt_neox, pythia(true));
    add("gpt_neox_sequential", Family::gpt_neox, pythia(false));
    // Phi-3-mini-4k's shape: qkv_proj with groups of 2, gate_up_proj, a window of 5 keys.
    add("phi3", Family::phi3, [](FamilySpec& s) { s.sliding_window = 5; });
    // Phi-4-mini's: three quarters of each head's 8 dims rotate (3 pairs),
    // tied; LongRoPE switching at 8 positions, so that the test texts padded
    // to 11 take the long factors and the 7 tokens of the second alone the
    // short ones; 512 positions make its attention factor sqrt(1 + ln 64 / ln 8) = sqrt(3).
    add("phi3_longrope", Family::phi3, [](FamilySpec& s) {
        s.rotary_pct = 0.75, s.tied_embeddings = true, s.max_positions = 512, s.original_max_positions = 8;
        s.short_factors = {1.0, 1.5, 3.0}, s.long_factors = {2.0, 5.0, 11.0};
    });
    // The older name "su", every dim rotating, switching at 16 (the texts take
    // the short factors), attention factor sqrt(1 + ln 32 / ln 16) = 1.5.
    add("phi3_su", Family::phi3, [](FamilySpec& s) {
        s.n_kv_head = 1, s.max_positions = 512, s.original_max_positions = 16, s.longrope_type = "su";
        s.short_factors = {1.0, 1.25, 2.0, 4.0}, s.long_factors = {1.0, 3.0, 7.0, 13.0};
    });
    // Gemma 2: heads of 16 from C = 48 (whose sqrt, 6.93, bfloat16 rounds
    // to 6.94), query_pre_attn_scalar 12 (steep scores the cap then bends),
    // caps that bend the scores and the logits, a window of 3 keys on layers 0 and 2.
    add("gemma2", Family::gemma2, [](FamilySpec& s) {
        s.n_embd = 48, s.sliding_window = 3, s.query_pre_attn_scalar = 12, s.attn_softcap = 1.5, s.final_softcap = 2;
    });
    // Gemma 3: six layers, so that layer 5 is global (rope_theta 1e6 divided
    // by the linear factor 8) and the others local (theta 100), a window of
    // 4; query_pre_attn_scalar 6 scales its q/k-normed heads into peaked maps.
    // Seed 2: seed 1's draw, with the texts' tokens of the cut vocabulary,
    // gives two wide re-split heads unscaled scores so steep that float32's
    // rounding alone moves their weights by 1.3e-5 (family_tensors.cpp).
    const auto gemma3 = [](FamilySpec& s) {
        s.n_layer = 6, s.sliding_window = 4, s.query_pre_attn_scalar = 6, s.local_rope_theta = 100;
        s.rope_linear_factor = 8, s.seed = 2;
    };
    add("gemma3_text", Family::gemma3_text, gemma3);
    // A gemma3 checkpoint: text_config, the language_model.model. prefix, a
    // vision tower's tensor, layer_types, the eos list at the top only.
    add("gemma3", Family::gemma3, [&](FamilySpec& s) {
        gemma3(s);
        s.write_layer_types = true, s.eos_ids = {2, 106}, s.final_softcap = 3;
    });
    // Mixtures of experts: Mixtral's 4 experts, 2 a token, renormalized, its
    // window null; Qwen 3 MoE's 8, 3 a token, renormalized (norm_topk_prob),
    // layer 1 dense (mlp_only_layers); OLMoE's 6, 2 a token, not renormalized.
    add("mixtral", Family::mixtral, [](FamilySpec&) {});
    add("qwen3_moe", Family::qwen3_moe, [](FamilySpec& s) {
        s.n_experts = 8, s.experts_per_token = 3, s.norm_topk_prob = true, s.mlp_only_layers = {1};
    });
    add("olmoe", Family::olmoe, [](FamilySpec& s) { s.n_experts = 6, s.n_kv_head = 4; });
    // gpt-oss (family_spec's shape) with a swiglu_limit of 0.3, which its experts' gates and ups cross.
    add("gpt_oss", Family::gpt_oss, [](FamilySpec& s) { s.swiglu_limit = 0.3; });
    return variants;
}

std::vector<std::vector<int32_t>> family_texts(const FamilySpec& spec) {
    const int V = spec.vocab_size;
    return {{spec.bos_id, 9, 1000, 2024, V / 2, 17, 300, V - 1, 42, 5, 7777}, {spec.bos_id, 64, V - 2, 12, 901, 33, 2}};
}

const std::vector<float>* FamilyCheckpoint::find(const std::string& name) const {
    for (const auto* list : {&tensors, &unpacked})
        for (const NamedTensor& t : *list)
            if (t.name == name) return &t.values;
    return nullptr;
}

const std::vector<float>& FamilyCheckpoint::operator[](const std::string& name) const {
    if (const std::vector<float>* values = find(name)) return *values;
    throw std::out_of_range("test checkpoint has no tensor " + name);
}

std::string shard_file_name(int index, int count) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05d-of-%05d.safetensors", index, count);
    return name;
}

void write_family_checkpoint(const fs::path& dir, const FamilyCheckpoint& checkpoint,
                             const std::vector<RawTensor>& extra) {
    const FamilySpec& spec = checkpoint.spec;
    fs::create_directories(dir);
    std::ofstream(dir / "config.json") << checkpoint.config.dump(2) << "\n";

    const size_t n = checkpoint.tensors.size();
    std::vector<std::vector<RawTensor>> shards(static_cast<size_t>(spec.shards));
    json weight_map = json::object();
    uint64_t total_size = 0;
    const auto add = [&](size_t shard, RawTensor t) {
        weight_map[t.name] = shard_file_name(static_cast<int>(shard) + 1, spec.shards);
        total_size += t.bytes.size();
        shards[shard].push_back(std::move(t));
    };
    for (size_t i = 0; i < n; ++i) {
        const NamedTensor& t = checkpoint.tensors[i];
        add(i * shards.size() / n, {t.name, dtype_name(spec.dtype), t.shape, encode(t.values, spec.dtype)});
    }
    for (const RawTensor& t : checkpoint.packed) add(shards.size() - 1, t);
    for (const RawTensor& t : extra) add(shards.size() - 1, t);
    if (spec.shards == 1) {
        write_safetensors(dir / "model.safetensors", shards[0]);
    } else {
        for (size_t s = 0; s < shards.size(); ++s)
            write_safetensors(dir / shard_file_name(static_cast<int>(s) + 1, spec.shards), shards[s]);
        const json index = {{"metadata", {{"total_size", total_size}}}, {"weight_map", weight_map}};
        std::ofstream(dir / "model.safetensors.index.json") << index.dump(2) << "\n";
    }

    write_family_tokenizer(dir, spec);
}

}  // namespace headscope::test
