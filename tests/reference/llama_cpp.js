// llama.cpp for Headscope's GGUF tests (node-llama-cpp's prebuilt build, on
// the CPU), kept running for a whole test program: starting node and loading
// llama.cpp's library takes about a second. Reads one JSON request a line on
// stdin and answers each with one JSON line on stdout, {"error": message}
// when it fails:
//
// {"tokenize": a GGUF file's path, "texts": [...]} → the token ids of each
// text, as llama_tokenize(text, add_special = true, parse_special = false)
// gives them: model.tokenize(text) passes add_special = false, so the tokens
// that add_special adds are put around it here, as llama.cpp's
// llama_vocab::impl::tokenize adds them: for a WPM (bert) vocabulary always
// bos ([CLS]) and sep ([SEP]); for the others bos and eos where
// llama_vocab_get_add_bos and get_add_eos say (asked of the addon itself:
// model.tokens' getters say false without a bos token, which a T5's
// vocabulary lacks). Only the vocabulary is loaded.
//
// {"next_tokens": a GGUF file's path, "texts": [[ids], ...]} → for each
// text, evaluated from an empty cache, the 5 most likely next tokens after
// its last, [[id, probability], ...]: the softmax of its logits
// (temperature 1, no top-k, top-p or min-p cut), in float32 throughout.
'use strict';
const readline = require('readline');

async function tokenize(llama, request) {
  const model = await llama.loadModel({ modelPath: request.tokenize, vocabOnly: true });
  try {
    const { bos, eos, sep } = model.tokens;
    const wpm = model.vocabularyType === 'wpm';
    const first = wpm || model._model.shouldPrependBosToken() ? [bos] : [];
    const last = wpm ? [sep] : model._model.shouldAppendEosToken() ? [eos] : [];
    // node-llama-cpp names a bos or eos token only when it is a control token.
    if ([...first, ...last].includes(null)) throw new Error('node-llama-cpp names no token to add around a text');
    return request.texts.map((text) => [...first, ...model.tokenize(text, false), ...last]);
  } finally {
    await model.dispose();
  }
}

async function nextTokens(llama, request) {
  const model = await llama.loadModel({ modelPath: request.next_tokens, gpuLayers: 0 });
  // Its cache in float32 (by default float16, which rounds every key and
  // value), and no flash attention (whose CPU kernel rounds to float16 too).
  // One thread: ggml's second spins while it waits, which cost the tests
  // 5.6 CPU-s where one took 1.0 on 16 small files (7 December, a loaded
  // machine); each output row is one thread's work either way, and the
  // answers were the same to the bit.
  const context = await model.createContext({
    contextSize: 256,
    threads: 1,
    flashAttention: false,
    experimentalKvCacheKeyType: 'F32',
    experimentalKvCacheValueType: 'F32',
  });
  try {
    const sequence = context.getSequence();
    const next = { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } };
    const results = [];
    for (const tokens of request.texts) {
      await sequence.clearHistory();
      const output = await sequence.controlledEvaluate(tokens.map((id, i) => (i + 1 < tokens.length ? id : [id, next])));
      const probabilities = [...output[tokens.length - 1].next.probabilities.entries()];
      probabilities.sort((a, b) => b[1] - a[1]);
      results.push(probabilities.slice(0, 5));
    }
    return results;
  } finally {
    await context.dispose();
    await model.dispose();
  }
}

(async () => {
  const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
  for await (const line of readline.createInterface({ input: process.stdin })) {
    let answer;
    try {
      const request = JSON.parse(line);
      answer = request.tokenize !== undefined ? await tokenize(llama, request) : await nextTokens(llama, request);
    } catch (error) {
      answer = { error: error.message };
    }
    process.stdout.write(`${JSON.stringify(answer)}\n`);
  }
  await llama.dispose();
})().catch((error) => {
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
});
