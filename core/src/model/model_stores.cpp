// The stores where other programs keep GGUF models: Ollama's (a manifest per
// name and tag, naming the weights' blob by its sha256), LM Studio's
// (publisher/model folders of .gguf files) and llama.cpp's cache (files).
// Every part of a name that becomes part of a path is checked first.
#include "model_stores.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

#include "headscope/base/error.h"
#include "headscope/base/ggml_types.h"
#include "headscope/io/files.h"
#include "headscope/io/gguf.h"
#include "headscope/io/json_fields.h"
#include "headscope/io/json_input.h"
#include "headscope/model/model.h"

namespace headscope {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// A manifest lists a few layers (the weights, template, parameters, license)
// in under 2 KB; these leave a wide margin.
constexpr JsonLimits manifest_limits{.max_bytes = 64 * 1024, .max_nodes = 4096};
constexpr std::string_view weights_media_type = "application/vnd.ollama.image.model";
constexpr std::string_view default_registry = "registry.ollama.ai";
constexpr std::string_view default_namespace = "library";
// A message names at most this many of a folder's files.
constexpr size_t max_files_named = 8;

// A part of a name that becomes one part of a path: letters, digits, '-',
// '_', '.', '+', not starting with '.' (so never "." or "..").
bool is_plain_part(std::string_view part) {
    if (part.empty() || part.front() == '.') return false;
    return std::all_of(part.begin(), part.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.' || c == '+';
    });
}

std::vector<std::string> split_at_slashes(const std::string& name) {
    std::vector<std::string> parts;
    for (size_t start = 0;;) {
        const size_t slash = name.find('/', start);
        parts.push_back(name.substr(start, slash - start));
        if (slash == std::string::npos) return parts;
        start = slash + 1;
    }
}

bool is_gguf_name(const std::string& file) { return file.size() > 5 && file.ends_with(".gguf"); }

// "<name>-0000k-of-0000n.gguf" with k > 1: a split model answers to its first part.
bool is_later_split_part(const std::string& file) {
    constexpr std::string_view pattern = "-#####-of-#####.gguf";
    if (file.size() <= pattern.size()) return false;
    const std::string_view tail = std::string_view(file).substr(file.size() - pattern.size());
    for (size_t i = 0; i < pattern.size(); ++i)
        if (pattern[i] == '#' ? !std::isdigit(static_cast<unsigned char>(tail[i])) : tail[i] != pattern[i])
            return false;
    return tail.substr(1, 5) != "00001";
}

// The entries of `dir` with plain names that are folders (or else regular
// files), by name; none when it cannot be read.
std::vector<fs::path> entries(const fs::path& dir, bool folders) {
    std::vector<fs::path> found;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::error_code kind_ec;
        const bool wanted = folders ? it->is_directory(kind_ec) : it->is_regular_file(kind_ec);
        if (wanted && is_plain_part(it->path().filename().string())) found.push_back(it->path());
    }
    std::sort(found.begin(), found.end());
    return found;
}

// A folder's GGUF models: its .gguf files, a split model by its first part.
std::vector<fs::path> gguf_files_in(const fs::path& dir) {
    std::vector<fs::path> files = entries(dir, false);
    std::erase_if(files, [](const fs::path& file) {
        const std::string name = file.filename().string();
        return !is_gguf_name(name) || is_later_split_part(name);
    });
    return files;
}

fs::path ollama_dir() {
    if (const std::string dir = env_var("OLLAMA_MODELS"); !dir.empty()) return dir;
    return home_dir() / ".ollama" / "models";
}

// LM Studio's folder since 0.3, then the one before.
std::vector<fs::path> lmstudio_dirs() {
    return {home_dir() / ".lmstudio" / "models", home_dir() / ".cache" / "lm-studio" / "models"};
}

// Where llama.cpp's -hf downloads go, by its rules.
fs::path llama_cache_dir() {
    if (const std::string dir = env_var("LLAMA_CACHE"); !dir.empty()) return dir;
    if (const std::string xdg = env_var("XDG_CACHE_HOME"); !xdg.empty()) return fs::path(xdg) / "llama.cpp";
    return home_dir() / ".cache" / "llama.cpp";
}

bool is_sha256_digest(const std::string& digest) {
    return digest.size() == 7 + 64 && digest.starts_with("sha256:") &&
           std::all_of(digest.begin() + 7, digest.end(),
                       [](char c) { return std::isdigit(c) || (c >= 'a' && c <= 'f'); });
}

// The blob of weights an Ollama manifest in `store` names: its one layer of
// the model's media type, whose digest names blobs/sha256-<hex>, a GGUF file.
fs::path ollama_blob(const fs::path& store, const fs::path& manifest) {
    const json doc = read_json_file(manifest, manifest_limits, "an Ollama manifest");
    const JsonFields fields(manifest.string());
    const json& layers = fields.required(doc, "", "layers", json::value_t::array, "an array");
    std::string digest;
    for (size_t i = 0; i < layers.size(); ++i) {
        const std::string at = JsonFields::at("layers", i);
        if (fields.string(layers[i], at, "mediaType") != weights_media_type) continue;
        if (!digest.empty()) fields.fail("layers", "two layers of the model's weights");
        digest = fields.string(layers[i], at, "digest");
        if (!is_sha256_digest(digest))
            fields.fail(JsonFields::join(at, "digest"),
                        "not sha256: and 64 lowercase hex digits: " + describe_json(layers[i]["digest"]));
    }
    if (digest.empty())
        fields.fail("layers", "no layer of the model's weights (" + std::string(weights_media_type) + ")");
    const fs::path blob = store / "blobs" / ("sha256-" + digest.substr(7));
    if (path_kind(blob) != PathKind::file)
        throw Error(manifest.string() + ": the model's weights, " + blob.string() + ", are missing");
    if (read_file_start(blob, 4, "the model's weights") != "GGUF")
        throw Error(manifest.string() + ": the model's weights, " + blob.string() + ", are not a GGUF file");
    return blob;
}

// An Ollama name's manifest: [[registry/]namespace/]model[:tag].
std::optional<fs::path> ollama_manifest(const std::string& name) {
    std::string path = name, tag = "latest";
    if (const size_t colon = name.rfind(':'); colon != std::string::npos) {
        path = name.substr(0, colon);
        tag = name.substr(colon + 1);
    }
    std::vector<std::string> parts = split_at_slashes(path);
    if (parts.size() > 3 || !is_plain_part(tag) ||
        !std::all_of(parts.begin(), parts.end(), [](const std::string& p) { return is_plain_part(p); }))
        return std::nullopt;
    if (parts.size() < 2) parts.insert(parts.begin(), std::string(default_namespace));
    if (parts.size() < 3) parts.insert(parts.begin(), std::string(default_registry));
    return ollama_dir() / "manifests" / parts[0] / parts[1] / parts[2] / tag;
}

// The name the listing gives a manifest: the shortest that finds it.
std::string ollama_name(const fs::path& manifest) {
    const std::string registry = manifest.parent_path().parent_path().parent_path().filename().string();
    const std::string space = manifest.parent_path().parent_path().filename().string();
    std::string name = manifest.parent_path().filename().string() + ":" + manifest.filename().string();
    if (registry != default_registry) return registry + "/" + space + "/" + name;
    return space == default_namespace ? name : space + "/" + name;
}

std::string joined_stems(const std::vector<fs::path>& files) {
    std::string joined;
    for (size_t i = 0; i < files.size() && i < max_files_named; ++i)
        joined += (i ? ", " : "") + files[i].stem().string();
    if (files.size() > max_files_named) joined += " and " + std::to_string(files.size() - max_files_named) + " more";
    return joined;
}

// A name of LM Studio's: publisher/model, publisher/model:stem or publisher/model/file.gguf.
struct LmStudioName {
    std::string publisher, model;
    std::string stem, file;  // at most one of them
};

std::optional<LmStudioName> lmstudio_name(const std::string& name) {
    std::vector<std::string> parts = split_at_slashes(name);
    LmStudioName parsed;
    if (parts.size() == 2) {
        if (const size_t colon = parts[1].find(':'); colon != std::string::npos) {
            parsed.stem = parts[1].substr(colon + 1);
            parts[1].resize(colon);
            if (!is_plain_part(parsed.stem)) return std::nullopt;
        }
    } else if (parts.size() == 3 && is_gguf_name(parts[2])) {
        parsed.file = parts[2];
    } else {
        return std::nullopt;
    }
    if (!is_plain_part(parts[0]) || !is_plain_part(parts[1]) || (!parsed.file.empty() && !is_plain_part(parsed.file)))
        return std::nullopt;
    parsed.publisher = parts[0];
    parsed.model = parts[1];
    return parsed;
}

std::optional<fs::path> find_in_lmstudio(const LmStudioName& name) {
    const std::string model = name.publisher + "/" + name.model;
    for (const fs::path& root : lmstudio_dirs()) {
        const fs::path folder = root / name.publisher / name.model;
        if (path_kind(folder) != PathKind::directory) continue;
        if (!name.file.empty()) {
            if (path_kind(folder / name.file) == PathKind::file) return folder / name.file;
            continue;
        }
        const std::vector<fs::path> files = gguf_files_in(folder);
        if (!name.stem.empty()) {
            if (path_kind(folder / (name.stem + ".gguf")) == PathKind::file) return folder / (name.stem + ".gguf");
            throw Error(folder.string() + ": no " + name.stem + ".gguf in LM Studio's folder of " + model +
                        (files.empty() ? ", which holds no GGUF file" : ", which holds " + joined_stems(files)));
        }
        if (files.size() == 1) return files.front();
        if (files.empty()) throw Error(folder.string() + ": LM Studio's folder of " + model + " holds no GGUF file");
        throw Error(folder.string() + ": LM Studio's folder of " + model + " holds " + std::to_string(files.size()) +
                    " GGUF models (" + joined_stems(files) + "): name one as " + model + ":" +
                    files.front().stem().string());
    }
    return std::nullopt;
}

// A file name in llama.cpp's cache, ".gguf" optional.
std::optional<fs::path> find_in_llama_cache(const std::string& name) {
    const fs::path file = llama_cache_dir() / (is_gguf_name(name) ? name : name + ".gguf");
    if (path_kind(file) == PathKind::file) return file;
    return std::nullopt;
}

// Each store's models as (name, file), in the order find_in_gguf_stores asks them.
std::vector<std::pair<std::string, fs::path>> stored_models() {
    std::vector<std::pair<std::string, fs::path>> found;
    const fs::path ollama = ollama_dir();
    for (const fs::path& registry : entries(ollama / "manifests", true))
        for (const fs::path& space : entries(registry, true))
            for (const fs::path& model : entries(space, true))
                for (const fs::path& tag : entries(model, false)) try {
                        found.emplace_back(ollama_name(tag), ollama_blob(ollama, tag));
                    } catch (const Error&) {
                        // a broken manifest or a missing blob: nothing to open
                    }
    for (const fs::path& root : lmstudio_dirs())
        for (const fs::path& publisher : entries(root, true))
            for (const fs::path& model : entries(publisher, true)) {
                const std::vector<fs::path> files = gguf_files_in(model);
                const std::string name = publisher.filename().string() + "/" + model.filename().string();
                for (const fs::path& file : files)
                    found.emplace_back(files.size() == 1 ? name : name + ":" + file.stem().string(), file);
            }
    for (const fs::path& file : gguf_files_in(llama_cache_dir())) found.emplace_back(file.filename().string(), file);
    return found;
}

GgufModel describe_gguf(const std::string& name, const fs::path& path) {
    const GgufModelFiles files = open_gguf(path);
    const GgufFile& metadata = files.metadata();
    GgufModel model;
    model.name = name;
    model.path = path;
    for (const auto& part : files.parts) model.bytes += file_bytes(part->file());
    if (const std::optional<uint64_t> type = metadata.integer("general.file_type"))
        model.quantization = gguf_file_type_name(*type);
    model.title = metadata.string("general.name").value_or("");
    model.architecture = metadata.string("general.architecture").value_or("");
    return model;
}

}  // namespace

std::string env_var(const char* name) {
    const char* value = std::getenv(name);
    return value ? value : "";
}

fs::path home_dir() {
    std::string home = env_var("HOME");
    if (home.empty()) {
        if (const passwd* pw = getpwuid(getuid())) home = pw->pw_dir;
    }
    return home;
}

bool is_gguf_store_name(const std::string& name) {
    return ollama_manifest(name) || lmstudio_name(name) || is_plain_part(name);
}

std::optional<fs::path> find_in_gguf_stores(const std::string& name) {
    if (const std::optional<fs::path> manifest = ollama_manifest(name);
        manifest && path_kind(*manifest) != PathKind::missing)
        return ollama_blob(ollama_dir(), *manifest);
    if (const std::optional<LmStudioName> lmstudio = lmstudio_name(name))
        if (std::optional<fs::path> file = find_in_lmstudio(*lmstudio)) return file;
    if (is_plain_part(name)) return find_in_llama_cache(name);
    return std::nullopt;
}

std::string gguf_store_places() {
    const std::vector<fs::path> lmstudio = lmstudio_dirs();
    return "Ollama's store (" + ollama_dir().string() + "), LM Studio's (" + lmstudio[0].string() + " or " +
           lmstudio[1].string() + ") or llama.cpp's cache (" + llama_cache_dir().string() + ")";
}

std::vector<GgufModel> list_gguf_models() {
    std::vector<GgufModel> models;
    std::set<std::string> names;
    for (const auto& [name, path] : stored_models()) {
        if (!names.insert(name).second) continue;  // an earlier store's model answers to that name
        try {
            models.push_back(describe_gguf(name, path));
        } catch (const Error&) {
            // not a GGUF file Headscope can read: not a model to offer
        }
    }
    std::sort(models.begin(), models.end(), [](const GgufModel& a, const GgufModel& b) { return a.name < b.name; });
    return models;
}

}  // namespace headscope
