// Finds a model (a directory, or a hub name in the local Hugging Face cache),
// checks every tensor's shape against the model description that its config
// implies, keeps its matrices mapped from the safetensors files (each value
// checked finite) and converts its vectors, and any matrix the map cannot
// serve, into one float32 buffer.
#include "headscope/model/model.h"

#include "gguf_checkpoint.h"
#include "headscope/base/error.h"
#include "headscope/base/ggml_types.h"
#include "headscope/base/shape.h"
#include "headscope/io/files.h"
#include "headscope/io/installation.h"
#include "headscope/io/json_fields.h"
#include "headscope/io/json_input.h"
#include "headscope/io/safetensors.h"
#include "model_files.h"
#include "packed_experts.h"
#include "weight_fields.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <future>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <unordered_set>

namespace headscope {

namespace fs = std::filesystem;

namespace {

using json = nlohmann::json;

// The largest config.json we know of, google/vit-base-patch16-224's with its
// 1,000 labels, has 69 KB and about 4,000 nodes; the built-in model's 946
// bytes and 62 nodes. The bytes' margin is wide (what takes memory is the
// nodes): a file nested past max_json_depth is named as that.
constexpr JsonLimits config_json_limits{4 << 20, 1 << 16};
// DeepSeek-V3's index names 91,991 tensors in 163 shards (about 9 MB and
// 184,000 nodes), the largest we know of.
constexpr JsonLimits index_limits{32 << 20, 1 << 20};
constexpr size_t max_shards = 10'000;

// Every tensor of a checkpoint's files, by name, with the file it is in.
struct FoundTensor {
    TensorView view;
    std::string file;
};
using TensorMap = std::map<std::string, FoundTensor>;

// A name is found as it is or, where the family's files may prefix names
// (optional_tensor_prefix), with that prefix; not both.
TensorMap::const_iterator find_named(const TensorMap& tensors, const Config& config, const std::string& name) {
    const auto exact = tensors.find(name);
    const std::string prefix = optional_tensor_prefix(config);
    if (prefix.empty()) return exact;
    const auto prefixed = tensors.find(prefix + name);
    if (exact != tensors.end() && prefixed != tensors.end())
        throw Error(exact->second.file + ": both '" + name + "' and '" + prefix + name + "' present");
    return exact != tensors.end() ? exact : prefixed;
}

// A tensor by its name, or by a name older checkpoints give it (legacy_tensor_name, older_tensor_name).
TensorMap::const_iterator find_tensor(const TensorMap& tensors, const Config& config, const std::string& name) {
    auto it = find_named(tensors, config, name);
    for (const std::string& older : {legacy_tensor_name(name), older_tensor_name(config, name)})
        if (it == tensors.end() && !older.empty()) it = find_named(tensors, config, older);
    return it;
}

// The shard files an index names: model.safetensors.index.json's weight_map
// {tensor: file}; every file must be a plain name beside the index.
std::vector<fs::path> shard_files(const fs::path& index) {
    const JsonFields f(index.string());
    const json j = read_json_file(index, index_limits);
    const json& map = f.required(j, "", "weight_map", json::value_t::object, "an object naming the shard files");
    if (map.empty()) f.fail("weight_map", "names no shard file");
    std::vector<fs::path> files;
    std::unordered_set<std::string> named;
    for (const auto& [tensor, shard] : map.items()) {
        const std::string field = JsonFields::join("weight_map", tensor);
        if (!shard.is_string()) f.fail(field, "the file of '" + tensor + "' is " + describe_json(shard));
        const std::string name = shard.get<std::string>();
        if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
            f.fail(field, "shard '" + name + "' of '" + tensor + "' is not a file name beside the index");
        if (!named.insert(name).second) continue;
        if (files.size() == max_shards)
            f.fail("weight_map", "names more than " + std::to_string(max_shards) + " shard files");
        const fs::path path = index.parent_path() / name;
        if (path_kind(path) == PathKind::missing)
            f.fail(field, "names shard " + name + " (of '" + tensor + "'), which is missing");
        files.push_back(path);
    }
    return files;
}

// The checkpoint's safetensors files: model.safetensors, or the shards its index names.
std::vector<fs::path> checkpoint_files(const fs::path& dir) {
    const fs::path single = dir / "model.safetensors", index = dir / "model.safetensors.index.json";
    const auto exists = [](const fs::path& path) { return path_kind(path) != PathKind::missing; };
    if (exists(single)) return {single};
    if (exists(index)) return shard_files(index);
    if (exists(dir / "pytorch_model.bin") || exists(dir / "pytorch_model.bin.index.json")) {
        throw Error(single.string() +
                    " missing: only pytorch_model.bin found, and Headscope reads safetensors only "
                    "(convert it with transformers' save_pretrained(safe_serialization=True))");
    }
    throw Error(single.string() + " missing (and no model.safetensors.index.json)");
}

}  // namespace

void check_shape(const std::string& file, const std::string& name, const std::vector<int64_t>& shape,
                 const std::vector<int64_t>& expected) {
    if (shape != expected) {
        throw Error(file + ": tensor '" + name + "' has shape " + shape_string(shape, Notation::json) + ", expected " +
                    shape_string(expected, Notation::json) + " from config.json");
    }
}

Config read_config(const fs::path& path) {
    if (path_kind(path) == PathKind::missing) throw Error(path.string() + " missing");
    return config_from_json(read_json_file(path, config_json_limits), path.string());
}

Model::Model() = default;
Model::~Model() = default;
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;

namespace {

// `value` (positive and normal) rounded to nearest, ties to even, as `dtype`
// holds it: bfloat16 keeps 8 significant bits, float16 11; others as it is.
float rounded_to(DType dtype, float value) {
    const int bits = dtype == DType::BF16 ? 8 : dtype == DType::F16 ? 11 : 0;
    if (!bits) return value;
    const int exponent = std::ilogb(value);
    return std::ldexp(std::nearbyint(std::ldexp(value, bits - 1 - exponent)), exponent - bits + 1);
}

// Served from the map as it is: a matrix whose float32 data is aligned for
// float loads. 16-bit data is read with memcpy (matmul.h), any alignment.
// Vectors (BART's (1, V) logits bias among them) are converted to float32.
bool mapped_as_is(const TensorView& view, bool matrix) {
    return matrix && (view.dtype != DType::F32 || reinterpret_cast<uintptr_t>(view.bytes.data()) % alignof(float) == 0);
}

// Maps the checkpoint's files into `m`, and lists their tensors by name;
// `unread` gets those of dtypes Headscope does not read, with their dtype.
TensorMap map_files(Model& m, const std::vector<fs::path>& files, std::map<std::string, std::string>& unread) {
    TensorMap tensors;
    for (const fs::path& path : files) {
        m.files.push_back(std::make_unique<SafetensorsFile>(path));
        for (const auto& [name, raw] : m.files.back()->unread_tensors()) unread.emplace(name, raw.dtype);
        m.file_bytes += static_cast<int64_t>(file_bytes(path));
        for (const auto& [name, view] : m.files.back()->tensors()) {
            const auto [it, added] = tensors.emplace(name, FoundTensor{view, path.string()});
            if (!added)
                throw Error(path.string() + ": tensor '" + name + "' is also in " + it->second.file +
                            " (a tensor must be in one shard)");
        }
    }
    return tensors;
}

// The files' entry for each wanted tensor, its shape checked, and what reading them takes.
struct Found {
    std::vector<const TensorMap::value_type*> entries;  // (wanted.size())
    int64_t copied_floats = 0, total_bytes = 0;
};

Found find_wanted(Model& m, const std::vector<TensorSpec>& wanted, const TensorMap& tensors,
                  const std::map<std::string, std::string>& unread, const std::string& where) {
    const Config& cfg = m.config;
    Found found;
    for (const TensorSpec& w : wanted) {
        const auto it = find_tensor(tensors, cfg, w.name);
        if (it == tensors.end() && unread.count(w.name)) {
            throw Error(where + ": tensor '" + w.name + "' has dtype " + unread.at(w.name) +
                        ", which Headscope does not read");
        }
        if (it == tensors.end()) {
            const std::string prefix = optional_tensor_prefix(cfg);
            throw Error(where + ": tensor '" + w.name + "' missing" +
                        (prefix.empty() ? "" : " (with or without the '" + prefix + "' prefix)"));
        }
        check_shape(it->second.file, it->first, it->second.view.shape, w.shape);
        found.entries.push_back(&*it);
        if (!mapped_as_is(it->second.view, matrix_field(m, w))) found.copied_floats += element_count(w.shape);
        found.total_bytes += static_cast<int64_t>(it->second.view.bytes.size());
        m.params += element_count(w.shape);
    }
    // A tied output embedding is the same matrix as wte, so it is checked but not kept.
    if (cfg.tied_embeddings && !cfg.encoder_stack) {
        if (const auto it = find_tensor(tensors, cfg, output_embedding_name(cfg)); it != tensors.end())
            check_shape(it->second.file, it->first, it->second.view.shape, wanted.front().shape);
    }
    return found;
}

// Each wanted tensor into its field of `m`: a matrix served from the map, else
// converted into m.storage; every value checked finite. Progress counts from
// `done_bytes` to `all_bytes` (an encoder–decoder reads its two stacks in turn).
void read_weights(Model& m, const std::vector<TensorSpec>& wanted, const Found& found, const Progress& progress,
                  int64_t done_bytes, int64_t all_bytes) {
    m.storage.resize(static_cast<size_t>(found.copied_floats));
    float* out = m.storage.data();
    const char* reading = "reading the weights";
    report_progress(progress, reading, done_bytes, all_bytes, ProgressUnit::bytes);
    for (size_t i = 0; i < wanted.size(); ++i) {
        const auto& [name, entry] = *found.entries[i];
        const TensorView& view = entry.view;
        const bool out_by_in = stored_out_by_in(m.config, wanted[i].weight);
        const auto matrix = [&](const std::byte* data, DType dtype) {
            const int64_t rows = view.shape[0], cols = view.shape[1];
            return Matrix{data, dtype, out_by_in ? cols : rows, out_by_in ? rows : cols, out_by_in};
        };
        Matrix* field = matrix_field(m, wanted[i]);
        try {
            if (mapped_as_is(view, field)) {
                check_finite(name, view);
                *field = matrix(view.bytes.data(), view.dtype);
            } else {
                convert_to_f32(name, view, out);
                if (field)
                    *field = matrix(reinterpret_cast<const std::byte*>(out), DType::F32);
                else
                    vector_field(m, wanted[i]) = out;
                // Gemma's norms scale by (1 + w): its 1 added here, in float32, and nowhere else.
                if (!field && m.config.norm_offset != 0 && norm_scale(wanted[i].weight))
                    for (int64_t n = 0; n < element_count(view.shape); ++n) out[n] += m.config.norm_offset;
                out += element_count(view.shape);
            }
        } catch (const Error& e) {
            throw Error(entry.file + ": " + e.what());
        }
        const auto bytes = static_cast<int64_t>(view.bytes.size());
        m.tensors.push_back({name, view.shape, view.dtype, bytes});
        done_bytes += bytes;
        report_progress(progress, reading, done_bytes, all_bytes, ProgressUnit::bytes);
    }
}

// One stack's tensors, found and shape-checked: its layers sized (a file
// holding N tensors cannot have more than N layers, so a config with too many
// is reported by its first missing tensor before n_layer sizes anything).
struct Stack {
    std::vector<TensorSpec> wanted;
    Found found;
};
Stack find_stack(Model& m, const TensorMap& tensors, const std::map<std::string, std::string>& unread,
                 const std::string& where) {
    Config within_files = m.config;
    within_files.n_layer = static_cast<int>(std::min<int64_t>(m.config.n_layer, static_cast<int64_t>(tensors.size())));
    m.layers.resize(within_files.n_layer);
    // Likewise the experts, three tensors each (six with biases) in every layer of experts
    // (packed ones are sized by read_packed_experts, after their shapes are checked).
    const bool own_tensors = !m.config.packed_experts;
    int64_t expert_tensors = 0;
    for (int l = 0; l < within_files.n_layer; ++l)
        if (m.config.expert_layer(l) && own_tensors)
            expert_tensors += (m.config.expert_biases ? 6 : 3) * int64_t{m.config.n_experts};
    if (expert_tensors > static_cast<int64_t>(tensors.size()))
        throw Error(where + ": config.json's experts (" + std::to_string(m.config.n_experts) + " a layer) need " +
                    std::to_string(expert_tensors) + " tensors, more than the files' " +
                    std::to_string(tensors.size()));
    for (int l = 0; l < within_files.n_layer; ++l)
        if (m.config.expert_layer(l) && own_tensors) m.layers[l].experts.resize(m.config.n_experts);
    Stack stack{model_tensors(within_files), {}};
    stack.found = find_wanted(m, stack.wanted, tensors, unread, where);
    return stack;
}

// After reading: the tied output embedding, the halves of a fused GeGLU input.
void finish_stack(Model& m) {
    if (!m.lm_head) m.lm_head = m.wte.transposed();  // tied
    for (LayerWeights& layer : m.layers)
        if (layer.gate_up) {
            layer.gate = layer.gate_up.output_rows(0, m.config.mlp_size());
            layer.fc = layer.gate_up.output_rows(m.config.mlp_size(), m.config.mlp_size());
        }
}

// A Hugging Face directory's config, tensors and tokenizer (built while the weights are checked).
std::future<Tokenizer> open_directory(Model& m, TensorMap& tensors, std::map<std::string, std::string>& unread,
                                      std::string& where) {
    m.config = read_config(m.path / "config.json");
    const std::vector<fs::path> files = checkpoint_files(m.path);
    tensors = map_files(m, files, unread);
    where = files.size() == 1 ? files.front().string() : (m.path / "model.safetensors.index.json").string();
    return std::async(std::launch::async, [dir = m.path, roberta = m.config.roberta_vocab_files] {
        return Tokenizer::load_directory(dir, roberta ? VocabFilesStyle::roberta : VocabFilesStyle::gpt2);
    });
}

// A GGUF file's (gguf_checkpoint.h), and its tokenizer from its metadata.
std::future<Tokenizer> open_gguf_file(Model& m, TensorMap& tensors, std::map<std::string, std::string>& unread,
                                      std::string& where) {
    where = m.path.string();
    auto files = std::make_shared<const GgufModelFiles>(open_gguf(m.path));
    GgufCheckpoint checkpoint = gguf_checkpoint(*files);
    m.config = std::move(checkpoint.config);
    for (auto& [name, view] : checkpoint.tensors) tensors.emplace(name, FoundTensor{view, where});
    unread = std::move(checkpoint.unread);
    for (const auto& part : files->parts) m.file_bytes += static_cast<int64_t>(file_bytes(part->file()));
    if (const std::optional<uint64_t> type = files->metadata().integer("general.file_type"))
        m.file_type = gguf_file_type_name(*type);
    m.gguf = files;
    return std::async(std::launch::async, [files] { return Tokenizer::load_gguf(files->metadata()); });
}

}  // namespace

Model load_model(const std::string& name_or_path, const Progress& progress) {
    Model m;
    m.path = resolve_model_path(name_or_path);
    const bool gguf = path_kind(m.path) == PathKind::file;
    std::map<std::string, std::string> unread;
    TensorMap tensors;
    std::string where;
    std::future<Tokenizer> tokenizer =
        gguf ? open_gguf_file(m, tensors, unread, where) : open_directory(m, tensors, unread, where);
    const Config& cfg = m.config;

    // A bare encoder (BertModel) has no masked-LM head: its maps, without
    // predictions. A bare BartModel has no final_logits_bias, which
    // BartForConditionalGeneration then starts at zero.
    if (cfg.mlm_head && find_tensor(tensors, cfg, masked_lm_head_name(cfg)) == tensors.end()) m.config.mlm_head = false;
    if (cfg.is_encoder_decoder() && cfg.logits_bias &&
        find_tensor(tensors, cfg, tensor_name(cfg, Weight::lm_bias)) == tensors.end())
        m.config.logits_bias = false;
    const Stack decoder = find_stack(m, tensors, unread, where);
    Stack encoder;
    if (cfg.is_encoder_decoder()) {
        m.encoder = std::make_unique<Model>();
        m.encoder->config = encoder_config(cfg);
        encoder = find_stack(*m.encoder, tensors, unread, where);
    }
    const int64_t all_bytes = decoder.found.total_bytes + encoder.found.total_bytes;
    read_weights(m, decoder.wanted, decoder.found, progress, 0, all_bytes);
    finish_stack(m);
    if (cfg.packed_experts) read_packed_experts(m, where);
    if (m.encoder) {
        read_weights(*m.encoder, encoder.wanted, encoder.found, progress, decoder.found.total_bytes, all_bytes);
        finish_stack(*m.encoder);
        m.params += m.encoder->params - m.wte.in * m.wte.out;  // the shared embedding counted once
        m.tensors.insert(m.tensors.end(), m.encoder->tensors.begin(), m.encoder->tensors.end());
    }
    m.dtype = m.wte.dtype;
    // Gemma's sqrt(C) in the dtype the model runs in, as transformers rounds it: its embedding table's.
    if (cfg.embedding_scale_rounded) m.config.embedding_scale = rounded_to(m.wte.dtype, cfg.embedding_scale);
    const auto by_name = [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; };
    std::sort(m.tensors.begin(), m.tensors.end(), by_name);
    m.tensors.erase(std::unique(m.tensors.begin(), m.tensors.end(),
                                [](const TensorInfo& a, const TensorInfo& b) { return a.name == b.name; }),
                    m.tensors.end());

    m.tokenizer = tokenizer.get();
    if (m.tokenizer.vocab_size() > cfg.vocab_size) {
        const bool json = path_kind(m.path / "tokenizer.json") != PathKind::missing;
        const fs::path file = gguf ? m.path : m.path / (json ? "tokenizer.json" : "vocab.json");
        throw Error(file.string() + ": " + std::to_string(m.tokenizer.vocab_size()) +
                    " tokens, more than the model's vocab_size " + std::to_string(cfg.vocab_size));
    }
    return m;
}

std::vector<int32_t> decoder_input_ids(const Model& model, std::string_view target) {
    std::vector<int32_t> ids = {model.config.decoder_start_token_id};
    if (target.empty()) return ids;  // as generation starts: the template's <s> is a target's first token
    std::vector<int32_t> tokens = model.tokenizer.encode_target(target);
    if (!tokens.empty() && tokens.back() == model.config.eos_token_id) tokens.pop_back();
    ids.insert(ids.end(), tokens.begin(), tokens.end());
    return ids;
}

}  // namespace headscope
