// Reference for Headscope's GGUF model tests: reads JSON {"model": a GGUF
// file's path, "tokens": [ids]} on stdin, evaluates the ids with llama.cpp
// (node-llama-cpp's prebuilt build, on the CPU) and prints the 5 most likely
// next tokens after the last as JSON [[id, probability], ...]: the softmax
// of its logits (temperature 1, no top-k, top-p or min-p cut), computed in
// float32 throughout.
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
  const input = request.tokens.map((id, i) =>
    i + 1 < request.tokens.length
      ? id
      : [id, { generateNext: { probabilities: true, options: { temperature: 1, topK: 0, topP: 1, minP: 0 } } }]);
  const output = await sequence.controlledEvaluate(input);
  const probabilities = [...output[request.tokens.length - 1].next.probabilities.entries()];
  probabilities.sort((a, b) => b[1] - a[1]);
  process.stdout.write(JSON.stringify(probabilities.slice(0, 5)));
  await context.dispose();
  await model.dispose();
  await llama.dispose();
})().catch((error) => {
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
});
