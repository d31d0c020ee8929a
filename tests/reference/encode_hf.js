// Reference for Headscope's tokenizer.json tests: reads JSON
// {"tokenizer": "llama3" | "qwen3" | "llama2" | "gemma3" | "gptoss", "add_special": bool, "texts": [...]}
// (or, instead of "tokenizer", "tokenizer_json": a file's path and "tokenizer_config": an object;
// and, instead of "texts", "pairs": [[first, second], ...], for which it prints
// {"ids": [...], "types": [...]} each, the pair template's ids and token types)
// on stdin and prints a JSON array of the token ids that @lenml/tokenizers,
// a JavaScript port of transformers' tokenizers, gives each text. It reads
// the same models/tokenizer.json that the tests load. With "add_special":
// [true, false] it prints one such array for each (a large file is read once).
'use strict';
const fs = require('fs');
const path = require('path');

const request = JSON.parse(fs.readFileSync(0, 'utf8'));
const modules = path.join(__dirname, 'node_modules', '@lenml');
const { TokenizerLoader } = require(path.join(modules, 'tokenizers'));
const readJson = (file) => JSON.parse(fs.readFileSync(file, 'utf8'));
let files;
if (request.tokenizer_json) {
  // A file the test wrote (a WordPiece tokenizer.json, say) and its tokenizer_config.
  files = { tokenizerJSON: readJson(request.tokenizer_json), tokenizerConfig: request.tokenizer_config };
} else {
  const names = ['llama3', 'qwen3', 'llama2', 'gemma3', 'gptoss'];
  if (!names.includes(request.tokenizer)) {
    throw new Error(`tokenizer must be one of ${names.join(', ')}, got ${request.tokenizer}`);
  }
  const models = path.join(modules, `tokenizer-${request.tokenizer}`, 'models');
  files = {
    tokenizerJSON: readJson(path.join(models, 'tokenizer.json')),
    tokenizerConfig: readJson(path.join(models, 'tokenizer_config.json')),
  };
}
const tokenizer = TokenizerLoader.fromPreTrained(files);
if (request.pairs) {
  const pairs = request.pairs.map(([first, second]) => {
    const encoded = tokenizer._call(first, { text_pair: second, return_token_type_ids: true });
    return { ids: Array.from(encoded.input_ids), types: Array.from(encoded.token_type_ids) };
  });
  process.stdout.write(JSON.stringify(pairs));
} else {
  const encode = (add_special) =>
    request.texts.map((text) => tokenizer.encode(text, { add_special_tokens: add_special }));
  const ids = Array.isArray(request.add_special) ? request.add_special.map(encode) : encode(request.add_special);
  process.stdout.write(JSON.stringify(ids));
}
