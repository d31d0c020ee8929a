// Test support: a BERT tokenizer.json (WordPiece, BertNormalizer,
// BertPreTokenizer, [CLS] A [SEP] and [CLS] A [SEP] B [SEP]) written from a
// real vocabulary: GPT-2's all-letter words, lowercased, those that start a
// word as themselves and the rest as "##" continuations, after BERT's
// special tokens [PAD] [UNK] [CLS] [SEP] [MASK] (ids 0-4), some CJK
// ideographs and punctuation.
#pragma once
#include <nlohmann/json.hpp>

namespace headscope::test {

const nlohmann::json& wordpiece_vocab();                          // {token: id}, made once per process
nlohmann::json bert_tokenizer_json(const nlohmann::json& vocab);  // the whole tokenizer.json

}  // namespace headscope::test
