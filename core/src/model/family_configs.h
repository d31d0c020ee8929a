// Each family's config.json reader: its keys, defaults and checks as its
// Hugging Face configuration_*.py has them, setting the Config's fields
// (model_description.h's `families` table names them).
#pragma once
#include "config_reader.h"
#include "headscope/model/model_description.h"

namespace headscope {

void read_gpt2(const ConfigReader& r, Config& c);
void read_llama(const ConfigReader& r, Config& c);  // also SmolLM, TinyLlama
// Llama's keys; its rope_scaling only where `rope_scaling` says (else the caller's to read).
void read_llama_keys(const ConfigReader& r, Config& c, bool rope_scaling);
void read_qwen2(const ConfigReader& r, Config& c);
void read_qwen3(const ConfigReader& r, Config& c);
void read_mistral(const ConfigReader& r, Config& c);
void read_olmo2(const ConfigReader& r, Config& c);
void read_mixtral(const ConfigReader& r, Config& c);  // moe_configs.cpp, as the two below
void read_qwen3_moe(const ConfigReader& r, Config& c);
void read_olmoe(const ConfigReader& r, Config& c);
void read_gpt_oss(const ConfigReader& r, Config& c);  // gpt_oss_config.cpp
void read_gpt_neox(const ConfigReader& r, Config& c);
void read_phi3(const ConfigReader& r, Config& c);  // also Phi-3.5 and Phi-4
void read_gemma2(const ConfigReader& r, Config& c);
void read_gemma3_text(const ConfigReader& r, Config& c);
void read_gemma3(const ConfigReader& r, Config& c);  // its language model (text_config)
void read_bert(const ConfigReader& r, Config& c);
void read_roberta(const ConfigReader& r, Config& c);  // also XLM-RoBERTa
void read_distilbert(const ConfigReader& r, Config& c);
void read_modernbert(const ConfigReader& r, Config& c);
void read_t5(const ConfigReader& r, Config& c);  // also T5 v1.1 and Flan-T5
void read_bart(const ConfigReader& r, Config& c);
void read_marian(const ConfigReader& r, Config& c);

// rope_scaling `s` of type "yarn" for `dims` rotary dims of each head, the
// config's rope_theta and max_position_embeddings already read: each pair's
// frequency divided by Rope::frequency_divisors (interpolated by `factor`
// below beta_slow's rotations, kept above beta_fast's, a ramp between), cos
// and sin scaled by the attention factor (yarn_rope.cpp).
void read_yarn(const ConfigReader& s, Config& c, int dims);

// The layers with the sliding window (gemma_configs.cpp): layer_types where
// the config lists them, else every layer but each pattern-th from layer
// pattern - 1 (pattern 2: the even layers, layer 0 among them).
std::vector<bool> windowed_layers(const ConfigReader& r, int layers, int pattern);

}  // namespace headscope
