// Test support: SentencePiece models trained by spm_train; see sentencepiece_models.h.
#include "sentencepiece_models.h"

#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <stdexcept>

#include "model_writer.h"
#include "process.h"

namespace headscope::test {

namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct Trained {
    Trained();
    TempDir dir;
    fs::path model[2], vocab_file[2];  // by Side
    json marian_vocab = json::object();
};

void run_tool(const std::vector<std::string>& args, const fs::path& scratch) {
    const ProcessRun run = run_program(args, scratch);
    if (run.status != 0) throw std::runtime_error(args[0] + " failed (" + std::to_string(run.status) + "): " + run.err);
}

// Each line of a side's .vocab file: a piece, a tab, its score.
std::vector<std::pair<std::string, double>> pieces_of(const fs::path& vocab_file) {
    std::vector<std::pair<std::string, double>> pieces;
    std::ifstream in(vocab_file);
    for (std::string line; std::getline(in, line);) {
        const size_t tab = line.find('\t');
        pieces.emplace_back(line.substr(0, tab), std::stod(line.substr(tab + 1)));
    }
    return pieces;
}

Trained::Trained() {
    const fs::path docs = fs::path(HEADSCOPE_TESTS_DIR).parent_path() / "docs";
    const std::string inputs[2] = {(docs / "cli.md").string() + "," + (docs / "architecture.md").string(),
                                   (docs.parent_path() / "README.md").string() + "," + (docs / "window.md").string()};
    const int sizes[2] = {400, 300};
    for (int side = 0; side < 2; ++side) {
        const fs::path prefix = dir.path / (side == 0 ? "source" : "target");
        run_tool({HEADSCOPE_SPM_TRAIN, "--input=" + inputs[side], "--model_prefix=" + prefix.string(),
                  "--vocab_size=" + std::to_string(sizes[side]), "--model_type=unigram", "--character_coverage=1.0",
                  "--num_threads=1", "--minloglevel=2"},
                 dir.path);
        model[side] = prefix.string() + ".model";
        vocab_file[side] = prefix.string() + ".vocab";
    }
    std::set<std::string> pieces;
    for (const fs::path& file : vocab_file)
        for (const auto& [piece, score] : pieces_of(file))
            if (piece != "<unk>" && piece != "<s>" && piece != "</s>") pieces.insert(piece);
    int id = 0;
    for (const char* first : {"</s>", "<pad>", "<unk>", ">>de<<", ">>fr<<"}) marian_vocab[first] = id++;
    for (const std::string& piece : pieces) marian_vocab[piece] = id++;
    if (id >= marian_vocab_bound) throw std::runtime_error("the trained pieces outgrow marian_vocab_bound");
}

const Trained& trained() {
    static const Trained t;
    return t;
}

}  // namespace

const fs::path& sentencepiece_model(Side side) { return trained().model[static_cast<int>(side)]; }

std::vector<std::vector<std::string>> reference_pieces(Side side, const std::vector<std::string>& texts) {
    return reference_pieces(sentencepiece_model(side), texts);
}

std::vector<std::vector<std::string>> reference_pieces(const fs::path& model, const std::vector<std::string>& texts) {
    TempDir scratch;
    const fs::path input = scratch.path / "texts.txt";
    std::string lines;
    for (const std::string& text : texts) lines += text + "\n";
    std::ofstream(input) << lines;
    const ProcessRun run = run_program(
        {HEADSCOPE_SPM_ENCODE, "--model=" + model.string(), "--output_format=piece", "--input=" + input.string()},
        scratch.path);
    if (run.status != 0) throw std::runtime_error("spm_encode failed: " + run.err);
    std::vector<std::vector<std::string>> pieces;
    std::istringstream out(run.out);
    for (std::string line; std::getline(out, line);) {
        std::istringstream words(line);
        pieces.emplace_back();
        for (std::string piece; words >> piece;) pieces.back().push_back(piece);
    }
    if (pieces.size() != texts.size()) throw std::runtime_error("spm_encode wrote another number of lines");
    return pieces;
}

std::string protobuf_bytes_field(int field, const std::string& bytes) {
    std::string out(1, static_cast<char>(field << 3 | 2));
    for (uint64_t v = bytes.size(); v >= 0x80; v >>= 7) out += static_cast<char>((v & 0x7F) | 0x80);
    for (uint64_t v = bytes.size();; v >>= 7)
        if (v < 0x80) return out + static_cast<char>(v) + bytes;
}

std::string sentencepiece_piece(const std::string& piece, float score) {
    std::string score_field(1, static_cast<char>(2 << 3 | 5));  // SentencePiece.score, a fixed32 float
    uint32_t bits = 0;
    std::memcpy(&bits, &score, 4);
    for (int i = 0; i < 4; ++i) score_field += static_cast<char>(bits >> (8 * i));  // little-endian
    return protobuf_bytes_field(1, protobuf_bytes_field(1, piece) + score_field);
}

const json& marian_vocab() { return trained().marian_vocab; }

void write_marian_tokenizer(const fs::path& dir) {
    fs::create_directories(dir);
    fs::copy_file(sentencepiece_model(Side::source), dir / "source.spm", fs::copy_options::overwrite_existing);
    fs::copy_file(sentencepiece_model(Side::target), dir / "target.spm", fs::copy_options::overwrite_existing);
    std::ofstream(dir / "vocab.json") << marian_vocab().dump(2) << "\n";
}

std::vector<int32_t> marian_reference_ids(Side side, const std::string& text) {
    std::vector<int32_t> ids;
    const json& vocab = marian_vocab();
    auto id_of = [&](const std::string& piece) {
        return vocab.contains(piece) ? vocab[piece].get<int32_t>() : marian_unk_id;
    };
    std::string rest = text;
    // remove_language_code: text.startswith(">>") and text.find("<<") != -1
    if (rest.rfind(">>", 0) == 0 && rest.find("<<") != std::string::npos) {
        const size_t end = rest.find("<<") + 2;
        ids.push_back(id_of(rest.substr(0, end)));
        rest = rest.substr(end);
    }
    const std::vector<std::vector<std::string>> pieces = reference_pieces(side, {rest});
    for (const std::string& piece : pieces.front()) ids.push_back(id_of(piece));
    ids.push_back(marian_eos_id);
    return ids;
}

json unigram_json_of(Side side, SpmLayout layout) {
    json vocab = json::array();
    for (const auto& [piece, score] : pieces_of(trained().vocab_file[static_cast<int>(side)]))
        vocab.push_back({piece, score});
    json added = json::array();
    for (int id = 0; id < 3; ++id)  // <unk> <s> </s>, spm_train's control pieces
        added.push_back({{"id", id},
                         {"content", vocab[id][0]},
                         {"single_word", false},
                         {"lstrip", false},
                         {"rstrip", false},
                         {"normalized", false},
                         {"special", true}});
    const std::string meta = "\xE2\x96\x81";  // ▁
    const json precompiled = {{"type", "Precompiled"}, {"precompiled_charsmap", "AA=="}};
    const bool first = layout == SpmLayout::first;
    // The first converter wrote add_prefix_space; the current one, prepend_scheme and split.
    const json metaspace =
        first ? json{{"type", "Metaspace"}, {"replacement", meta}, {"add_prefix_space", true}}
              : json{{"type", "Metaspace"}, {"replacement", meta}, {"prepend_scheme", "always"}, {"split", true}};
    const json normalizer = first
                                ? precompiled
                                : json{{"type", "Sequence"},
                                       {"normalizers",
                                        {precompiled,
                                         {{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}},
                                         {{"type", "Replace"}, {"pattern", {{"Regex", " {2,}"}}}, {"content", meta}}}}};
    const json pre_tokenizer =
        first ? json{{"type", "Sequence"}, {"pretokenizers", {{{"type", "WhitespaceSplit"}}, metaspace}}} : metaspace;
    return {{"version", "1.0"},
            {"added_tokens", added},
            {"normalizer", normalizer},
            {"pre_tokenizer", pre_tokenizer},
            {"post_processor", nullptr},
            {"decoder", metaspace},
            {"model", {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}, {"byte_fallback", false}}}};
}

}  // namespace headscope::test
