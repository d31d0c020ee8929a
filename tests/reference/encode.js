// Reference for Headscope's tokenizer tests: reads a JSON array of strings on
// stdin and prints a JSON array of the GPT-2 token ids that gpt-3-encoder, an
// independent JavaScript port of GPT-2's encoder, gives each string.
'use strict';
const fs = require('fs');
const path = require('path');
const { encode } = require(path.join(__dirname, 'node_modules', 'gpt-3-encoder'));

const texts = JSON.parse(fs.readFileSync(0, 'utf8'));
process.stdout.write(JSON.stringify(texts.map(encode)));
