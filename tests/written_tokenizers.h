// Test support: tokenizer.json files written from real vocabularies, for
// the tokenizer tests and the test checkpoints: a Unigram model (XLM-R's
// layout, or T5's) from GPT-2's all-letter words as SentencePiece pieces
// ("Ġword" as "▁word") scored by their merge rank, with single characters
// for most of ASCII; and RoBERTa's byte-level BPE (GPT-2's vocabulary and
// merges, its special tokens after GPT-2's ids), which BART shares.
#pragma once
#include <nlohmann/json.hpp>

namespace headscope::test {

// XLM-R's: <s> <pad> </s> <unk> first, <mask> last, <s> A </s>. T5's: <pad>
// </s> <unk> first, <extra_id_0> last, A </s>.
enum class UnigramLayout { xlm_r, t5 };
// Each made once per process.
const nlohmann::json& unigram_tokenizer_json(UnigramLayout layout);
const nlohmann::json& roberta_tokenizer_json();

}  // namespace headscope::test
