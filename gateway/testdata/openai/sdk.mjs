// The official OpenAI SDK (npm "openai") against Gatehouse: OPENAI_BASE_URL
// (Gatehouse's /v1) and OPENAI_API_KEY (a client key), no retries. Run by
// TestOpenAISDKRateLimitHeaders (gateway/openai_sdk_test.go); OPENAI_DIR is
// where the pinned SDK is installed, OPENAI_MODEL the model to ask for.
// Prints one JSON object: per call, the X-RateLimit-* and X-Gatehouse-Queue-Ms
// headers as the SDK's response.headers gives them (.withResponse()), and
// for the sixth call, which the key's token budget refuses, the status and
// headers of the SDK's error.
import { createRequire } from "node:module";

const require = createRequire(process.env.OPENAI_DIR + "/");
const { OpenAI } = require("openai");

const client = new OpenAI({ maxRetries: 0 });
const model = process.env.OPENAI_MODEL;
const messages = [{ role: "user", content: "Say hello." }];
// A small output bound keeps the request's token estimate (input ÷ 4 + the
// bound) under what the key has left until its budget is spent.
const max_tokens = 1;
const names = [
  "x-ratelimit-limit-requests", "x-ratelimit-remaining-requests", "x-ratelimit-reset-requests",
  "x-ratelimit-limit-tokens", "x-ratelimit-remaining-tokens", "x-ratelimit-reset-tokens",
  "x-gatehouse-queue-ms",
];
const pick = (h) => Object.fromEntries(names.map((n) => [n, h.get(n)]));
const out = { calls: [] };

for (let i = 0; i < 5; i++) {
  const stream = i === 3;
  const { data, response } = await client.chat.completions.create({ model, messages, max_tokens, stream }).withResponse();
  let text = "";
  if (stream) {
    for await (const chunk of data) text += chunk.choices[0]?.delta?.content ?? "";
  } else {
    text = data.choices[0].message.content;
  }
  out.calls.push({ stream, status: response.status, text, headers: pick(response.headers) });
}

try {
  await client.chat.completions.create({ model, messages, max_tokens });
  out.refused = { status: 0 };
} catch (e) {
  out.refused = { status: e.status, name: e.constructor.name, headers: e.headers ? pick(e.headers) : null };
}

process.stdout.write(JSON.stringify(out) + "\n");
