// Finds a GPT-2 model (a directory, or a hub name in the local Hugging Face
// cache), checks every tensor's shape against the model description that its
// config implies, and converts the weights straight from the mapped
// safetensors file into one float buffer.
#include "headscope/model.h"

#include "headscope/error.h"
#include "headscope/files.h"
#include "headscope/json_input.h"
#include "headscope/safetensors.h"
#include "headscope/shape.h"

#include <pwd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <future>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

namespace headscope {

namespace fs = std::filesystem;

namespace {

using json = nlohmann::ordered_json;

std::string env(const char* name) {
    const char* value = std::getenv(name);
    return value ? value : "";
}

// Where huggingface_hub keeps its cache, by the same rules it uses.
fs::path hub_cache_dir() {
    if (const std::string hub = env("HF_HUB_CACHE"); !hub.empty()) return hub;
    if (const std::string home = env("HF_HOME"); !home.empty()) return fs::path(home) / "hub";
    if (const std::string xdg = env("XDG_CACHE_HOME"); !xdg.empty()) return fs::path(xdg) / "huggingface" / "hub";
    std::string home = env("HOME");
    if (home.empty()) {
        if (const passwd* pw = getpwuid(getuid())) home = pw->pw_dir;
    }
    return fs::path(home) / ".cache" / "huggingface" / "hub";
}

// "gpt2" or "openai-community/gpt2-medium": the characters HF allows in a
// repo id, with at most one '/' between two non-empty parts.
bool is_hub_name(const std::string& name) {
    const size_t slash = name.find('/');
    if (slash != std::string::npos && name.find('/', slash + 1) != std::string::npos) return false;
    if (name.empty() || name.front() == '/' || name.back() == '/') return false;
    if (name.front() == '.' || name.find("/.") != std::string::npos) return false;
    return std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '/';
    });
}

// The snapshot a cached repo's refs/main names, else its newest one.
fs::path pick_snapshot(const fs::path& repo) {
    const fs::path snapshots = repo / "snapshots";
    const fs::path ref = repo / "refs" / "main";
    if (fs::is_regular_file(ref)) {
        std::string rev = read_file(ref);
        rev.erase(rev.find_last_not_of(" \t\r\n") + 1);
        if (rev.empty() || rev.find('/') != std::string::npos) throw Error(ref.string() + ": not a revision");
        const fs::path snapshot = snapshots / rev;
        if (!fs::is_directory(snapshot))
            throw Error(ref.string() + ": names revision " + rev + " but " + snapshot.string() + " is missing");
        return snapshot;
    }
    fs::path newest;
    fs::file_time_type newest_time;
    if (fs::is_directory(snapshots)) {
        for (const fs::directory_entry& entry : fs::directory_iterator(snapshots)) {
            if (!entry.is_directory()) continue;
            const fs::file_time_type time = entry.last_write_time();
            if (newest.empty() || time > newest_time) {
                newest = entry.path();
                newest_time = time;
            }
        }
    }
    if (newest.empty()) throw Error(repo.string() + ": no refs/main and no snapshot directory in snapshots/");
    return newest;
}

// A required positive integer field of config.json.
int positive_int(const json& config, const std::string& key, const std::string& file) {
    const auto it = config.find(key);
    if (it == config.end()) throw Error(file + ": " + key + " missing");
    if (!it->is_number_unsigned() || it->get<uint64_t>() == 0 ||
        it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int>::max())) {
        throw Error(file + ": " + key + " is " + describe_json(*it) + ", not a positive integer");
    }
    return it->get<int>();
}

Config read_config(const fs::path& path) {
    const std::string file = path.string();
    if (!fs::exists(path)) throw Error(file + " missing");
    const json j = parse_json(read_file(path), file);
    if (!j.is_object()) throw Error(file + ": not a JSON object");

    Config c;
    c.n_layer = positive_int(j, "n_layer", file);
    c.n_head = positive_int(j, "n_head", file);
    c.n_embd = positive_int(j, "n_embd", file);
    // Old GPT-2 configs name the context length n_ctx only.
    c.n_positions = positive_int(j, j.contains("n_positions") || !j.contains("n_ctx") ? "n_positions" : "n_ctx", file);
    c.vocab_size = positive_int(j, "vocab_size", file);
    if (c.n_embd % c.n_head != 0) {
        throw Error(file + ": n_embd " + std::to_string(c.n_embd) + " is not divisible by n_head " +
                    std::to_string(c.n_head));
    }
    if (const auto it = j.find("eos_token_id"); it != j.end() && !it->is_null()) {
        if (!it->is_number_unsigned() || it->get<uint64_t>() >= static_cast<uint64_t>(c.vocab_size))
            throw Error(file + ": eos_token_id " + describe_json(*it) + " is not a token id below vocab_size");
        c.eos_token_id = it->get<int>();
    }
    if (const auto it = j.find("layer_norm_epsilon"); it != j.end() && !it->is_null()) {
        if (!it->is_number() || !(it->get<double>() > 0) || !(it->get<double>() < 1))
            throw Error(file + ": layer_norm_epsilon " + describe_json(*it) + " is not a small positive number");
        c.layer_norm_epsilon = it->get<float>();
    }
    if (const auto it = j.find("headscope_training"); it != j.end()) c.training = *it;
    return c;
}

using TensorMap = std::map<std::string, TensorView>;

// The file's entry for `name`, with or without the "transformer." prefix.
TensorMap::const_iterator find_tensor(const TensorMap& tensors, const std::string& name, const std::string& file) {
    const auto bare = tensors.find(name);
    const auto prefixed = tensors.find("transformer." + name);
    if (bare != tensors.end() && prefixed != tensors.end())
        throw Error(file + ": both '" + name + "' and 'transformer." + name + "' present");
    return bare != tensors.end() ? bare : prefixed;
}

// Where `shape` differs from `expected`, the message for tensor `name`.
void check_shape(const std::string& file, const std::string& name, const std::vector<int64_t>& shape,
                 const std::vector<int64_t>& expected) {
    if (shape != expected) {
        throw Error(file + ": tensor '" + name + "' has shape " + shape_string(shape, Notation::json) + ", expected " +
                    shape_string(expected, Notation::json) + " from config.json");
    }
}

// Maps fresh memory in one call instead of taking a page fault per 4 KiB on
// first touch: for GPT-2 small's 500 MB that was most of the load time.
// (MADV_HUGEPAGE was tried too: on a VM that hands freed memory back to its
// host it made loads alternate between 4x faster and 2x slower.) It is only
// advice; kernels before 5.14 lack it and pages fault in as usual.
void prefault(void* begin, size_t bytes) {
    const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
    const uintptr_t first = (reinterpret_cast<uintptr_t>(begin) + page - 1) / page * page;
    const uintptr_t last = (reinterpret_cast<uintptr_t>(begin) + bytes) / page * page;
    if (first < last) madvise(reinterpret_cast<void*>(first), last - first, MADV_POPULATE_WRITE);
}

}  // namespace

fs::path resolve_model_path(const std::string& name_or_path) {
    std::error_code ec;
    if (name_or_path == builtin_model) {
        const std::string override_dir = env("HEADSCOPE_BUILTIN_MODEL");
        const fs::path dir = override_dir.empty() ? fs::path(HEADSCOPE_BUILTIN_MODEL_DIR) : fs::path(override_dir);
        if (!fs::is_directory(dir, ec))
            throw Error("the built-in model is missing: no directory " + dir.string() +
                        " (tools/train-builtin makes it)");
        return dir;
    }
    if (fs::is_directory(name_or_path, ec)) return name_or_path;
    if (fs::exists(name_or_path, ec)) throw Error("model '" + name_or_path + "' is not a directory");
    if (!is_hub_name(name_or_path)) throw Error("model '" + name_or_path + "' not found: no directory of that name");

    const fs::path cache = hub_cache_dir();
    std::string repo_dir = "models--" + name_or_path;
    if (const size_t slash = repo_dir.find('/'); slash != std::string::npos) repo_dir.replace(slash, 1, "--");
    const fs::path repo = cache / repo_dir;
    if (!fs::is_directory(repo, ec)) {
        throw Error("model '" + name_or_path + "' not found: no directory of that name and no " + repo_dir +
                    " in the Hugging Face cache " + cache.string() + " (Headscope never downloads)");
    }
    return pick_snapshot(repo);
}

std::vector<CachedModel> list_cached_models() {
    std::vector<CachedModel> models;
    std::error_code ec;
    const std::string prefix = "models--";
    for (const fs::directory_entry& repo : fs::directory_iterator(hub_cache_dir(), ec)) {
        std::string name = repo.path().filename().string();
        if (!repo.is_directory(ec) || !name.starts_with(prefix)) continue;
        // models--org--name: hub names cannot contain "--", so the first one is the slash.
        name.erase(0, prefix.size());
        if (const size_t dashes = name.find("--"); dashes != std::string::npos) name.replace(dashes, 2, "/");
        try {
            const fs::path snapshot = pick_snapshot(repo.path());
            const json config = parse_json(read_file(snapshot / "config.json"), "config.json");
            if (config.is_object() && config.value("model_type", "") == "gpt2") models.push_back({name, snapshot});
        } catch (const std::exception&) {
            // an incomplete download or a foreign file: not a model to offer
        }
    }
    std::sort(models.begin(), models.end(), [](const CachedModel& a, const CachedModel& b) { return a.name < b.name; });
    return models;
}

Model load_model(const std::string& name_or_path, const std::function<void(float)>& on_progress) {
    Model m;
    m.path = resolve_model_path(name_or_path);
    m.config = read_config(m.path / "config.json");

    const fs::path weights = m.path / "model.safetensors";
    const std::string file = weights.string();
    if (!fs::exists(weights)) {
        if (fs::exists(m.path / "pytorch_model.bin")) {
            throw Error(file +
                        " missing: only pytorch_model.bin found, and Headscope reads safetensors only "
                        "(convert it with transformers' save_pretrained(safe_serialization=True))");
        }
        throw Error(file + " missing");
    }
    const fs::path vocab = m.path / "vocab.json", merges = m.path / "merges.txt";
    for (const fs::path& p : {vocab, merges})
        if (!fs::exists(p)) throw Error(p.string() + " missing");

    // The tokenizer builds its tables while the weights are converted.
    std::future<Tokenizer> tokenizer = std::async(std::launch::async, [&] { return Tokenizer::load(vocab, merges); });

    const SafetensorsFile st(weights);
    const TensorMap& tensors = st.tensors();
    // A layer is 12 tensors, so a file holding K*12 cannot have layer K. Going
    // no further than that reports a config with too many layers by its first
    // missing tensor, before n_layer sizes any allocation.
    const int64_t layers_possible = static_cast<int64_t>(tensors.size()) / 12 + 1;
    Config within_file = m.config;
    within_file.n_layer = static_cast<int>(std::min<int64_t>(m.config.n_layer, layers_possible));
    m.layers.resize(within_file.n_layer);
    const std::vector<TensorSpec> wanted = gpt2_tensors(within_file);

    std::vector<const TensorMap::value_type*> found;  // (wanted.size()), the file's entry for each
    int64_t total = 0;
    for (const TensorSpec& w : wanted) {
        const auto it = find_tensor(tensors, w.name, file);
        if (it == tensors.end())
            throw Error(file + ": tensor '" + w.name + "' missing (with or without the 'transformer.' prefix)");
        check_shape(file, it->first, it->second.shape, w.shape);
        found.push_back(&*it);
        total += element_count(w.shape);
    }
    // A tied output embedding is the same matrix as wte, so it is checked but not kept.
    if (const auto it = find_tensor(tensors, "lm_head.weight", file); it != tensors.end())
        check_shape(file, it->first, it->second.shape, wanted.front().shape);

    m.storage.reserve(static_cast<size_t>(total));
    prefault(m.storage.data(), static_cast<size_t>(total) * sizeof(float));
    m.storage.resize(static_cast<size_t>(total));
    float* out = m.storage.data();
    for (size_t i = 0; i < wanted.size(); ++i) {
        const auto& [name, view] = *found[i];
        try {
            convert_to_f32(name, view, out);
        } catch (const Error& e) {
            throw Error(file + ": " + e.what());
        }
        weight_pointer(m, wanted[i]) = out;
        out += element_count(view.shape);
        m.tensors.push_back({name, view.shape});
        if (on_progress) on_progress(static_cast<float>(out - m.storage.data()) / static_cast<float>(total));
    }
    std::sort(m.tensors.begin(), m.tensors.end(),
              [](const TensorInfo& a, const TensorInfo& b) { return a.name < b.name; });
    m.params = total;

    m.tokenizer = tokenizer.get();
    if (m.tokenizer.vocab_size() > m.config.vocab_size) {
        throw Error(vocab.string() + ": " + std::to_string(m.tokenizer.vocab_size()) +
                    " tokens, more than the model's vocab_size " + std::to_string(m.config.vocab_size));
    }
    return m;
}

}  // namespace headscope
