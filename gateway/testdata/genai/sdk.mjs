// The official @google/genai SDK against Gatehouse, configured the way Gemini CLI
// configures it: GOOGLE_GEMINI_BASE_URL (Gatehouse) and GEMINI_API_KEY (a client key),
// with the SDK's default API version. Run by TestGenAISDK (gateway/genai_sdk_test.go);
// GENAI_DIR is where the pinned SDK is installed, GENAI_MODEL the model to ask for.
// Prints one JSON object with what each call returned.
import { createRequire } from "node:module";

const require = createRequire(process.env.GENAI_DIR + "/");
const { GoogleGenAI } = require("@google/genai");

const ai = new GoogleGenAI({});
const model = process.env.GENAI_MODEL;
const contents = "Say hello.";
const out = {};

const res = await ai.models.generateContent({ model, contents });
out.generate = { text: res.text, usage: res.usageMetadata };

let chunks = 0;
let text = "";
let usage = null;
for await (const chunk of await ai.models.generateContentStream({ model, contents })) {
  chunks++;
  text += chunk.text ?? "";
  if (chunk.usageMetadata) usage = chunk.usageMetadata;
}
out.stream = { chunks, text, usage };

const count = await ai.models.countTokens({ model, contents });
out.countTokens = { totalTokens: count.totalTokens };

// An error the gateway makes itself, as the SDK reports it.
try {
  await ai.models.generateContent({ model: "no-such-model", contents });
  out.notFound = { error: "none" };
} catch (e) {
  out.notFound = { status: e.status, message: String(e.message).slice(0, 300) };
}

process.stdout.write(JSON.stringify(out) + "\n");
