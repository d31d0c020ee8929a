// Reference for Headscope's GGUF benchmark (tests/bench_gguf.cpp): reads JSON
// {"model": a GGUF file's path, "tokens": [ids], "threads": n} on stdin and
// times llama.cpp (node-llama-cpp's prebuilt build, on the CPU, its default
// cache and attention) on them: the prompt processed whole, three times from
// an empty cache, and a generated token after it, eight times with its next
// token's logits (the output layer read, as generation reads it) and eight
// without (llama.cpp then skips the output layer and the last layer's
// feed-forward: a fifth of a Llama-3.2-1B-shaped file unread). Prints JSON
// {"prompt_ms": median, "token_ms": median, "token_without_logits_ms": median}.
'use strict';
const fs = require('fs');

const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];

(async () => {
  const request = JSON.parse(fs.readFileSync(0, 'utf8'));
  const { getLlama, LlamaLogLevel } = await import('node-llama-cpp');
  const llama = await getLlama({ gpu: false, build: 'never', logLevel: LlamaLogLevel.error });
  const model = await llama.loadModel({ modelPath: request.model, gpuLayers: 0 });
  const context = await model.createContext({
    contextSize: 512,
    batchSize: 512,
    threads: request.threads,
  });
  const sequence = context.getSequence();
  const prompt = [], token = [], without = [];
  const next = [{ generateNext: { token: true } }];
  for (let run = 0; run < 3; ++run) {
    await sequence.clearHistory();
    let start = process.hrtime.bigint();
    await sequence.evaluateWithoutGeneratingNewTokens(request.tokens);
    prompt.push(Number(process.hrtime.bigint() - start) / 1e6);
    if (run > 0) continue;
    for (let step = 0; step < 16; ++step) {
      start = process.hrtime.bigint();
      if (step % 2) await sequence.evaluateWithoutGeneratingNewTokens([request.tokens[step]]);
      else await sequence.controlledEvaluate([[request.tokens[step], ...next]]);
      (step % 2 ? without : token).push(Number(process.hrtime.bigint() - start) / 1e6);
    }
  }
  process.stdout.write(JSON.stringify({
      prompt_ms: median(prompt),
      token_ms: median(token),
      token_without_logits_ms: median(without),
    }));
  await context.dispose();
  await model.dispose();
  await llama.dispose();
})().catch((error) => {
  process.stderr.write(`${error.message}\n`);
  process.exit(1);
});
