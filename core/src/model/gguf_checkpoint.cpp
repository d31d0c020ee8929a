// GGUF's keys and tensor names onto Hugging Face's (gguf_checkpoint.h), by
// the rows of gguf_architectures.h: the keys become config.json's, read by
// the family's reader; each tensor's name becomes the weight it is, and that
// weight's name and shape in the model description.
#include "gguf_checkpoint.h"

#include <charconv>
#include <optional>

#include "gguf_architectures.h"
#include "headscope/base/ggml_types.h"
#include "headscope/base/shape.h"

namespace headscope {
namespace {

using json = nlohmann::json;

// Llama 3.1's scaled RoPE, as llama.cpp's converter stores it: each pair's divisor.
constexpr const char* rope_frequencies_name = "rope_freqs.weight";

// config.json's keys: the row's, the embedding's rows as vocab_size, the tokenizer's ids, and the row's others.
json config_json(const GgufSource& source, const GgufArchitecture& arch) {
    const GgufFile& file = source.file();
    json c = {{"model_type", arch.model_type}};
    for (const GgufKey& key : arch.keys) {
        const std::string name = source.key(key.gguf);
        if (key.kind == GgufKeyKind::count) {
            if (const auto value = file.integer(name)) c[key.config] = *value;
        } else if (key.kind == GgufKeyKind::number) {
            if (const auto value = file.number(name)) c[key.config] = *value;
        } else if (const auto value = file.boolean(name)) {
            c[key.config] = *value;
        }
        if (key.required && !c.contains(key.config)) source.refuse("key '" + name + "' missing");
    }
    if (const GgufTensor* embedding = source.tensor("token_embd.weight"))
        c["vocab_size"] = embedding->ne[1];  // its rows, as config.json's vocab_size counts them
    for (const char* id : {"bos_token_id", "eos_token_id", "padding_token_id"})
        if (const auto value = file.integer(std::string("tokenizer.ggml.") + id))
            c[std::string(id) == "padding_token_id" ? "pad_token_id" : id] = *value;
    if (arch.more_keys) arch.more_keys(source, c);
    return c;
}

// Where a tensor of the file goes: the weight it is, of which layer (-1:
// outside the layers) of which stack.
struct Place {
    const GgufStackNames* stack;
    Weight weight;
    int layer;
};

// "blk.7.attn_q.weight" -> q_w of layer 7; nullopt for a name outside the architecture's.
std::optional<Place> place_of(const GgufArchitecture& arch, std::string_view name) {
    for (const GgufStackNames& stack : arch.stacks) {
        for (const GgufName& n : stack.outside)
            if (name == n.name) return Place{&stack, n.weight, -1};
        const std::string_view prefix = stack.layer_prefix;
        if (!name.starts_with(prefix)) continue;
        const std::string_view rest = name.substr(prefix.size());
        const size_t dot = rest.find('.');
        int layer = -1;
        const auto [end, error] = std::from_chars(rest.data(), rest.data() + std::min(dot, rest.size()), layer);
        // "blk.07" would name layer 7 a second time: digits as llama.cpp writes them only.
        if (dot == std::string_view::npos || error != std::errc() || end != rest.data() + dot || layer < 0 ||
            (dot > 1 && rest[0] == '0'))
            continue;
        for (const GgufName& n : stack.layer)
            if (rest.substr(dot + 1) == n.name) return Place{&stack, n.weight, layer};
    }
    return std::nullopt;
}

// Tensor `name`'s entries in the model description (of `config`, or of
// `encoder` for an encoder–decoder's encoder): their names and shapes, the
// file's shape checked against theirs. One entry, or for a layer's experts'
// gate, up or down (ne [in, out, E]) expert e's at e: each expert's matrix
// is its slice of the 3-D tensor.
std::vector<TensorSpec> described(const GgufSource& source, const GgufArchitecture& arch, const Config& config,
                                  const Config& encoder, std::string_view name, const GgufTensor& tensor) {
    const std::optional<Place> place = place_of(arch, name);
    const Config& stack = place && place->stack->encoder_of_two ? encoder : config;
    const bool experts = place && expert_weight(place->weight);
    const std::optional<TensorSpec> spec =
        place ? tensor_spec(stack, place->weight, place->layer, experts ? 0 : -1) : std::nullopt;
    const std::string quoted = "tensor '" + std::string(name) + "'";
    if (place && place->layer >= stack.n_layer)
        source.refuse(quoted + " is of layer " + std::to_string(place->layer) + ", past the " +
                      std::to_string(stack.n_layer) + " layers the keys give");
    if (!spec) source.refuse(quoted + " is not one of architecture " + source.arch + "'s that Headscope reads");
    std::vector<int64_t> wanted = spec->shape;  // Hugging Face's order: ne reversed
    if (experts) wanted.insert(wanted.begin(), stack.n_experts);
    std::vector<int64_t> shape;
    for (uint32_t d = tensor.n_dims; d-- > 0;) shape.push_back(static_cast<int64_t>(tensor.ne[d]));
    if (shape != wanted) {
        const std::vector<int64_t> expected(wanted.rbegin(), wanted.rend()), ne(shape.rbegin(), shape.rend());
        source.refuse(quoted + " has ne " + shape_string(ne, Notation::json) + ", expected " +
                      shape_string(expected, Notation::json) + " from the keys");
    }
    std::vector<TensorSpec> specs = {*spec};
    for (int e = 1; experts && e < stack.n_experts; ++e)
        specs.push_back(*tensor_spec(stack, place->weight, place->layer, e));
    return specs;
}

// Each layer of experts' router and experts' tensors present, named as the
// file names them (the loader would name one expert's by Hugging Face's
// name). The first layer the file lacks ends it, however many the keys give.
void check_expert_tensors(const GgufSource& source, const GgufArchitecture& arch, const Config& config) {
    for (int l = 0; config.has_experts() && l < config.n_layer; ++l)
        for (const GgufStackNames& stack : arch.stacks)
            for (const GgufName& n : stack.layer) {
                if (!config.expert_layer(l) || !(n.weight == Weight::router_w || expert_weight(n.weight))) continue;
                const std::string name = stack.layer_prefix + std::to_string(l) + "." + n.name;
                if (!source.tensor(name)) source.refuse("tensor '" + name + "' missing");
            }
}

}  // namespace

GgufCheckpoint gguf_checkpoint(const GgufModelFiles& files) {
    const GgufFile& file = files.metadata();
    const std::optional<std::string_view> arch_name = file.string("general.architecture");
    const GgufSource source{files, std::string(arch_name.value_or(""))};
    if (!arch_name) source.refuse("key 'general.architecture' missing");
    const GgufArchitecture* arch = gguf_architecture(*arch_name);
    if (!arch)
        source.refuse("GGUF files of architecture '" + source.arch + "' are not read yet (Headscope reads " +
                      gguf_architecture_names() + ")");

    GgufCheckpoint checkpoint{config_from_json(config_json(source, *arch), file.file()), {}, {}};
    Config& config = checkpoint.config;
    if (arch->layout) arch->layout(source, config);
    const Config encoder = config.is_encoder_decoder() ? encoder_config(config) : Config{};
    check_expert_tensors(source, *arch, config);
    for (const auto& [name, tensor] : files.tensors) {
        if (name == rope_frequencies_name && config.positions == Positions::rotary) {
            const auto pairs = static_cast<uint64_t>(config.head_size() * config.rope.fraction) / 2;
            config.rope.frequency_divisors = gguf_rope_factors(source, rope_frequencies_name, pairs);
            continue;
        }
        if (longrope_tensor(name) && !config.rope.long_divisors.empty()) continue;  // read with the keys
        const std::vector<TensorSpec> specs = described(source, *arch, config, encoder, name, *tensor);
        const GgmlTypeTraits* traits = ggml_type_traits(tensor->type);
        const std::optional<DType> dtype = traits ? dtype_of(traits->type) : std::nullopt;
        const size_t slice = tensor->bytes.size() / specs.size();  // whole rows of blocks: the shape is checked
        for (size_t i = 0; i < specs.size(); ++i) {
            const TensorSpec& spec = specs[i];
            if (dtype)
                checkpoint.tensors[spec.name] = TensorView{*dtype, spec.shape, tensor->bytes.subspan(i * slice, slice)};
            else
                checkpoint.unread[spec.name] =
                    ggml_type_name(tensor->type) + " (" + std::string(name) + " in the file)";
        }
    }
    return checkpoint;
}

}  // namespace headscope
