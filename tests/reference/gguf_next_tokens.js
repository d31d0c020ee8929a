// Reference for Headscope's GGUF model tests: reads JSON {"model": a GGUF
// file's path, "texts": [[ids], ...]} on stdin, evaluates each text's ids
// with llama.cpp (node-llama-cpp's prebuilt build, on the CPU; the model
// loaded once, each text from an empty cache) and prints, for each, the 5
// most likely next tokens after its last as JSON [[[id, probability], ...],
// ...]: the softmax of its logits (temperature 1, no top-k, top-p or min-p
// cut), computed in float32 throughout.
'use strict';
const fs = require('fs');

(async () => {
  const request = JSON.parse(fs.readFileSync(0, 'utf8'));
  const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: request.model, gpuLayers: 0 });
  // Its cache in float32 (by default float16, which rounds every key and
  // value), and no flash attention (whose CPU kernel rounds to float16 too).
  const context = await model.createContext({
    contextSize: 256,
    threads: 2,
    flashAttention: false,
    experimentalKvCacheKeyType: 'F32',
    experimentalKvCacheValueType: 'F32',
  });
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
  process.stdout.write(JSON.stringify(results));
  await context.dispose();
  await model.dispose();
  await llama.dispose();
})().catch((error) => {
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
});
