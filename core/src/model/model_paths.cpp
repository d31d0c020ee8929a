// Where a model is: the built-in one, a folder, a GGUF file, a hub name in the
// local Hugging Face cache, or a name in a store of GGUF models
// (model_stores.cpp); model.h's resolve_model_path and list_cached_models.
#include <algorithm>
#include <cctype>

#include "headscope/base/error.h"
#include "headscope/io/files.h"
#include "headscope/io/installation.h"
#include "headscope/model/model.h"
#include "model_files.h"
#include "model_stores.h"

namespace headscope {

namespace fs = std::filesystem;

namespace {

// refs/main holds a 40-character commit hash; past a path's longest, no revision.
constexpr size_t max_revision_bytes = 4096;

// Where huggingface_hub keeps its cache, by the same rules it uses.
fs::path hub_cache_dir() {
    if (const std::string hub = env_var("HF_HUB_CACHE"); !hub.empty()) return hub;
    if (const std::string home = env_var("HF_HOME"); !home.empty()) return fs::path(home) / "hub";
    if (const std::string xdg = env_var("XDG_CACHE_HOME"); !xdg.empty()) return fs::path(xdg) / "huggingface" / "hub";
    return home_dir() / ".cache" / "huggingface" / "hub";
}

// A file Headscope reads as GGUF: named so, or starting with its magic.
bool is_gguf_file(const fs::path& path) {
    return path.extension() == ".gguf" || read_file_start(path, 4, "the model") == "GGUF";
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
    if (path_kind(ref) == PathKind::file) {
        std::string rev = read_file(ref, "", max_revision_bytes);
        rev.erase(rev.find_last_not_of(" \t\r\n") + 1);
        if (rev.empty() || rev.find('/') != std::string::npos) throw Error(ref.string() + ": not a revision");
        const fs::path snapshot = snapshots / rev;
        if (path_kind(snapshot) != PathKind::directory)
            throw Error(ref.string() + ": names revision " + rev + " but " + snapshot.string() + " is missing");
        return snapshot;
    }
    fs::path newest;
    fs::file_time_type newest_time;
    if (path_kind(snapshots) == PathKind::directory) {
        std::error_code ec;
        for (fs::directory_iterator it(snapshots, ec), end; !ec && it != end; it.increment(ec)) {
            const fs::file_time_type time = it->last_write_time(ec);
            if (ec || !it->is_directory(ec)) continue;  // what cannot be asked is not a snapshot
            if (newest.empty() || time > newest_time) {
                newest = it->path();
                newest_time = time;
            }
        }
        if (ec) throw Error(snapshots.string() + ": " + ec.message());
    }
    if (newest.empty()) throw Error(repo.string() + ": no refs/main and no snapshot directory in snapshots/");
    return newest;
}

}  // namespace

fs::path resolve_model_path(const std::string& name_or_path) {
    if (name_or_path == builtin_model) {
        const std::string override_dir = env_var("HEADSCOPE_BUILTIN_MODEL");
        const fs::path dir = override_dir.empty() ? data_dir() / "builtin" : fs::path(override_dir);
        if (path_kind(dir) != PathKind::directory)
            throw Error("the built-in model is missing: no directory " + dir.string() +
                        " (tools/train-builtin makes it)");
        return dir;
    }
    const PathKind kind = path_kind(name_or_path);
    if (kind == PathKind::directory) return name_or_path;
    if (kind == PathKind::file && is_gguf_file(name_or_path)) return name_or_path;
    if (kind != PathKind::missing) throw Error("model '" + name_or_path + "' is not a directory or a GGUF file");

    if (!is_hub_name(name_or_path) && !is_gguf_store_name(name_or_path))
        throw Error("model '" + name_or_path + "' not found: no directory of that name");

    const fs::path cache = hub_cache_dir();
    std::string hub_place = "not a hub name for the Hugging Face cache (" + cache.string() + ")";
    if (is_hub_name(name_or_path)) {
        std::string repo_dir = "models--" + name_or_path;
        if (const size_t slash = repo_dir.find('/'); slash != std::string::npos) repo_dir.replace(slash, 1, "--");
        const fs::path repo = cache / repo_dir;
        if (path_kind(repo) == PathKind::directory) return pick_snapshot(repo);
        hub_place = "no " + repo_dir + " in the Hugging Face cache (" + cache.string() + ")";
    }
    if (std::optional<fs::path> file = find_in_gguf_stores(name_or_path)) return *file;
    throw Error("model '" + name_or_path + "' not found: no folder or file of that name, " + hub_place +
                ", and not in " + gguf_store_places() +
                " (Headscope never downloads: fetch it once with huggingface-cli download or ollama pull, "
                "or open a folder holding its config.json, safetensors and tokenizer files, or a GGUF file)");
}

std::vector<CachedModel> list_cached_models() {
    std::vector<CachedModel> models;
    std::error_code ec;
    const std::string prefix = "models--";
    for (fs::directory_iterator it(hub_cache_dir(), ec), end; !ec && it != end; it.increment(ec)) {
        const fs::directory_entry& repo = *it;
        std::string name = repo.path().filename().string();
        std::error_code kind_ec;
        if (!repo.is_directory(kind_ec) || !name.starts_with(prefix)) continue;
        // models--org--name: hub names cannot contain "--", so the first one is the slash.
        name.erase(0, prefix.size());
        if (const size_t dashes = name.find("--"); dashes != std::string::npos)
            name = name.substr(0, dashes) + '/' + name.substr(dashes + 2);
        try {
            const fs::path snapshot = pick_snapshot(repo.path());
            read_config(snapshot / "config.json");  // a family we run
            models.push_back({name, snapshot});
        } catch (const std::exception&) {
            // an incomplete download or a foreign file: not a model to offer
        }
    }
    std::sort(models.begin(), models.end(), [](const CachedModel& a, const CachedModel& b) { return a.name < b.name; });
    return models;
}

}  // namespace headscope
