// Reference for Headscope's GGUF tokenizer tests: reads JSON {"model": a GGUF
// file's path, "texts": [...]} on stdin and prints a JSON array of the token
// ids llama.cpp (node-llama-cpp's prebuilt one, on the CPU, the vocabulary
// alone loaded) gives each text, as llama_tokenize(text, add_special = true,
// parse_special = false) does: model.tokenize(text) passes add_special =
// false, so the tokens that add_special adds are put around it here, as
// llama.cpp's llama_vocab::impl::tokenize adds them: for a WPM (bert)
// vocabulary always bos ([CLS]) and sep ([SEP]); for the others bos and eos
// where llama_vocab_get_add_bos and get_add_eos say (asked of the addon
// itself: model.tokens' getters say false without a bos token, which a T5's
// vocabulary lacks).
'use strict';
const fs = require('fs');

(async () => {
  const request = JSON.parse(fs.readFileSync(0, 'utf8'));
  const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: request.model, vocabOnly: true });
  const { bos, eos, sep } = model.tokens;
  const wpm = model.vocabularyType === 'wpm';
  const first = wpm || model._model.shouldPrependBosToken() ? [bos] : [];
  const last = wpm ? [sep] : model._model.shouldAppendEosToken() ? [eos] : [];
  // node-llama-cpp names a bos or eos token only when it is a control token.
  if ([...first, ...last].includes(null)) throw new Error('node-llama-cpp names no token to add around a text');
  const ids = request.texts.map((text) => [...first, ...model.tokenize(text, false), ...last]);
  process.stdout.write(JSON.stringify(ids));
  await model.dispose();
  await llama.dispose();
})().catch((error) => {
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
});
