// Reference for Headscope's GGUF tokenizer tests: reads JSON {"model": a GGUF
// file's path, "texts": [...]} on stdin and prints a JSON array of the token
// ids llama.cpp (node-llama-cpp's prebuilt one, on the CPU, the vocabulary
// alone loaded) gives each text, as llama_tokenize(text, add_special = true,
// parse_special = false) does: model.tokenize(text) passes add_special =
// false, so the bos and eos tokens that add_special adds (llama.cpp's
// llama_vocab_get_add_bos and get_add_eos) are put around it here.
'use strict';
const fs = require('fs');

(async () => {
  const request = JSON.parse(fs.readFileSync(0, 'utf8'));
  const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: request.model, vocabOnly: true });
  const { bos, eos, shouldPrependBosToken, shouldAppendEosToken } = model.tokens;
  const ids = request.texts.map((text) => [
    ...(shouldPrependBosToken ? [bos] : []),
    ...model.tokenize(text, false),
    ...(shouldAppendEosToken ? [eos] : []),
  ]);
  process.stdout.write(JSON.stringify(ids));
  await model.dispose();
  await llama.dispose();
})().catch((error) => {
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
});
