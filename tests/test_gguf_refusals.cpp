// GGUF files the model loader refuses, each one line naming the file and the
// problem: what it cannot read, and each architecture's missing keys and
// misshapen tensors (part of test_gguf_models, whose files these are).
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

#include "gguf_models.h"
#include "gguf_writer.h"
#include "headscope/base/error.h"
#include "headscope/model/model.h"
#include "model_writer.h"

using namespace headscope;
using namespace headscope::test;
namespace fs = std::filesystem;

namespace {

using Edit = std::function<void(GgufSpec&)>;
using Writer = std::function<void(const fs::path&, const Edit&)>;

// A file of each architecture, its matrices in Q6_K (BERT's and T5's in F32).
Writer family_file(Family family) {
    return [family](const fs::path& file, const Edit& edit) {
        write_gguf_family(file, gguf_family_spec(family), DType::Q6_K, edit);
    };
}
void bert_file(const fs::path& file, const Edit& edit) { write_gguf_bert(file, gguf_bert_spec(), DType::F32, edit); }
void t5_file(const fs::path& file, const Edit& edit) {
    write_gguf_t5(file, gguf_t5_spec("flan_t5", 32), DType::F32, edit);
}

// A file written by `write`, then changed by `edit`, must be refused with
// one line naming the file and holding `want`.
void expect_refused(const std::string& want, const Edit& edit, const Writer& write = family_file(Family::qwen2)) {
    TempDir dir;
    const fs::path file = dir.path / "model.gguf";
    write(file, edit);
    try {
        load_model(file.string());
        ADD_FAILURE() << "loaded; wanted an error with: " << want;
    } catch (const Error& e) {
        const std::string what = e.what();
        EXPECT_NE(what.find(want), std::string::npos) << what;
        EXPECT_EQ(what.find('\n'), std::string::npos) << what;
        EXPECT_EQ(what.rfind(file.string(), 0), 0u) << what;
    }
}

// `edit` taking key `key` out.
Edit without_key(const std::string& key) {
    return [key](GgufSpec& s) { std::erase_if(s.metadata, [&](const auto& kv) { return kv.first == key; }); };
}

GgufTensorSpec& tensor(GgufSpec& spec, const std::string& name) {
    for (GgufTensorSpec& t : spec.tensors)
        if (t.name == name) return t;
    throw std::out_of_range(name);
}

TEST(GgufModelFiles, WhatTheLoaderCannotReadIsOneLineNamingIt) {
    expect_refused("GGUF files of architecture 'gemma9' are not read yet", [](GgufSpec& s) {
        s.metadata.front().second = gguf_string("gemma9");
        for (auto& [key, value] : s.metadata)
            if (key.starts_with("qwen2.")) key = "gemma9." + key.substr(6);
    });
    expect_refused("key 'qwen2.block_count' missing", [](GgufSpec& s) {
        std::erase_if(s.metadata, [](const auto& kv) { return kv.first == "qwen2.block_count"; });
    });
    expect_refused("tensor 'blk.0.attn_qq.weight' is not one of architecture qwen2's",
                   [](GgufSpec& s) { tensor(s, "blk.0.attn_q.weight").name = "blk.0.attn_qq.weight"; });
    // IQ2_XXS: 66 bytes a block of 256, which Headscope does not dequantize.
    expect_refused("tensor 'model.layers.1.mlp.up_proj.weight' has dtype IQ2_XXS (blk.1.ffn_up.weight in the file)",
                   [](GgufSpec& s) {
                       GgufTensorSpec& t = tensor(s, "blk.1.ffn_up.weight");
                       t.type = 16;
                       t.data.assign(t.ne[0] * t.ne[1] / 256 * 66, '\0');
                   });
    expect_refused("tensor 'model.layers.0.self_attn.k_proj.weight' missing", [](GgufSpec& s) {
        std::erase_if(s.tensors, [](const auto& t) { return t.name == "blk.0.attn_k.weight"; });
    });
    // A layer number with a leading zero would name a layer twice.
    expect_refused("tensor 'blk.01.ffn_up.weight' is not one of architecture qwen2's",
                   [](GgufSpec& s) { tensor(s, "blk.1.ffn_up.weight").name = "blk.01.ffn_up.weight"; });
    // Q6_K's scale d (its block's last 2 bytes) an Inf: every weight is checked as the forward would read it.
    expect_refused("tensor 'model.layers.1.mlp.up_proj.weight': element ", [](GgufSpec& s) {
        GgufTensorSpec& t = tensor(s, "blk.1.ffn_up.weight");
        t.data[208] = '\x00', t.data[209] = '\x7c';
    });
    expect_refused("RoPE scaling of type 'yarn' is not read yet",
                   [](GgufSpec& s) { s.metadata.emplace_back("qwen2.rope.scaling.type", gguf_string("yarn")); });
}

// Each architecture's keys that it cannot do without, and tensors shaped
// otherwise than its keys say, named in the file's terms.
TEST(GgufModelFiles, EachArchitecturesMissingKeysAndMisshapenTensorsAreOneLineNamingThem) {
    expect_refused("key 'gpt2.attention.layer_norm_epsilon' missing", without_key("gpt2.attention.layer_norm_epsilon"),
                   family_file(Family::gpt2));
    expect_refused("key 'gptneox.use_parallel_residual' missing", without_key("gptneox.use_parallel_residual"),
                   family_file(Family::gpt_neox));
    expect_refused("key 'tokenizer.ggml.token_type_count' missing", without_key("tokenizer.ggml.token_type_count"),
                   bert_file);
    expect_refused("key 't5.attention.relative_buckets_count' missing",
                   without_key("t5.attention.relative_buckets_count"), t5_file);
    // GPT-2's c_attn as Hugging Face stores it, (in, out), where the converter transposes it.
    expect_refused(
        "tensor 'blk.0.attn_qkv.weight' has ne [768, 256], expected [256, 768] from the keys",
        [](GgufSpec& s) {
            tensor(s, "blk.0.attn_qkv.weight").ne = {768, 256};
        },
        family_file(Family::gpt2));
    expect_refused(
        "tensor 'blk.1.attn_qkv.weight' has ne [256, 512], expected [256, 768] from the keys",
        [](GgufSpec& s) {
            GgufTensorSpec& t = tensor(s, "blk.1.attn_qkv.weight");
            t.ne[1] = 512;
            t.data.resize(512 * 210);  // Q6_K: 210 bytes a row of 256
        },
        family_file(Family::gpt_neox));
    // Pythia's rotary dims are whole pairs.
    expect_refused(
        "RoPE turns 7 of each head's 32 dims, which is not read yet",
        [](GgufSpec& s) {
            for (auto& [key, value] : s.metadata)
                if (key == "gptneox.rope.dimension_count") value = gguf_uint32(7);
        },
        family_file(Family::gpt_neox));
    // Phi-3's: whole pairs.
    expect_refused(
        "RoPE turns 9 of each head's 32 dims, which is not read yet",
        [](GgufSpec& s) {
            for (auto& [key, value] : s.metadata)
                if (key == "phi3.rope.dimension_count") value = gguf_uint32(9);
        },
        family_file(Family::phi3));
    // OLMo 2's K norm spans its NKV key/value heads' 64 values.
    expect_refused(
        "tensor 'blk.0.attn_k_norm.weight' has ne [256], expected [64] from the keys",
        [](GgufSpec& s) {
            GgufTensorSpec& t = tensor(s, "blk.0.attn_k_norm.weight");
            t.ne[0] = 256;
            t.data.resize(256 * 4);
        },
        family_file(Family::olmo2));
    expect_refused(
        "tensor 'token_types.weight' has ne [256, 3], expected [256, 2] from the keys",
        [](GgufSpec& s) {
            GgufTensorSpec& t = tensor(s, "token_types.weight");
            t.ne[1] = 3;
            t.data.resize(3 * 256 * 4);
        },
        bert_file);
    expect_refused(
        "tensor 'enc.blk.0.attn_rel_b.weight' has ne [8, 16], expected [8, 32] from the keys",
        [](GgufSpec& s) {
            GgufTensorSpec& t = tensor(s, "enc.blk.0.attn_rel_b.weight");
            t.ne[1] = 16;
            t.data.resize(16 * 8 * 4);
        },
        t5_file);
    // T5's position bias is its stacks' first block's alone; llama.cpp's layers past the keys' are refused too.
    expect_refused(
        "tensor 'enc.blk.1.attn_rel_b.weight' is not one of architecture t5's",
        [](GgufSpec& s) {
            s.tensors.push_back(tensor(s, "enc.blk.0.attn_rel_b.weight"));
            s.tensors.back().name = "enc.blk.1.attn_rel_b.weight";
        },
        t5_file);
    expect_refused(
        "tensor 'dec.blk.3.ffn_norm.weight' is of layer 3, past the 3 layers the keys give",
        [](GgufSpec& s) {
            s.tensors.push_back(tensor(s, "dec.blk.2.ffn_norm.weight"));
            s.tensors.back().name = "dec.blk.3.ffn_norm.weight";
        },
        t5_file);
}

// `edit` setting key `key` to `value`, added where the file has none.
Edit with_key(const std::string& key, const GgufMetaValue& value) {
    return [key, value](GgufSpec& s) {
        for (auto& [name, v] : s.metadata)
            if (name == key) return void(v = value);
        s.metadata.emplace_back(key, value);
    };
}

// A mixture of experts' file without one of its 3-D tensors, with more
// experts a token than it has, with a 3-D tensor of one expert too few:
// one line naming the tensor or key, in the file's terms.
TEST(GgufModelFiles, ExpertsMissingOrMisshapenAreOneLineNamingThem) {
    const Writer qwen3moe = family_file(Family::qwen3_moe);
    expect_refused(
        "tensor 'blk.1.ffn_up_exps.weight' missing",
        [](GgufSpec& s) {
            std::erase_if(s.tensors, [](const auto& t) { return t.name == "blk.1.ffn_up_exps.weight"; });
        },
        qwen3moe);
    expect_refused(
        "tensor 'blk.0.ffn_gate_inp.weight' missing",
        [](GgufSpec& s) {
            std::erase_if(s.tensors, [](const auto& t) { return t.name == "blk.0.ffn_gate_inp.weight"; });
        },
        qwen3moe);
    expect_refused("key 'qwen3moe.expert_used_count' is 5, more than the 4 experts of key 'qwen3moe.expert_count'",
                   with_key("qwen3moe.expert_used_count", gguf_uint32(5)), qwen3moe);
    expect_refused("key 'qwen3moe.expert_used_count' is 0: no expert for any token",
                   with_key("qwen3moe.expert_used_count", gguf_uint32(0)), qwen3moe);
    expect_refused("key 'qwen3moe.expert_count' missing", without_key("qwen3moe.expert_count"), qwen3moe);
    // Q6_K: 210 bytes a row of 256; 256 rows an expert.
    expect_refused(
        "tensor 'blk.0.ffn_down_exps.weight' has ne [256, 256, 3], expected [256, 256, 4] from the keys",
        [](GgufSpec& s) {
            GgufTensorSpec& t = tensor(s, "blk.0.ffn_down_exps.weight");
            t.ne[2] = 3;
            t.data.resize(3 * 256 * 210);
        },
        qwen3moe);
    expect_refused(
        "tensor 'blk.0.ffn_gate_exps.weight' has ne [256, 256], expected [256, 256, 4] from the keys",
        [](GgufSpec& s) {
            GgufTensorSpec& t = tensor(s, "blk.0.ffn_gate_exps.weight");
            t.ne.pop_back();
            t.data.resize(256 * 210);
        },
        qwen3moe);
    // llama.cpp requires OLMoE's output.weight; older Mixtral files held each expert's matrices apart.
    expect_refused(
        "tensor 'output.weight' missing",
        [](GgufSpec& s) { std::erase_if(s.tensors, [](const auto& t) { return t.name == "output.weight"; }); },
        family_file(Family::olmoe));
    expect_refused(
        "experts stored a tensor each (blk.0.ffn_gate.0.weight), as older files have them, are not read yet",
        [](GgufSpec& s) {
            s.tensors.push_back(tensor(s, "blk.0.attn_q.weight"));
            s.tensors.back().name = "blk.0.ffn_gate.0.weight";
        },
        family_file(Family::mixtral));
    expect_refused("key 'llama.expert_used_count' missing", without_key("llama.expert_used_count"),
                   family_file(Family::mixtral));
    // gpt-oss: each expert's biases, and YaRN as llama.cpp reads it.
    const Writer gpt_oss = family_file(Family::gpt_oss);
    expect_refused(
        "tensor 'blk.1.ffn_down_exps.bias' missing",
        [](GgufSpec& s) {
            std::erase_if(s.tensors, [](const auto& t) { return t.name == "blk.1.ffn_down_exps.bias"; });
        },
        gpt_oss);
    expect_refused("gpt-oss without YaRN (rope.scaling.type yarn) is not read yet",
                   without_key("gpt-oss.rope.scaling.type"), gpt_oss);
    expect_refused("YaRN's factor 16.000000 over an original length of 64 for a context of 2048 is not read yet",
                   with_key("gpt-oss.rope.scaling.factor", gguf_float32(16)), gpt_oss);
    // A dense file's experts are not its architecture's.
    expect_refused("tensor 'blk.0.ffn_gate_exps.weight' is not one of architecture qwen2's", [](GgufSpec& s) {
        s.tensors.push_back(tensor(s, "blk.0.ffn_gate.weight"));
        s.tensors.back().name = "blk.0.ffn_gate_exps.weight";
    });
}

// Gemma's keys where llama.cpp would compute nonsense or what the Config
// cannot say, and tensors it leaves unread.
TEST(GgufModelFiles, GemmasKeysLlamaCppCannotUseAreOneLineNamingThem) {
    const Writer gemma2 = family_file(Family::gemma2), gemma3 = family_file(Family::gemma3_text);
    expect_refused("key 'gemma2.attention.layer_norm_rms_epsilon' missing",
                   without_key("gemma2.attention.layer_norm_rms_epsilon"), gemma2);
    expect_refused("key 'gemma3.feed_forward_length' missing", without_key("gemma3.feed_forward_length"), gemma3);
    // Gemma 2's output embedding is token_embd, whatever the file holds; Gemma 2 has no q/k norms.
    const auto copied = [](const std::string& from, const std::string& to) {
        return [from, to](GgufSpec& s) {
            s.tensors.push_back(tensor(s, from));
            s.tensors.back().name = to;
        };
    };
    expect_refused("tensor 'output.weight' is not one of architecture gemma2's",
                   copied("token_embd.weight", "output.weight"), gemma2);
    expect_refused("tensor 'blk.0.attn_q_norm.weight' is not one of architecture gemma2's",
                   copied("blk.0.attn_norm.weight", "blk.0.attn_q_norm.weight"), gemma2);
    // llama.cpp divides by Gemma 2's caps and always applies its window.
    expect_refused("key 'gemma2.attn_logit_softcapping' is 0.000000, not a positive cap",
                   with_key("gemma2.attn_logit_softcapping", gguf_float32(0)), gemma2);
    expect_refused("key 'gemma2.final_logit_softcapping' is -3.000000, not a positive cap",
                   with_key("gemma2.final_logit_softcapping", gguf_float32(-3)), gemma2);
    expect_refused("key 'gemma3.final_logit_softcapping' is -3.000000, not a positive cap",
                   with_key("gemma3.final_logit_softcapping", gguf_float32(-3)), gemma3);
    expect_refused("key 'gemma2.attention.sliding_window' is 0: a window of no keys",
                   with_key("gemma2.attention.sliding_window", gguf_uint32(0)), gemma2);
    // One period, not a list of layers (which llama.cpp passes over for its default).
    expect_refused("key 'gemma3.attention.sliding_window_pattern'",
                   with_key("gemma3.attention.sliding_window_pattern",
                            gguf_array(7, {gguf_bool(true), gguf_bool(true), gguf_bool(false)})),
                   gemma3);
    // llama.cpp scales Gemma 2's local layers' RoPE too, which the Config cannot say.
    expect_refused("Gemma 2's RoPE scaling is not read yet", with_key("gemma2.rope.scaling.factor", gguf_float32(8)),
                   gemma2);
    expect_refused("RoPE scaling of type 'yarn' is not read yet",
                   with_key("gemma3.rope.scaling.type", gguf_string("yarn")), gemma3);
    expect_refused("RoPE's scaling factor 8.000000 with scaling type none",
                   with_key("gemma3.rope.scaling.type", gguf_string("none")), gemma3);
    expect_refused("RoPE's scaling factor -2.000000 is not a positive number",
                   with_key("gemma3.rope.scaling.factor", gguf_float32(-2)), gemma3);
    expect_refused("key 'gemma3.rope.freq_base_swa' is -1.000000, not a positive RoPE base",
                   with_key("gemma3.rope.freq_base_swa", gguf_float32(-1)), gemma3);
    expect_refused("values of 16 dims beside keys of 32 are not read yet",
                   with_key("gemma3.attention.value_length", gguf_uint32(16)), gemma3);
    expect_refused("RoPE turns 16 of each head's 32 dims, which is not read yet",
                   with_key("gemma2.rope.dimension_count", gguf_uint32(16)), gemma2);
}

// `edit` after giving the file tensors `factors` of `count` F32 ones each
// (rope_freqs, or LongRoPE's short and long).
Edit with_factors(const std::vector<std::string>& factors, uint64_t count, const Edit& edit) {
    return [=](GgufSpec& s) {
        for (const std::string& name : factors) {
            const float one = 1;
            s.tensors.push_back({name, {count}, 0, ""});
            for (uint64_t i = 0; i < count; ++i) s.tensors.back().data.append(reinterpret_cast<const char*>(&one), 4);
        }
        edit(s);
    };
}

// RoPE's factors out of bounds (a length other than the pairs of rotary
// dims, another type, a factor not positive), each one line naming the
// tensor; LongRoPE's keys alike, and its factors only where llama.cpp reads them.
TEST(GgufModelFiles, RopeFactorsOutOfBoundsAreOneLineNamingThem) {
    const Writer phi3 = family_file(Family::phi3), llama = family_file(Family::llama);
    const std::vector<std::string> longrope = {"rope_factors_short.weight", "rope_factors_long.weight"};
    const auto phi3_longrope = [&](const std::string& want, const Edit& edit) {
        expect_refused(want, with_factors(longrope, 16, edit), phi3);  // heads of 32: 16 pairs
    };
    phi3_longrope("tensor 'rope_factors_long.weight' has 15 entries for heads of 16 pairs of rotary dims",
                  [](GgufSpec& s) {
                      GgufTensorSpec& t = tensor(s, "rope_factors_long.weight");
                      t.ne = {15}, t.data.resize(15 * 4);
                  });
    phi3_longrope("tensor 'rope_factors_short.weight' must be one row of F32", [](GgufSpec& s) {
        GgufTensorSpec& t = tensor(s, "rope_factors_short.weight");
        t.type = 1, t.data.resize(16 * 2);  // F16
    });
    phi3_longrope("tensor 'rope_factors_short.weight' must be one row of F32", [](GgufSpec& s) {
        tensor(s, "rope_factors_short.weight").ne = {8, 2};
    });
    for (const auto& [bits, shown] : {std::pair{0x00000000u, "0.000000"}, std::pair{0xbf800000u, "-1.000000"},
                                      std::pair{0x7fc00000u, "nan"}, std::pair{0x7f800000u, "inf"}})
        phi3_longrope(
            std::string("tensor 'rope_factors_long.weight' holds ") + shown + ", not a positive divisor",
            [bits](GgufSpec& s) { std::memcpy(tensor(s, "rope_factors_long.weight").data.data() + 20, &bits, 4); });
    phi3_longrope("tensor 'rope_factors_short.weight' missing", [](GgufSpec& s) {
        std::erase_if(s.tensors, [](const auto& t) { return t.name == "rope_factors_short.weight"; });
    });
    phi3_longrope("key 'phi3.rope.scaling.attn_factor' is 0.000000, not a positive factor",
                  with_key("phi3.rope.scaling.attn_factor", gguf_float32(0)));
    phi3_longrope("key 'phi3.rope.scaling.original_context_length' is 0",
                  with_key("phi3.rope.scaling.original_context_length", gguf_uint32(0)));
    // llama.cpp's phi3 reads no rope_freqs, its llama no LongRoPE factors.
    expect_refused("tensor 'rope_freqs.weight' beside LongRoPE's factors",
                   with_factors({longrope[0], longrope[1], "rope_freqs.weight"}, 16, [](GgufSpec&) {}), phi3);
    expect_refused("tensor 'rope_factors_long.weight' is not one of architecture llama's",
                   with_factors(longrope, 16, [](GgufSpec&) {}), llama);
    // Llama 3.1's rope_freqs: the same bounds.
    expect_refused("tensor 'rope_freqs.weight' has 32 entries for heads of 16 pairs of rotary dims",
                   with_factors({"rope_freqs.weight"}, 32, [](GgufSpec&) {}), llama);
    expect_refused("tensor 'rope_freqs.weight' holds -1.000000, not a positive divisor",
                   with_factors({"rope_freqs.weight"}, 16,
                                [](GgufSpec& s) {
                                    const float minus_one = -1;
                                    std::memcpy(tensor(s, "rope_freqs.weight").data.data(), &minus_one, 4);
                                }),
                   llama);
}

}  // namespace
