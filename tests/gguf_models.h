// Test support: the families of llama.cpp's architectures that Headscope
// reads (Llama, Qwen 2, Qwen 3, GPT-2, GPT-NeoX here; BERT and T5 in
// gguf_encoder_models.cpp; Gemma 2 and 3 too, each norm's weight stored as
// 1 + w) written as llama.cpp's converter writes them to
// GGUF: its key and tensor names, each head's rows of Q and K reordered for
// llama (its LlamaModel.permute), GPT-NeoX's query_key_value rows gathered
// into [Q | K | V], GPT-2's Conv1D weights transposed to (out, in), each
// matrix in the ggml type its MatrixTypes gives it (random valid blocks of
// the fan-in's spread, or the drawn floats for F32): one type for all, every
// type in turn, or llama.cpp's quantizer's mix of a preset (Q4_K_M...) with
// its fallbacks for rows not a multiple of 256; norms, biases, learned
// positions and T5's position bias in F32; the decoders with a small byte-level tokenizer, BERT and T5 with
// their own tokenizer models (gguf_vocabs.h). The checkpoint returned holds
// what the file holds, in Hugging Face's names and layout, as the tests' own
// block formulas (ggml_blocks_reference.h) read it: the double references
// (family_reference.h, encoder_reference.h, seq2seq_reference.h) run on it.
#pragma once
#include <algorithm>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "encoder_models.h"
#include "family_writer.h"
#include "ggml_blocks_reference.h"
#include "gguf_writer.h"
#include "headscope/base/dtype.h"
#include "headscope/compute/matmul.h"
#include "headscope/model/model.h"
#include "prediction_checks.h"
#include "seq2seq_models.h"

namespace headscope::test {

// The GGUF tests' two texts of the byte-level vocabulary, 11 and 7 tokens
// (the second padded in a batch), from bos (257).
inline const std::vector<std::vector<int32_t>> gguf_texts = {{257, 9, 100, 200, 129, 17, 30, 258, 42, 5, 77},
                                                             {257, 64, 256, 12, 90, 33, 2}};

// GPT-2's printable stand-in for each byte (its bytes_to_unicode), as UTF-8:
// the byte-level vocabularies' tokens.
std::string byte_token(int byte);

// A block of `type` (a block type Headscope reads) of random codes whose scales
// give values of about `spread`.
Block block_of_spread(GgmlType type, double spread, std::mt19937& rng);

// A FamilySpec for GGUF files: `family` with C = 256, F = 512 (GPT-2's 4C)
// and heads of 32 (whole blocks of 256 for every type), 2 layers, and the
// tokenizer's 259 ids (the 256 bytes, one merge, bos and eos); the
// mixtures of experts' 4 experts of Fe = 256, 2 a token. Gemma's with
// llama.cpp's head scale (query_pre_attn_scalar hs), a window of 4 keys,
// Gemma 2's caps bending the scores and logits, Gemma 3's 3 layers of
// sliding_window_pattern 3 (layer 2 global, at rope_theta 1e6 over the
// linear factor 8; the others at 10000).
FamilySpec gguf_family_spec(Family family);

// The ggml type of each matrix a file stores, chosen once for its llama.cpp
// name ("blk.1.ffn_down.weight") and row length (ne[0]), so that an expert
// tensor's slices share it; and the file's general.file_type (llama.cpp's
// llama_ftype). Copies share what was chosen.
class MatrixTypes {
public:
    using Choice = std::function<DType(const std::string& name, int64_t row)>;
    // Every matrix in `all`, the file type llama.cpp's for a file of them (a K type's _S or _M).
    MatrixTypes(DType all);  // NOLINT(google-explicit-constructor): a type converts, as the writers took one
    MatrixTypes(uint32_t file_type, Choice choose);
    DType operator()(const std::string& name, int64_t row) const;
    // Matrix `name` in `type`: where the converter fixes it (gpt-oss's experts), and by the name the loader gives it.
    DType fix(const std::string& name, DType type) const;
    uint32_t file_type() const { return file_type_; }
    // The type tensor `name` (llama.cpp's name) was written in: F32 where it was no matrix.
    DType written(const std::string& name) const;
    // The types of the matrices written so far.
    std::set<DType> types() const;

private:
    uint32_t file_type_;
    Choice choose_;
    std::shared_ptr<std::map<std::string, DType>> chosen_ = std::make_shared<std::map<std::string, DType>>();
};

// Every type Headscope reads (DType's 16, F32 to MXFP4) in turn, one matrix
// after another as written, from the `offset`-th; general.file_type Q8_0's,
// as llama-quantize writes a Q8_0 file whose every matrix it was given a type
// for (--tensor-type).
MatrixTypes rotated_types(int offset);

// llama.cpp's quantizer's mix for its K-quant file type `ftype` (Q2_K 10,
// Q3_K_S, _M, _L 11 to 13, Q4_K_S, _M 14, 15, Q5_K_S, _M 16, 17, Q6_K 18) of
// a decoder of `spec` (gguf_mixes.cpp, after llama-quant.cpp's
// llama_tensor_get_type): more bits for attn_v (or attn_qkv), ffn_down,
// attn_output and the output (or the tied token_embd) where it gives them,
// then its fallback for a row not a multiple of 256 (Q2_K and Q3_K to Q4_0,
// Q4_K to Q5_0, Q5_K to Q5_1, Q6_K to Q8_0; the output to Q8_0).
MatrixTypes llama_cpp_mix(uint32_t ftype, const FamilySpec& spec);

// How far llama.cpp's next-token probabilities may lie from exact
// arithmetic on a file of these matrices' types, for a model whose GELU
// (`gelu`) llama.cpp reads from a table of halves (gguf_mixes.cpp).
ProbabilityTolerance llama_cpp_tolerance(const MatrixTypes& matrices, bool gelu);

// The spec of a file whose matrices rotated_types(0) gives every one of the
// 16 types: `spec` with layers enough for 16 matrices (gguf_mixes.cpp).
FamilySpec every_type_spec(FamilySpec spec);
EncoderSpec every_type_spec(EncoderSpec spec);  // BERT's 6 a layer and the token table: 3 layers

// One GGUF file of each decoder architecture Headscope reads, every type
// Headscope reads among its matrices in turn (rotated_types(0), with
// every_type_spec's layers), and three more of one unquantized type for all
// (Llama F32, Qwen 3 F16, GPT-2 BF16), whose llama.cpp tolerances are
// tighter; the norms F32, gpt-oss's experts always MXFP4 (gguf_mixes.cpp).
// BERT's and T5's files of every type: gguf_bert_spec, gguf_t5_spec.
struct GgufCase {
    Family family;
    std::optional<DType> dtype;  // every matrix's; none: every type in turn
    FamilySpec spec() const;
    MatrixTypes matrices() const;   // a new one, which records what the writer gives each matrix
    std::string file_name() const;  // "llama-F32.gguf", "llama-every_type.gguf"
};
const std::vector<GgufCase>& gguf_architecture_cases();

// The first of `model`'s tensors not in the type `matrices` wrote it in
// (F32 where it wrote no matrix), with both types; "" where none is.
std::string tensor_types_unlike(const Model& model, const MatrixTypes& matrices);

// Writes `spec` into `file` with its matrices of `matrices`, changed by
// `edit` first if given (a hostile file); returns the checkpoint the file
// holds. A tied embedding table is written at a quarter of its drawn scale
// (std 1), whose logits of std sqrt(C) would give one token all the probability.
FamilyCheckpoint write_gguf_family(const std::filesystem::path& file, const FamilySpec& spec,
                                   const MatrixTypes& matrices, const std::function<void(GgufSpec&)>& edit = {});

// BERT (an EncoderSpec of C = 256, 8 heads of 32, F = 512, and the ids of
// bert_gguf_vocab) as the converter writes it: without its masked-LM head,
// positions and token types in F32, its WordPiece vocabulary as a `bert`
// tokenizer (bert_gguf_tokenizer).
EncoderSpec gguf_bert_spec();
EncoderCheckpoint write_gguf_bert(const std::filesystem::path& file, const EncoderSpec& spec,
                                  const MatrixTypes& matrices, const std::function<void(GgufSpec&)>& edit = {});

// T5 or Flan-T5 (seq2seq_variant `variant`, with C = 256, 8 heads of
// `head_dim`, F = 512, the ids of the nmt_nfkc Unigram model of
// unigram_gguf_vocab, and the position bias's largest distance llama.cpp's
// fixed 128) as the converter writes it: the position bias in F32, that
// model as a `t5` tokenizer (t5_gguf_tokenizer).
Seq2SeqSpec gguf_t5_spec(const std::string& variant, int head_dim);
Seq2SeqCheckpoint write_gguf_t5(const std::filesystem::path& file, const Seq2SeqSpec& spec, const MatrixTypes& matrices,
                                const std::function<void(GgufSpec&)>& edit = {});

// The parts each architecture's writer shares.

// llama.cpp's names for Hugging Face's (gguf-py's tensor_mapping.py):
// outside the layers whole, a layer's after its prefix and number.
struct NameTable {
    std::string hf_layer_prefix, gguf_layer_prefix;  // before the layer's number: "model.layers.", "blk."
    std::map<std::string, std::string> outside, layer;
    // llama.cpp's name for `hf`; "" for a name outside the table's layers and names.
    std::string gguf_name(const std::string& hf) const;
};

// How the converter stores one of Hugging Face's tensors.
struct StoredAs {
    std::string name;  // llama.cpp's
    std::function<int64_t(int64_t)>
        row;                  // the Hugging Face row of each stored row (a vector's entries alike); null: its own
    bool transposed = false;  // stored (out, in) from Hugging Face's (in, out) (GPT-2's Conv1D)
    // A matrix in the type its MatrixTypes gives; else F32, as llama.cpp's quantizer leaves
    // learned positions, token types and T5's position bias.
    bool quantized = true;
    float added = 0;  // added to each of a vector's values (Gemma's norms: the converter stores 1 + w)
};

struct Written {
    GgufTensorSpec spec;
    std::vector<float> values;  // as the file holds them, in Hugging Face's layout
};

// Tensor `t` as the file stores it, a matrix in the type `matrices` gives it
// (its blocks drawn by `rng`), and its values as read back.
Written tensor_as_stored(const NamedTensor& t, const StoredAs& as, const MatrixTypes& matrices, std::mt19937& rng);

// Each of `tensors` as `stored_as` says (none whose name there is ""), its
// values replaced by those the file holds; the blocks drawn from `seed`.
void write_tensors(GgufSpec& gguf, std::vector<NamedTensor>& tensors,
                   const std::function<StoredAs(const std::string&)>& stored_as, const MatrixTypes& matrices,
                   uint64_t seed);

// general.architecture and general.file_type, `matrices`'.
void write_gguf_header(GgufSpec& gguf, const std::string& arch, const MatrixTypes& matrices);

// Whether `hf` is a tensor of `spec`'s layers of experts (a router's or an
// expert's), which write_expert_tensors writes (gguf_moe_models.cpp).
bool written_with_experts(const FamilySpec& spec, const std::string& hf);
// Each layer of experts' router (F32) and experts (three 3-D tensors in the
// types `matrices` gives) into `gguf`, the checkpoint's values replaced by those the file
// holds; the blocks drawn from `seed`.
void write_expert_tensors(GgufSpec& gguf, FamilyCheckpoint& checkpoint, const MatrixTypes& matrices, uint64_t seed);

// The byte-level tokenizer (a "gpt2" model, pre-tokenizer `pre`): 259 ids,
// the 256 bytes, one merge, then `bos` and `eos` at 257 and 258.
void write_byte_tokenizer(GgufSpec& gguf, const std::string& pre, int bos, int eos);

// How much wider than float32's the tolerance of a GGUF model's maps is when
// this machine computes a prompt's products over `dtype` on AMX-BF16 tiles
// (matmul.h's tile_products): x enters them as two BF16 parts, within 2^-16
// of each value, where the float32 products hold it to 2^-24, and the maps
// of the tests' models then move by up to 7e-5 (a T5's cross-attention;
// Llamas' 1.3e-5, BERT's 2.7e-5): 5, else 1. Those tests' forwards are of
// more than a few rows (test_gguf_models: two texts of 11 positions, 22), so
// that their products over those types run on the tiles.
inline double tiles_widen(DType dtype) { return tile_products(dtype) ? 5 : 1; }
// The widest of a file's matrices' types'.
inline double tiles_widen(const MatrixTypes& matrices) {
    double widest = 1;
    for (DType type : matrices.types()) widest = std::max(widest, tiles_widen(type));
    return widest;
}

}  // namespace headscope::test
